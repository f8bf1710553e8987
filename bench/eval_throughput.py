"""Evaluation fan-out benchmark: questions per second with 1 worker, 2 worker processes and 2 Ray actors.

Prints one JSON object. For each reasoner (default ``tog`` and ``fog``) the same questions (a
seeded sample of MetaQA 1-hop dev) are answered, in the same run, by the three pools of
``localkg.evaluation.workers``; the 1-worker run (in this process) is the reference of the
ratios. Every mode runs in a fresh process of its own (no model is warm from an earlier mode),
with ``--threads`` llama.cpp and torch threads per worker (default 1) and no LLM cache, so the
modes differ only in how many workers answer at once. Reported per mode: ``wall_s``;
``startup_s`` (until every worker has opened the store and loaded the models: process spawn or
Ray's runtime included); ``qps`` (questions / wall) and ``qps_after_startup``; ``hits@1``; and
``same_answers`` (every question answered as the 1-worker run did). Usage::

    python bench/eval_throughput.py [--db DB] [--questions FILE] [--n 100] [--reasoners tog fog] [--threads 1]

Without ``--db`` the MetaQA store is built once into ``--work`` (default: a folder in /tmp).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
MODES = {"1 worker": {"workers": 1}, "2 workers": {"workers": 2}, "ray 2 actors": {"workers": 2, "ray": "local"}}


def metaqa_store(work: Path) -> Path:
    """The MetaQA knowledge base as a store, built on first use."""
    from localkg.loaders.triples import load_triples
    from localkg.store import KG

    db = work / "metaqa-db"
    if not db.exists():
        with KG.open(db, create=True) as kg:
            load_triples(kg, [SHARED / "metaqa" / "kb.txt"], progress=False)
    return db


def measure(config: Any, questions: list[Any]) -> dict[str, Any]:
    """Answer ``questions`` through the pool ``config`` asks for: timings and each question's answers."""
    from localkg.evaluation.pools import open_pool

    started = time.perf_counter()
    records = []
    with open_pool(config) as pool:
        pool.prepare(config)
        startup = time.perf_counter() - started
        records.extend(pool.answer_all(config, questions))
    wall = time.perf_counter() - started
    return {
        "wall_s": round(wall, 2),
        "startup_s": round(startup, 2),
        "qps": round(len(records) / wall, 4),
        "qps_after_startup": round(len(records) / max(wall - startup, 1e-9), 4),
        "hits@1": round(sum(r["metrics"]["hits@1"] for r in records) / len(records), 4),
        "answers": {r["qid"]: [a["id"] for a in r["answers"]] for r in records},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=None, help="store (default: MetaQA, built into --work)")
    parser.add_argument("--questions", type=Path, default=SHARED / "metaqa" / "1-hop" / "qa_dev.txt")
    parser.add_argument("--n", type=int, default=100, help="questions (a seeded sample)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reasoners", nargs="+", default=["tog", "fog"])
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp and torch threads per worker")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "localkg-bench-eval")
    parser.add_argument("--mode", choices=list(MODES), help=argparse.SUPPRESS)  # one measurement, in a child
    args = parser.parse_args()

    from localkg.datasets import detect_format, read_questions, select_questions
    from localkg.evaluation.config import EvalConfig

    args.work.mkdir(parents=True, exist_ok=True)
    db = args.db or metaqa_store(args.work)
    file_format = detect_format(args.questions)
    questions = select_questions(read_questions(args.questions, file_format), args.n, args.seed, None)
    report: dict[str, Any] = {
        "questions": len(questions), "questions_file": str(args.questions), "db": str(db),
        "threads_per_worker": args.threads, "cpus": os.cpu_count(), "machine": platform.machine(),
        "load_average": os.getloadavg(), "reasoners": {},
    }
    if args.mode:
        import torch

        torch.set_num_threads(args.threads)  # the 1-worker run answers in this process: the same share
        config = EvalConfig(questions=str(args.questions), reasoner=args.reasoners[0], out="", db=str(db),
                            seed=args.seed, llm_threads=args.threads, format=file_format, **MODES[args.mode])
        print(json.dumps(measure(config, questions)))
        return
    for reasoner in args.reasoners:
        results = {}
        for mode in MODES:
            child = [sys.executable, __file__, "--db", str(db), "--questions", str(args.questions), "--n", str(args.n),
                     "--seed", str(args.seed), "--reasoners", reasoner, "--threads", str(args.threads), "--mode", mode]
            results[mode] = json.loads(subprocess.run(child, check=True, stdout=subprocess.PIPE).stdout)
        reference = results["1 worker"]
        for mode in list(MODES)[1:]:
            results[mode]["ratio_qps"] = round(results[mode]["qps"] / reference["qps"], 3)
            results[mode]["ratio_qps_after_startup"] = round(
                results[mode]["qps_after_startup"] / reference["qps_after_startup"], 3)
            results[mode]["same_answers"] = results[mode]["answers"] == reference["answers"]
        for result in results.values():
            del result["answers"]
        report["reasoners"][reasoner] = results
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
