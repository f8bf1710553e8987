"""Entity-index encoders: names/s of the old path (MiniLM) and the new one (static, distilled), and the
linking recall of each on misspelt names, in the same run on the same names.

Prints one JSON object:

* ``speed``: names/s of each encoder on the first ``--names`` entity names of a make_dump Freebase
  graph (loaded with the real loader), as ``index build`` calls it (the static path also encodes
  each distinct name once, as the build does), and the ratio new / old;
* ``recall``: for each encoder, an entity index of those names (the type ``index build`` picks for
  that many) attached to ``EntityLinker``; ``--questions`` names asked misspelt, bench/linking.py's
  way (last letter doubled, marked: ``what is the place of birth of [Xx]``), recall@1 of the linker
  (gold = the entity) and of the vector search alone (gold = any entity of that name);
* ``metaqa`` (with ``--metaqa-db``): recall@1 of the linker with the static index on the first
  ``--metaqa-questions`` MetaQA 1-hop dev questions, mention given and brackets removed;
* ``distill_seconds`` (with ``--distill``): the one-off distillation into a fresh cache.

Usage::

    python bench/index_build.py --db /tmp/localkg-bench/fb100k --names 100000 --metaqa-db /tmp/localkg-bench/metaqa
    python bench/index_build.py --db /tmp/localkg-bench/fb5k --names 5000 --questions 100   # smoke
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

import localkg  # noqa: F401  (offline environment)
from localkg.indexes import fulltext
from localkg.indexes.build import ENCODE_CHUNK, build_indexes
from localkg.indexes.embedding import Embedder, TextEncoder
from localkg.indexes.label_table import build_label_table
from localkg.indexes.linking import EntityLinker
from localkg.indexes.mentions import strip_marks
from localkg.indexes.static_embedding import StaticEmbedder
from localkg.indexes.vector_index import IndexMeta, VectorIndex, choose_index_type
from localkg.store import KG

SHARED = Path(__file__).resolve().parents[2] / "shared"


def graph(path: Path, entities: int) -> KG:
    """A make_dump Freebase graph of ``entities`` entities with its label table (made on first use)."""
    if not (path / "graph.kuzu").exists():
        from localkg.loaders.freebase import load_freebase

        dump = path.parent / f"fb{entities}.nt.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not dump.exists():
            subprocess.run([sys.executable, str(SHARED / "tools" / "make_dump.py"), "freebase", "--entities",
                            str(entities), "--out", str(dump)], check=True, capture_output=True)
        with KG.create(path) as kg:
            load_freebase(kg, [dump], progress=False)
    kg = KG.open(path)
    fulltext.build_index(kg)
    build_label_table(kg)
    return kg


def encode_as_built(encoder: TextEncoder, names: list[str]) -> tuple:
    """Vectors of ``names`` in the build's chunks, each distinct name of a chunk once; and the seconds."""
    started = time.perf_counter()
    parts = []
    for start in range(0, len(names), ENCODE_CHUNK):
        chunk = names[start:start + ENCODE_CHUNK]
        distinct = {text: row for row, text in enumerate(dict.fromkeys(chunk))}
        parts.append(encoder.encode(list(distinct))[[distinct[text] for text in chunk]])
    import numpy as np

    return np.concatenate(parts), time.perf_counter() - started


def in_memory_index(encoder: TextEncoder, vectors, ids: list[str], names: list[str]) -> VectorIndex:
    """The entity index ``index build`` would make of these vectors, without writing it."""
    from localkg.indexes.vector_index import new_faiss_index, training_size

    index_type = choose_index_type(len(names))
    index = new_faiss_index(index_type, vectors.shape[1], len(names))
    if not index.is_trained:
        index.train(vectors[:max(training_size(index), 1024)])
    index.add(vectors)
    meta = IndexMeta(kind="entities", model=encoder.model_name, model_path="", dim=vectors.shape[1],
                     index_type=index_type, count=len(names), complete=True)
    return VectorIndex(Path("/nonexistent"), meta, index, pa.array(ids), pa.array(names))


def misspelt_recall(kg: KG, encoder: TextEncoder, index: VectorIndex, picked: list[tuple[str, str]]) -> dict:
    linker = EntityLinker(kg, encoder)
    linker.vectors = index
    linker_hits = vector_hits = 0
    for node_id, name in picked:
        misspelt = name + name[-1]
        top = linker.link(f"what is the place of birth of [{misspelt}]", k=1)
        linker_hits += bool(top) and top[0].id == node_id
        (found,) = index.search(encoder.encode([misspelt]), 1)
        vector_hits += bool(found) and found[0][1] == name
    return {"index_type": index.meta.index_type, "vectors": int(index.index.ntotal),
            "linker_recall@1": round(linker_hits / len(picked), 4),
            "vector_recall@1": round(vector_hits / len(picked), 4)}


def metaqa_recall(path: Path, questions: int) -> dict:
    """Linking recall on MetaQA 1-hop dev with the static entity index (built, as `index build` does)."""
    if not (path / "graph.kuzu").exists():
        from localkg.loaders.triples import load_triples

        with KG.create(path) as kg:
            load_triples(kg, [SHARED / "data" / "metaqa" / "kb.txt"], format="psv", progress=False)
    lines = (SHARED / "data" / "metaqa" / "1-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
    asked = [(q, re.search(r"\[(.+?)\]", q).group(1)) for q in (l.split("\t")[0] for l in lines[:questions])]
    with KG.open(path) as kg:
        build_indexes(kg, "entities", entity_embedder=StaticEmbedder(), progress=False)
        linker = EntityLinker(kg)
        marked = sum(linker.link(q, k=1)[0].id == gold for q, gold in asked)
        plain = sum([c.id for c in linker.link(strip_marks(q), k=1)] == [gold] for q, gold in asked)
        model = linker.vectors.meta.model
    return {"questions": len(asked), "model": model, "recall@1_mention_given": round(marked / len(asked), 4),
            "recall@1_no_brackets": round(plain / len(asked), 4)}


def distill_seconds() -> float:
    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from localkg.indexes.static_embedding import StaticEmbedder; "
                        "assert StaticEmbedder().distilled"], check=True, env={**os.environ, "LOCALKG_CACHE": cache})
        return round(time.perf_counter() - started, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, default=Path("/tmp/localkg-bench/fb100k"))
    parser.add_argument("--names", type=int, default=100_000, help="entity names encoded by both encoders")
    parser.add_argument("--questions", type=int, default=500, help="misspelt names asked per encoder")
    parser.add_argument("--metaqa-db", type=Path, help="also measure MetaQA linking recall with the static index")
    parser.add_argument("--metaqa-questions", type=int, default=1000)
    parser.add_argument("--distill", action="store_true", help="also time a first distillation (fresh cache)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    report: dict = {"machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                                "load_average": os.getloadavg()}}
    if args.distill:
        report["distill_seconds"] = distill_seconds()
    encoders = {"old_minilm": Embedder(device="cpu"), "new_static": StaticEmbedder()}
    kg = graph(args.db, args.names)
    try:
        entities = [(r.id, r.name) for batch in kg.iter_nodes(("entity",), batch=50_000) for r in batch if r.name]
        entities = entities[:args.names]
        ids, names = [i for i, _ in entities], [n for _, n in entities]
        picked = random.Random(0).sample(entities, min(args.questions, len(entities)))
        report["speed"], report["recall"] = {"names": len(names), "distinct": len(set(names))}, {}
        for label, encoder in encoders.items():
            vectors, seconds = encode_as_built(encoder, names)
            report["speed"][label] = {"model": encoder.model_name, "dim": encoder.dim, "seconds": round(seconds, 2),
                                      "names_per_second": round(len(names) / seconds)}
            report["recall"][label] = misspelt_recall(kg, encoder, in_memory_index(encoder, vectors, ids, names),
                                                      picked)
        speed = report["speed"]
        speed["ratio_new_over_old"] = round(speed["new_static"]["names_per_second"]
                                            / speed["old_minilm"]["names_per_second"], 1)
    finally:
        kg.close()
    if args.metaqa_db:
        report["metaqa"] = metaqa_recall(args.metaqa_db, args.metaqa_questions)
    report["machine"]["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
