"""Entity-linking benchmark: MetaQA recall and linking latency on large make_dump graphs.

Prints one JSON object. Parts:

* ``metaqa``: recall@1 with the mention given (the MetaQA ``[brackets]`` kept) and recall@1/@5
  with the brackets removed, on the first N 1-hop dev questions; gold = the bracket text (MetaQA
  ids are names). Measured twice: with every source, and with exact + full-text only (reference).
* ``scale``: latency of ``EntityLinker.link`` on a Freebase-format graph from ``make_dump.py``
  loaded with the real loader: exact + full-text only (reference), then with an IVF-PQ entity
  index of ``--scale-vectors`` vectors made of ``--scale-sample`` really embedded names and
  perturbed copies of them (embedding a million names takes hours on 2 CPU cores; search cost
  depends on the index size, not on what the vectors say). docs/benchmarks.md says what that
  leaves out.

Usage::

    python bench/linking.py --metaqa-db /tmp/bench/metaqa --questions 1000
    python bench/linking.py --skip-metaqa --scale-db /tmp/bench/fb --scale-entities 200000 \\
        --scale-vectors 1000000 --scale-sample 20000
"""
from __future__ import annotations

import argparse
import json
import platform
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import localkg  # noqa: F401  (offline environment)
from localkg.indexes import fulltext
from localkg.indexes.build import build_indexes
from localkg.indexes.embedding import Embedder
from localkg.indexes.linking import EntityLinker
from localkg.indexes.mentions import strip_marks
from localkg.indexes.vector_index import IndexMeta, VectorIndex, new_faiss_index
from localkg.store import KG

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def metaqa_db(path: Path, embedder: Embedder) -> KG:
    """The full MetaQA KB with its indexes (loaded and built on first use)."""
    if not (path / "graph.kuzu").exists():
        from localkg.loaders.triples import load_triples

        kg = KG.create(path)
        load_triples(kg, [SHARED / "data" / "metaqa" / "kb.txt"], format="psv", progress=False)
    else:
        kg = KG.open(path)
    build_indexes(kg, "entities", embedder, progress=False)
    return kg


def recall(linker: EntityLinker, questions: list[tuple[str, str]]) -> dict:
    at1_marked = at1 = at5 = 0
    seconds = []
    for question, gold in questions:
        started = time.perf_counter()
        marked = linker.link(question, k=1)
        seconds.append(time.perf_counter() - started)
        at1_marked += bool(marked) and marked[0].id == gold
        plain = [c.id for c in linker.link(strip_marks(question), k=5)]
        at1 += plain[:1] == [gold]
        at5 += gold in plain
    n = len(questions)
    return {"recall@1_mention_given": round(at1_marked / n, 4), "recall@1_no_brackets": round(at1 / n, 4),
            "recall@5_no_brackets": round(at5 / n, 4), "latency_ms_p50_marked": ms(statistics.median(seconds))}


def bench_metaqa(args: argparse.Namespace, embedder: Embedder) -> dict:
    lines = (SHARED / "data" / "metaqa" / "1-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
    questions = [(q, re.search(r"\[(.+?)\]", q).group(1)) for q in (l.split("\t")[0] for l in lines[:args.questions])]
    kg = metaqa_db(args.metaqa_db, embedder)
    try:
        full = EntityLinker(kg, embedder)
        lexical = EntityLinker(kg, embedder)
        lexical.vectors = None  # reference: exact names and full-text search only
        return {"questions": len(questions), "entities": kg.stats().entities,
                "all_sources": recall(full, questions), "exact_and_fulltext_only": recall(lexical, questions)}
    finally:
        kg.close()


def scale_db(args: argparse.Namespace) -> KG:
    """A make_dump Freebase graph of ``--scale-entities`` entities, loaded with the real loader,
    with the full-text index built."""
    path = args.scale_db
    if not (path / "graph.kuzu").exists():
        from localkg.loaders.freebase import load_freebase

        dump = path.parent / f"fb{args.scale_entities}.nt.gz"
        if not dump.exists():
            subprocess.run([sys.executable, str(SHARED / "tools" / "make_dump.py"), "freebase", "--entities",
                            str(args.scale_entities), "--out", str(dump)], check=True)
        kg = KG.create(path)
        load_freebase(kg, [dump], progress=False)
    else:
        kg = KG.open(path)
    fulltext.build_index(kg)
    return kg


def padded_index(embedder: Embedder, ids: list[str], names: list[str], vectors: int, seed: int = 0) -> VectorIndex:
    """An in-memory IVF-PQ entity index of ``vectors`` vectors: the real MiniLM vectors of ``names``
    plus unit-normalised noisy copies of them (whose ids point at the originals), so that search
    costs what it costs at that size without embedding that many names."""
    real = embedder.encode(names, batch_size=128)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(real), max(0, vectors - len(real)))
    index = new_faiss_index("ivfpq", real.shape[1], vectors)
    index.train(np.concatenate([real, _noisy(real[rows[:max(0, 100_000 - len(real))]], rng)]))
    index.add(real)
    for start in range(0, len(rows), 200_000):
        index.add(_noisy(real[rows[start:start + 200_000]], rng))
    order = np.concatenate([np.arange(len(real)), rows])
    meta = IndexMeta(kind="entities", model=embedder.model_name, model_path="", dim=real.shape[1],
                     index_type="ivfpq", count=int(index.ntotal), complete=True)
    return VectorIndex(Path("/nonexistent"), meta, index, pa.array(ids).take(pa.array(order)),
                       pa.array(names).take(pa.array(order)))


def _noisy(vectors: np.ndarray, rng: np.random.Generator, sigma: float = 0.03) -> np.ndarray:
    noisy = vectors + sigma * rng.standard_normal(vectors.shape).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def latency(linker: EntityLinker, questions: list[str]) -> dict:
    for question in questions[:5]:
        linker.link(question)
    seconds = []
    for question in questions:
        started = time.perf_counter()
        linker.link(question)
        seconds.append(time.perf_counter() - started)
    seconds.sort()
    return {"n": len(seconds), "p50_ms": ms(statistics.median(seconds)), "p90_ms": ms(seconds[int(0.9 * len(seconds))])}


def bench_scale(args: argparse.Namespace, embedder: Embedder) -> dict:
    kg = scale_db(args)
    try:
        entities = [(r.id, r.name) for batch in kg.iter_nodes(("entity",), batch=50_000) for r in batch if r.name]
        rng = random.Random(0)
        sample = rng.sample(entities, min(args.scale_sample, len(entities)))
        picked = sample[:200]
        unmarked = [f"what is the place of birth of {name}" for _, name in picked]
        marked = [f"what is the place of birth of [{name}]" for _, name in picked]
        linker = EntityLinker(kg, embedder)
        linker.vectors = None
        result = {"entities": kg.stats().entities, "exact_and_fulltext_only": {
            "unmarked": latency(linker, unmarked), "marked": latency(linker, marked)}}
        started = time.perf_counter()
        linker.vectors = padded_index(embedder, [i for i, _ in sample], [n for _, n in sample], args.scale_vectors)
        result["vector_index"] = {"type": "ivfpq", "vectors": int(linker.vectors.index.ntotal),
                                  "real_vectors": len(sample), "seconds_to_make": round(time.perf_counter() - started)}
        result["all_sources"] = {"unmarked": latency(linker, unmarked), "marked": latency(linker, marked)}
        top1 = sum(linker.link(q, k=1)[0].id == i for q, (i, _) in zip(marked, picked))
        result["all_sources"]["recall@1_marked"] = round(top1 / len(picked), 4)
        return result
    finally:
        kg.close()


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metaqa-db", type=Path, default=Path("/tmp/localkg-bench/metaqa"))
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--skip-metaqa", action="store_true")
    parser.add_argument("--scale-db", type=Path)
    parser.add_argument("--scale-entities", type=int, default=200_000)
    parser.add_argument("--scale-vectors", type=int, default=1_000_000)
    parser.add_argument("--scale-sample", type=int, default=20_000, help="entity names really embedded")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    embedder = Embedder()
    report = {"machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count(),
                          "torch_threads": torch.get_num_threads(), "device": embedder.device}}
    if not args.skip_metaqa:
        report["metaqa"] = bench_metaqa(args, embedder)
    if args.scale_db:
        report["scale"] = bench_scale(args, embedder)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
