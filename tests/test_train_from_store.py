"""``localkg train paths`` with the store's own questions: no question-answer pairs at all, a
saved set of them read back, and a hop count no pair showed answered because the store's
questions cover every length (real Kùzu, real MiniLM, the hand-built movie graph)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.datasets import read_questions
from localkg.path_scorer.ranking import PathRanker
from localkg.path_scorer.train import TrainConfig, train_from_files
from localkg.path_scorer.supervision import SupervisionLimits
from localkg.path_scorer.synthetic import SyntheticLimits
from localkg.store import KG
from localkg.store.model import IN, OUT

FIXTURES = Path(__file__).parent / "fixtures"
SMALL = ["--epochs", "30", "--threads", "1", "--max-hops", "2"]


@pytest.fixture(scope="module")
def movies_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from localkg.loaders.triples import load_triples

    path = tmp_path_factory.mktemp("movies") / "db"
    with KG.create(path) as kg:
        load_triples(kg, [FIXTURES / "path_movies.tsv"], progress=False)
    return path


def test_without_pairs_the_store_teaches_itself(movies_db: Path, tmp_path: Path, scorer) -> None:
    saved, out = tmp_path / "made.jsonl", tmp_path / "scorer.pt"
    result = CliRunner().invoke(main, ["train", "paths", "--db", str(movies_db), "--out", str(out),
                                       "--save-synthetic", str(saved), "--topics-per-relation", "12", *SMALL])
    assert result.exit_code == 0, result.output
    assert "questions made from the store" in result.output and "question-answer pairs" not in result.output
    made = read_questions(saved)
    assert len(made) > 20 and all(question.answers and question.topic_entities for question in made)
    with KG.open(movies_db, read_only=True) as kg:
        ranker = PathRanker(kg, out, embedder=scorer.embedder, beam=5)
        best = ranker.rank_paths("who directed Vertigo", ["Vertigo"], k=1)[0]
        assert [node.id for node in best.answers] == ["Alfred Hitchcock"]
        best = ranker.rank_paths("which films did Kim Novak act in", ["Kim Novak"], k=1)[0]
        assert best.legs == (("Kim Novak", (("starred_actors", IN),)),)


def test_saved_store_questions_train_again_as_pairs(movies_db: Path, tmp_path: Path) -> None:
    saved = tmp_path / "made.jsonl"
    first = CliRunner().invoke(main, ["train", "paths", "--db", str(movies_db), "--out", str(tmp_path / "a.pt"),
                                      "--save-synthetic", str(saved), "--epochs", "1", "--threads", "1"])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(main, ["train", "paths", "--db", str(movies_db), "--out", str(tmp_path / "b.pt"),
                                      "--questions", str(saved), "--epochs", "1",
                                      "--threads", "1", "--json"])
    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert report["store_questions"] == 0 and report["supervision"]["labelled"] > 20


def test_no_pairs_and_no_store_questions_is_one_line(movies_db: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["train", "paths", "--db", str(movies_db), "--no-store-questions"])
    assert result.exit_code == 2 and "--no-store-questions needs --questions" in result.output


def test_pairs_and_store_questions_train_together(movies_db: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["train", "paths", "--db", str(movies_db), "--out", str(tmp_path / "c.pt"),
                                       "--questions", str(FIXTURES / "path_questions.jsonl"), "--store-questions",
                                       "--epochs", "1", "--threads", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["store_questions"] > 20 and report["supervision"]["questions"] == 55
    assert report["supervision"]["labelled"] == 55 + report["store_questions"]


def test_a_hop_count_no_pair_showed_is_answered(movies_db: Path, tmp_path: Path, scorer) -> None:
    """Pairs of one hop only; the store's questions bring two-hop chains, so "who directed the
    films X acted in" is answered with the two-hop path."""
    one_hop = tmp_path / "one-hop.jsonl"
    pairs = [line for line in (FIXTURES / "path_questions.jsonl").read_text().splitlines()
             if "the films" not in json.loads(line)["question"]]
    one_hop.write_text("\n".join(pairs) + "\n")
    from localkg.datasets import TrainingSet

    with KG.open(movies_db, read_only=True) as kg:
        out = tmp_path / "scorer.pt"
        train_from_files(kg, TrainingSet([str(one_hop)]), TrainConfig(epochs=30, hidden=64, batch_size=8), out,
                         embedder=scorer.embedder, limits=SupervisionLimits(max_hops=2),
                         synthetic=SyntheticLimits(topics_per_relation=12))
        ranker = PathRanker(kg, out, embedder=scorer.embedder, beam=5)
        best = ranker.rank_paths("who directed the films Kim Novak acted in", ["Kim Novak"], k=1)[0]
    assert best.legs == (("Kim Novak", (("starred_actors", IN), ("directed_by", OUT))),)
    assert [node.id for node in best.answers] == ["Alfred Hitchcock"]
