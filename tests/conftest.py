"""Shared fixtures: the real MetaQA and demo graphs, and the real bundled models.

Session-scoped so the MetaQA graph is loaded once (about 10 s) and each model
is loaded once per test run. Kùzu lets one process open a database once, so
tests use these open handles rather than reopening the paths.
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SAMPLE_HUB = 200  # nodes with more facts than this (genres, languages) are left out of the MetaQA sample graph


@pytest.fixture(scope="session")
def shared() -> Path:
    """``../shared/data`` beside the checkout (read-only datasets); a test that needs them is
    skipped, saying where they were looked for, when they are not there."""
    if not SHARED.is_dir():
        pytest.skip(f"needs the shared datasets at {SHARED} (../shared/data beside the checkout)")
    return SHARED


@pytest.fixture(scope="session")
def metaqa_kg(tmp_path_factory: pytest.TempPathFactory, shared: Path):
    """The full MetaQA knowledge base (133,582 facts), ids = names."""
    from localkg.loaders.triples import load_triples
    from localkg.store import KG

    kg = KG.create(tmp_path_factory.mktemp("metaqa") / "db")
    load_triples(kg, [shared / "metaqa" / "kb.txt"], progress=False)
    yield kg
    kg.close()


@pytest.fixture(scope="session")
def metaqa_sample(tmp_path_factory: pytest.TempPathFactory, shared: Path) -> tuple[Path, Path]:
    """40 MetaQA dev questions (30 one-hop, 10 two-hop) with their qtype file, and a store with
    the MetaQA facts around their topic entities (enough to answer them)."""
    from localkg.store import KG

    folder = tmp_path_factory.mktemp("metaqa-sample")
    lines, qtypes = [], []
    for hop, count in ((1, 30), (2, 10)):
        lines += (shared / "metaqa" / f"{hop}-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()[:count]
        qtypes += (shared / "metaqa" / f"{hop}-hop" / "qa_dev_qtype.txt").read_text().splitlines()[:count]
    questions = folder / "qa_dev.txt"
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "qa_dev_qtype.txt").write_text("\n".join(qtypes) + "\n")

    incident = defaultdict(list)
    for line in (shared / "metaqa" / "kb.txt").read_text(encoding="utf-8").splitlines():
        head, relation, tail = line.split("|")
        incident[head].append((head, relation, tail))
        incident[tail].append((head, relation, tail))
    topics = {re.search(r"\[(.+?)\]", line).group(1) for line in lines}
    around = set(topics) | {end for t in topics for h, _, tl in incident[t] for end in (h, tl)}
    facts = sorted({fact for node in around if len(incident[node]) <= SAMPLE_HUB for fact in incident[node]})
    db = folder / "db"
    kg = KG.create(db)
    kg.add_triples(facts)
    kg.close()
    return questions, db


@pytest.fixture(scope="session")
def demo_kg(tmp_path_factory: pytest.TempPathFactory):
    """The bundled demo movie graph."""
    from localkg.demo import ensure_demo_db
    from localkg.store import KG

    kg = KG.open(ensure_demo_db(tmp_path_factory.mktemp("demo") / "db"))
    yield kg
    kg.close()


@pytest.fixture(scope="session")
def llm():
    """The real bundled GGUF model (Gemma 3 270M), loaded once."""
    from localkg.llm import LLM

    return LLM()


@pytest.fixture(scope="session")
def scorer():
    """The real bundled MiniLM relevance scorer, loaded once."""
    from localkg.indexes.scoring import RelevanceScorer

    return RelevanceScorer()


@pytest.fixture()
def distance_checkpoint(scorer):
    """Writes a fog checkpoint whose answer-distance head always predicts ``hops`` (``None``: a
    checkpoint without the head, as written before it existed); returns its path."""
    import torch

    from localkg.fog.checkpoint import save_checkpoint
    from localkg.fog.model import ForesightScorer, ScorerConfig

    def write(path: Path, hops: int | None) -> Path:
        model = ForesightScorer(ScorerConfig(encoder_dim=scorer.embedder.dim, hidden=16,
                                             answer_distance=hops is not None))
        if hops is not None:
            last = model.distance_head[-1]
            with torch.no_grad():
                last.weight.zero_()
                last.bias.fill_(-10.0)
                last.bias[hops] = 10.0
        return save_checkpoint(path, model, scorer.embedder.model_name, {"trained_on": "nothing (test)"})

    return write


# ---------------------------------------------------------------- load reliability (generated dumps)
MAKE_DUMP = SHARED.parent / "tools" / "make_dump.py"


class Dumps:
    """Generated dumps, split, and everything a store holds, for the load-reliability tests."""

    @staticmethod
    def make_dump(out: Path, kind: str, entities: int, *extra: str) -> dict:
        """Write a generated ``freebase`` or ``wikidata`` dump; return make_dump's summary."""
        import json
        import subprocess
        import sys

        done = subprocess.run([sys.executable, str(MAKE_DUMP), kind, "--entities", str(entities), "--out", str(out),
                               *extra], check=True, capture_output=True, text=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    @staticmethod
    def split_after(path: Path, line: int, folder: Path) -> tuple[Path, Path]:
        """The file's first ``line`` lines and the rest, as two files in ``folder``."""
        lines = path.read_bytes().splitlines(keepends=True)
        first, rest = folder / f"{path.stem}.1{path.suffix}", folder / f"{path.stem}.2{path.suffix}"
        first.write_bytes(b"".join(lines[:line]))
        rest.write_bytes(b"".join(lines[line:]))
        return first, rest

    @staticmethod
    def contents(db: Path) -> dict[str, list]:
        """Every node (with its attributes), fact, relation (with its counts), label, name link and hub
        summary of the store at ``db``, sorted: two stores are the same graph when these are equal."""
        from localkg.store import KG

        with KG.open(db, read_only=True) as kg:
            def rows(query: str) -> list:
                return sorted(tuple(tuple(sorted(v)) if isinstance(v, list) else v for v in row)
                              for row in kg.execute(query).get_all())
            return {
                "nodes": rows("MATCH (n:Node) RETURN n.id, n.name, n.kind, n.aliases, n.description, n.types, n.value, "
                              "n.datatype, n.lang, n.hub"),
                "facts": rows("MATCH (a:Node)-[f:Fact]->(b:Node) RETURN a.id, f.rel, b.id"),
                "relations": rows("MATCH (r:Relation) RETURN r.id, r.label, r.description, r.facts"),
                "labels": rows("MATCH (l:Label) RETURN l.id"),
                "names": rows("MATCH (l:Label)-[x:Names]->(n:Node) RETURN l.id, x.how, n.id"),
                "summaries": rows("MATCH (n:Node)-[h:HasRel]->(r:Relation) RETURN n.id, h.dir, r.id, sum(h.n)"),
            }


@pytest.fixture(scope="session")
def dumps() -> type[Dumps]:
    if not MAKE_DUMP.is_file():
        pytest.skip(f"needs the dump generator at {MAKE_DUMP} (../shared/tools beside the checkout)")
    return Dumps


# ---------------------------------------------------------------- learned relation paths (hand-built movie graph)
PATH_FIXTURES = Path(__file__).parent / "fixtures"
PATHS_HELD_OUT = "Vertigo"  # no training question of the ``trained_paths`` checkpoint mentions it


@pytest.fixture(scope="session")
def path_movies(tmp_path_factory: pytest.TempPathFactory):
    """tests/fixtures/path_movies.tsv: eleven films with director, actors and year, and one fact
    no question reaches; the questions are tests/fixtures/path_questions.jsonl."""
    from localkg.loaders.triples import load_triples
    from localkg.store import KG

    kg = KG.create(tmp_path_factory.mktemp("path-movies") / "db")
    load_triples(kg, [PATH_FIXTURES / "path_movies.tsv"], progress=False)
    yield kg
    kg.close()


@pytest.fixture(scope="session")
def trained_paths(path_movies, scorer, tmp_path_factory: pytest.TempPathFactory):
    """A tiny path scorer trained on every fixture question not about Vertigo: (checkpoint, report)."""
    import torch

    from localkg.datasets import read_questions
    from localkg.path_scorer.supervision import SupervisionLimits
    from localkg.path_scorer.train import TrainConfig, supervise, train_scorer

    torch.manual_seed(0)
    questions = [q for q in read_questions(PATH_FIXTURES / "path_questions.jsonl") if PATHS_HELD_OUT not in q.text]
    labelled, report = supervise(path_movies, questions, [q.topic_entities for q in questions],
                                 SupervisionLimits(max_hops=2))
    out = tmp_path_factory.mktemp("path-scorer") / "scorer.pt"
    config = TrainConfig(epochs=40, hidden=32, batch_size=8, validation=0.0)
    return out, train_scorer(path_movies, labelled, scorer.embedder, config, out, report)


@pytest.fixture()
def movie_store(tmp_path_factory: pytest.TempPathFactory, trained_paths):
    """Makes a closed store of tests/fixtures/path_movies.tsv for a command to open, with the
    ``trained_paths`` scorer beside it (where `localkg train paths` writes) when ``scorer``;
    returns its path."""
    import shutil

    from localkg.loaders.triples import load_triples
    from localkg.path_scorer.location import default_checkpoint
    from localkg.store import KG

    def make(scorer: bool) -> Path:
        path = tmp_path_factory.mktemp("movie-store") / "db"
        with KG.create(path) as kg:
            load_triples(kg, [PATH_FIXTURES / "path_movies.tsv"], progress=False)
        if scorer:
            default_checkpoint(path).parent.mkdir(parents=True)
            shutil.copy(trained_paths[0], default_checkpoint(path))
        return path

    return make
