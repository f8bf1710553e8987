"""Entity-linking benchmark: MetaQA recall and linking latency on large make_dump graphs.

Prints one JSON object. Parts:

* ``metaqa``: recall@1 with the mention given (the MetaQA ``[brackets]`` kept) and recall@1/@5
  with the brackets removed, on the first N 1-hop dev questions; gold = the bracket text (MetaQA
  ids are names). Measured twice: with every source, and with exact + full-text only (reference),
  with the latency of each link call (p50/p95).
* ``scale``: latency of ``EntityLinker.link`` on a Freebase-format graph from ``make_dump.py``
  loaded with the real loader: exact + full-text only (reference), then with an IVF-PQ entity
  index of ``--scale-vectors`` vectors made of ``--scale-sample`` really embedded names and
  perturbed copies of them (embedding a million names takes hours on 2 CPU cores; search cost
  depends on the index size, not on what the vectors say). docs/benchmarks.md says what that
  leaves out. Questions name the entity unmarked, marked, and marked but misspelt (the only
  form for which the linker asks the vector index).

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
from localkg.indexes.label_table import LabelTable, build_label_table
from localkg.indexes.linking import EntityLinker
from localkg.indexes.mentions import strip_marks
from localkg.indexes.vector_index import IndexMeta, VectorIndex, new_faiss_index, training_size
from localkg.store import KG, schema

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


def recall(linkers: dict[str, EntityLinker], questions: list[tuple[str, str]]) -> dict[str, dict]:
    """Recall and per-call latency of each linker; the linkers take turns question by question so
    that their latencies are measured under the same load."""
    counts = {name: {"at1_marked": 0, "at1": 0, "at5": 0} for name in linkers}
    seconds = {name: {"marked": [], "plain": []} for name in linkers}
    for question, gold in questions:
        for name, linker in linkers.items():
            started = time.perf_counter()
            marked = linker.link(question, k=1)
            seconds[name]["marked"].append(time.perf_counter() - started)
            started = time.perf_counter()
            plain = [c.id for c in linker.link(strip_marks(question), k=5)]
            seconds[name]["plain"].append(time.perf_counter() - started)
            counts[name]["at1_marked"] += bool(marked) and marked[0].id == gold
            counts[name]["at1"] += plain[:1] == [gold]
            counts[name]["at5"] += gold in plain
    n = len(questions)
    return {name: {"recall@1_mention_given": round(c["at1_marked"] / n, 4),
                   "recall@1_no_brackets": round(c["at1"] / n, 4), "recall@5_no_brackets": round(c["at5"] / n, 4),
                   "latency_marked_k1": percentiles(seconds[name]["marked"]),
                   "latency_no_brackets_k5": percentiles(seconds[name]["plain"])}
            for name, c in counts.items()}


def bench_metaqa(args: argparse.Namespace, embedder: Embedder) -> dict:
    lines = (SHARED / "data" / "metaqa" / "1-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
    questions = [(q, re.search(r"\[(.+?)\]", q).group(1)) for q in (l.split("\t")[0] for l in lines[:args.questions])]
    kg = metaqa_db(args.metaqa_db, embedder)
    try:
        full = EntityLinker(kg, embedder)
        lexical = EntityLinker(kg, embedder)
        lexical.vectors = None  # reference: exact names and full-text search only
        return {"questions": len(questions), "entities": kg.stats().entities,
                **recall({"all_sources": full, "exact_and_fulltext_only": lexical}, questions),
                "components": component_latency(kg, embedder, lexical.labels, [gold for _, gold in questions[:200]])}
    finally:
        kg.close()


def scale_db(args: argparse.Namespace) -> KG:
    """A make_dump Freebase graph of ``--scale-entities`` entities, loaded with the real loader,
    with the full-text index and the label table built."""
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
    build_label_table(kg)
    return kg


def padded_index(embedder: Embedder, ids: list[str], names: list[str], vectors: int,
                 timings: dict, seed: int = 0) -> VectorIndex:
    """An in-memory IVF-PQ entity index of ``vectors`` vectors, made as ``index build`` makes one
    (``new_faiss_index``, trained on ``training_size`` vectors): the real MiniLM vectors of ``names``
    plus unit-normalised noisy copies of them (whose ids point at the originals), so that search
    costs what it costs at that size without embedding that many names. ``timings`` gets the
    seconds of each step."""
    started = time.perf_counter()
    real = embedder.encode(names, batch_size=128)
    timings["embed_seconds"] = round(time.perf_counter() - started)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(real), max(0, vectors - len(real)))
    index = new_faiss_index("ivfpq", real.shape[1], vectors)
    wanted = training_size(index)
    timings.update(lists=int(faiss_ivf(index).nlist), training_vectors=wanted)
    started = time.perf_counter()
    index.train(np.concatenate([real, _noisy(real[rows[:max(0, wanted - len(real))]], rng)])[:wanted])
    timings["train_seconds"] = round(time.perf_counter() - started)
    started = time.perf_counter()
    index.add(real)
    for start in range(0, len(rows), 200_000):
        index.add(_noisy(real[rows[start:start + 200_000]], rng))
    timings["add_seconds"] = round(time.perf_counter() - started)
    order = np.concatenate([np.arange(len(real)), rows])
    meta = IndexMeta(kind="entities", model=embedder.model_name, model_path="", dim=real.shape[1],
                     index_type="ivfpq", count=int(index.ntotal), complete=True)
    return VectorIndex(Path("/nonexistent"), meta, index, pa.array(ids).take(pa.array(order)),
                       pa.array(names).take(pa.array(order)))


def faiss_ivf(index):
    import faiss

    return faiss.extract_index_ivf(index)


def _misspell(name: str) -> str:
    """The name with its last letter doubled, so no label matches it exactly and the vector
    index is asked (an exactly named mention needs no fuzzy match, so the linker skips it)."""
    return name + name[-1]


def _noisy(vectors: np.ndarray, rng: np.random.Generator, sigma: float = 0.03) -> np.ndarray:
    noisy = vectors + sigma * rng.standard_normal(vectors.shape).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def interleaved_latency(linkers: dict[str, EntityLinker], questions: list[str]) -> dict[str, dict]:
    """Latency of each linker on each question, the linkers taking turns question by question so
    that both see the same load (the machine is shared)."""
    for question in questions[:5]:
        for linker in linkers.values():
            linker.link(question)
    seconds: dict[str, list[float]] = {name: [] for name in linkers}
    for question in questions:
        for name, linker in linkers.items():
            started = time.perf_counter()
            linker.link(question)
            seconds[name].append(time.perf_counter() - started)
    return {name: percentiles(values) for name, values in seconds.items()}


def percentiles(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    return {"n": len(ordered), "p50_ms": ms(statistics.median(ordered)),
            "p95_ms": ms(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))])}


def bench_scale(args: argparse.Namespace, embedder: Embedder) -> dict:
    kg = scale_db(args)
    try:
        entities = [(r.id, r.name) for batch in kg.iter_nodes(("entity",), batch=50_000) for r in batch if r.name]
        rng = random.Random(0)
        sample = rng.sample(entities, min(args.scale_sample, len(entities)))
        picked = sample[:args.scale_questions]
        unmarked = [f"what is the place of birth of {name}" for _, name in picked]
        marked = [f"what is the place of birth of [{name}]" for _, name in picked]
        misspelt = [f"what is the place of birth of [{_misspell(name)}]" for _, name in picked]
        result = {"entities": kg.stats().entities, "labels": kg.stats().labels}
        timings: dict = {}
        vectors = padded_index(embedder, [i for i, _ in sample], [n for _, n in sample], args.scale_vectors, timings)
        result["vector_index"] = {"type": "ivfpq", "vectors": int(vectors.index.ntotal), "real_vectors": len(sample),
                                  **timings}
        lexical, full = EntityLinker(kg, embedder), EntityLinker(kg, embedder)
        lexical.vectors, full.vectors = None, vectors  # reference: exact names and full-text search only
        linkers = {"all_sources": full, "exact_and_fulltext_only": lexical}
        for form, questions in (("unmarked", unmarked), ("marked", marked), ("marked_misspelt", misspelt)):
            for name, seconds in interleaved_latency(linkers, questions).items():
                result.setdefault(name, {})[form] = seconds
        for name, linker in linkers.items():
            top1 = sum(linker.link(q, k=1)[0].id == i for q, (i, _) in zip(marked, picked))
            result[name]["recall@1_marked"] = round(top1 / len(picked), 4)
        named = lexical.labels.nodes_named(schema.normalise_label(n) for _, n in picked)
        result["picked_names_shared_by_several_nodes"] = sum(len(nodes) > 1 for nodes in named.values())
        result["components"] = component_latency(kg, embedder, lexical.labels, [n for _, n in picked])
        return result
    finally:
        kg.close()


def component_latency(kg: KG, embedder: Embedder, labels: LabelTable, names: list[str]) -> dict:
    """What one source costs alone, in the same run: a MiniLM encode of one mention, one
    full-text query of the label table (what the linker runs), and the same query on Kùzu's
    full-text index (the reference it replaced)."""
    seconds: dict[str, list[float]] = {"encode_one_mention": [], "label_table_fulltext_query": [],
                                       "kuzu_fulltext_query": []}
    fulltext.load_extension(kg)
    for name in names:
        started = time.perf_counter()
        embedder.encode([name])
        seconds["encode_one_mention"].append(time.perf_counter() - started)
        started = time.perf_counter()
        labels.search(name, 20)
        seconds["label_table_fulltext_query"].append(time.perf_counter() - started)
        started = time.perf_counter()
        fulltext.search_label_offsets(kg, name, 20)
        seconds["kuzu_fulltext_query"].append(time.perf_counter() - started)
    return {part: percentiles(values) for part, values in seconds.items()}


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
    parser.add_argument("--scale-questions", type=int, default=200, help="questions per latency measurement")
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
