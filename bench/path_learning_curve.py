"""How many question–answer pairs the learned-paths reasoner needs: Hits@1 against training size.

For each set and each size N, ``localkg train paths --sample N`` trains on N questions drawn
from the set's dev file outside the evaluation sample (``--exclude-sample 200 --exclude-seed 0``),
and ``localkg eval --sample 200 --seed 0`` asks the learned-paths reasoner (no LLM call:
``llm_options=0``, so the curve measures the scorer alone) the 200 questions docs/results.md uses.
"all" is every question outside the sample; a size above what a set has trains on all of it.
With ``--store-questions`` every point is trained a second time with the store's own questions
beside the pairs (graph pretraining, ``--topics-per-relation``), and size 0 means the store's
questions alone; the plot then draws both curves. Prints one JSON object: per set and size the
questions trained on, Hits@1, the training wall time and the ratio of Hits@1 to the largest
size's; writes the plot to ``--plot``. Usage (the stores of docs/results.md, "Stores")::

    OMP_NUM_THREADS=1 python bench/path_learning_curve.py --metaqa-db dbs/metaqa --pq-db dbs/pq2h \\
        --sizes 50 200 800 3200 --out runs/curve --plot docs/training_curve.png
    python bench/path_learning_curve.py ... --sizes 50 --sets pq-2h        # smoke size
    OMP_NUM_THREADS=1 python bench/path_learning_curve.py --metaqa-db dbs/metaqa --pq-db dbs/pq2h \\
        --sizes 0 50 200 800 --store-questions --out runs/curve-store --plot docs/training_curve_store.png
"""
from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SETS = {"metaqa-2hop": ("metaqa", SHARED / "metaqa" / "2-hop" / "qa_dev.txt"),
        "pq-2h": ("pq", SHARED / "pathquestion" / "PQ-2H.txt")}


def point(name: str, db: Path, questions: Path, size: str, out: Path, store_topics: int | None = None) -> dict:
    """Train on ``size`` questions (``all``: no sample; ``0``: none) and evaluate; Hits@1 and
    seconds. ``store_topics``: also train on the store's own questions, with that many topics
    per relation and direction."""
    folder = out / name / ("store+" if store_topics else "") / size
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint = folder / "scorer.pt"
    pairs = [] if size == "0" else ["--questions", str(questions), *([] if size == "all" else ["--sample", size])]
    store = ["--store-questions", "--topics-per-relation", str(store_topics)] if store_topics else []
    started = time.perf_counter()
    training = subprocess.run(["localkg", "train", "paths", "--db", str(db), *pairs, *store,
                               "--exclude-sample", "200", "--exclude-seed", "0", "--out", str(checkpoint),
                               "--threads", "1", "--json"], check=True, stdout=subprocess.PIPE, text=True)
    trained = time.perf_counter() - started
    report = json.loads(training.stdout)
    subprocess.run(["localkg", "eval", str(questions), "--db", str(db), "--reasoner", "learned-paths",
                    "--sample", "200", "--seed", "0", "--out", str(folder / "eval"),
                    "--set", f"checkpoint={checkpoint}", "--set", "llm_options=0"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    summary = json.loads((folder / "eval" / "summary.json").read_text())
    return {"size": size, "store_questions": bool(store_topics), "questions": report["supervision"]["questions"],
            "hits@1": summary["hits@1"], "train_seconds": round(trained, 1)}


def _pairs(point: dict) -> int:
    """How many question-answer pairs a point was trained on (``all``: the questions it had)."""
    return point["questions"] if point["size"] == "all" else int(point["size"])


def plot(results: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for name, points in results.items():
        pairs = [p for p in points if p["size"] != "0"]
        axes.plot([_pairs(p) for p in pairs],
                  [p["hits@1"] for p in pairs], marker="o", label=name)
        store_only = [p for p in points if p["size"] == "0"]
        if store_only:
            axes.axhline(store_only[0]["hits@1"], linestyle=":", color=axes.lines[-1].get_color(),
                         label=f"{name}, no pairs")
    axes.set_xscale("log")
    sizes = sorted({_pairs(point) for points in results.values() for point in points if point["size"] != "0"})
    axes.set_xticks(sizes, [str(size) for size in sizes])
    axes.minorticks_off()
    axes.set_xlabel("question-answer pairs (outside the 200 evaluated, log scale)")
    axes.set_ylabel("Hits@1 on the 200-question dev sample")
    axes.set_ylim(0, 1)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metaqa-db", type=Path)
    parser.add_argument("--pq-db", type=Path)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--sizes", nargs="+", default=["50", "200", "800", "all"])
    parser.add_argument("--out", type=Path, default=Path("runs/curve"))
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--store-questions", action="store_true",
                        help="also train every size with the store's own questions beside the pairs")
    parser.add_argument("--topics-per-relation", type=int, default=24,
                        help="store questions: topics per relation and direction")
    args = parser.parse_args()
    if "0" in args.sizes and not args.store_questions:
        parser.error("size 0 trains on the store's questions alone: add --store-questions")
    stores = {"metaqa": args.metaqa_db, "pq": args.pq_db}
    results: dict[str, list[dict]] = {}
    for name in args.sets:
        store, questions = SETS[name]
        if stores[store] is None:
            parser.error(f"--{store}-db is needed for {name}")
        results[name] = [point(name, stores[store], questions, size, args.out) for size in args.sizes if size != "0"]
        if args.store_questions:
            results[f"{name} + store"] = [point(name, stores[store], questions, size, args.out, args.topics_per_relation)
                                          for size in args.sizes]
    for points in results.values():
        largest = points[-1]["hits@1"] or 1.0
        for entry in points:
            entry["ratio_to_largest"] = round(entry["hits@1"] / largest, 3)
    if args.plot:
        plot(results, args.plot)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
