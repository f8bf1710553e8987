"""Run a reasoner over a questions file and score it: ``localkg eval``.

One run writes into its output folder ``run.json`` (what was run, so ``--resume`` refuses to mix
two runs), ``predictions.jsonl`` (one line per question, appended as soon as any worker answers
it, so a killed run loses only what was in flight), ``summary.json`` (the metric and the cost,
see :func:`summarise`) and ``report.md`` (``localkg.evaluation.report``).

Questions are picked deterministically (``--sample N --seed S`` draws N in the order drawn, then
``--limit`` keeps the first; :func:`localkg.datasets.select_questions`) and the LLM is seeded
alike, so a run can be repeated and resumed.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from tqdm import tqdm

from localkg.datasets import detect_format, read_questions, select_questions
from localkg.errors import EvaluationError
from localkg.evaluation.answering import check_settings
from localkg.evaluation.metrics import aggregate, distribution
from localkg.evaluation.workers import Pool, open_pool
from localkg.llm.llm import DEFAULT_N_CTX

PREDICTIONS = "predictions.jsonl"
SUMMARY = "summary.json"
RUN = "run.json"
COSTS = ("llm_calls", "prompt_tokens", "completion_tokens", "kg_queries", "seconds")
# ``--limit`` takes the first N of the questions in the order drawn, so a run resumed with another
# limit keeps every answer it has (the summary counts the first N); the other fields change answers.
RESUMABLE_CHANGES = ("limit",)


@dataclass
class EvalConfig:
    """Everything that decides what a run computes (and so must match on ``--resume``)."""

    questions: str
    reasoner: str
    out: str
    db: str | None = None
    format: str = "auto"
    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    settings: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    n_ctx: int = DEFAULT_N_CTX
    prompt_style: str | None = None
    n_gpu_layers: int = 0
    llm_threads: int | None = None
    llm_cache: str | None = None
    workers: int | None = 1  # None: ``auto``
    ray: str | None = None   # a Ray address (``local``, ``auto``, ``ray://HOST:PORT``): the workers as actors

    def identity(self) -> dict[str, Any]:
        """The fields that define the run (not the output folder, nor how fast or where it runs)."""
        values = asdict(self)
        for runtime_only in ("out", "n_gpu_layers", "llm_threads", "llm_cache", "workers", "ray"):
            values.pop(runtime_only)
        values["questions"] = str(Path(self.questions).resolve())
        values["db"] = str(Path(self.db).resolve()) if self.db else None
        values["model"] = str(Path(self.model).resolve()) if self.model else None
        return values


# ---------------------------------------------------------------- the run
def run_eval(config: EvalConfig, resume: bool = False, progress: bool = True,
             pool: Pool | None = None) -> dict[str, Any]:
    """Run ``config`` and write predictions, summary and report into ``config.out``.

    With ``resume``, questions already in ``predictions.jsonl`` are kept and not asked again
    (a line cut short by a kill is dropped and redone). The questions are answered by ``pool``
    (a grid passes one for all its cells), else by the workers ``config`` asks for. Returns
    the summary.
    """
    check_settings(config)
    if config.format == "auto":
        config.format = detect_format(Path(config.questions))
    questions = select_questions(read_questions(config.questions, config.format), config.sample, config.seed,
                                 config.limit)
    per_question_graphs = config.format == "rog"
    if config.db is None and not per_question_graphs:
        raise EvaluationError("--db is needed: only per-question-subgraph (rog) files bring their own graph")
    out = Path(config.out)
    done = _prepare_output(out, config, resume)
    todo = [q for q in questions if q.id not in done]
    if todo:
        with (out / PREDICTIONS).open("a", encoding="utf-8") as handle, \
                (nullcontext(pool) if pool is not None else open_pool(config)) as workers, \
                tqdm(total=len(questions), initial=len(questions) - len(todo), desc=f"eval {config.reasoner}",
                     unit="q", disable=not progress) as bar:
            for record in workers.answer_all(config, todo):  # in the order they finish
                handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                handle.flush()
                bar.update(1)
    answered = _read_predictions(out / PREDICTIONS)
    records = [answered[q.id] for q in questions if q.id in answered]  # question order: the summary is the same
    summary = summarise(records, config)
    (out / SUMMARY).write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    from localkg.evaluation.report import write_report

    write_report(out, summary, records)
    return summary


# ---------------------------------------------------------------- output folder and resume
def _prepare_output(out: Path, config: EvalConfig, resume: bool) -> set[str]:
    """Check the folder against the run, record the run, and return the ids already answered."""
    out.mkdir(parents=True, exist_ok=True)
    predictions = out / PREDICTIONS
    run_file = out / RUN
    has_predictions = predictions.exists() and predictions.stat().st_size > 0
    if has_predictions and not resume:
        raise EvaluationError(f"{out} already holds predictions of a run; pass --resume to continue it, "
                              "or choose another --out")
    if resume and run_file.exists():
        previous = json.loads(run_file.read_text())
        current = json.loads(json.dumps(config.identity()))
        changed = sorted(k for k in set(previous) | set(current)
                         if k not in RESUMABLE_CHANGES and previous.get(k) != current.get(k))
        if changed:
            raise EvaluationError(f"--resume: {out} holds a run with different {', '.join(changed)}; "
                                  "resume it with the same options, or choose another --out")
    run_file.write_text(json.dumps(config.identity(), indent=2))
    return set(_read_predictions(predictions, repair=True)) if has_predictions else set()


def _read_predictions(path: Path, repair: bool = False) -> dict[str, dict[str, Any]]:
    """Prediction lines by question id (the first line per id wins).

    A last line without its newline is what a killed run leaves behind: with ``repair`` it is
    cut off the file so the question is asked again; a broken line elsewhere is an error.
    """
    if not path.exists():
        return {}
    data = path.read_bytes()
    complete, newline, tail = data.rpartition(b"\n")
    if tail and repair:
        with path.open("r+b") as handle:
            handle.truncate(len(complete) + len(newline))
    records: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(complete.split(b"\n") if complete else [], 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise EvaluationError(f"{path}:{number} is not a complete JSON line; the file is damaged") from None
        records.setdefault(record["qid"], record)
    return records


# ---------------------------------------------------------------- summary
def summarise(records: Sequence[dict[str, Any]], config: EvalConfig) -> dict[str, Any]:
    """The summary: the nine headline numbers, what ran, and the breakdowns.

    Top-level numbers: ``n``, ``hits@1``, ``hit``, ``f1``, ``em_loose`` (means over every
    question, unanswered ones counted as 0) and the mean cost per question
    ``llm_calls_per_q``, ``prompt_tokens_per_q``, ``completion_tokens_per_q``,
    ``seconds_per_q``.
    """
    overall = aggregate(r["metrics"] for r in records)
    costs = {key: distribution([float(r[key]) for r in records]) for key in COSTS}
    sources = Counter(r["topic_source"] for r in records)
    models = [r["model"] for r in records if r.get("model") and r["model"] != "none"]
    return {
        "n": overall["n"],
        "hits@1": overall["hits@1"],
        "hit": overall["hit"],
        "f1": overall["f1"],
        "em_loose": overall["em_loose"],
        "llm_calls_per_q": costs["llm_calls"]["mean"],
        "prompt_tokens_per_q": costs["prompt_tokens"]["mean"],
        "completion_tokens_per_q": costs["completion_tokens"]["mean"],
        "seconds_per_q": costs["seconds"]["mean"],
        "dataset": config.questions,
        "reasoner": config.reasoner,
        "model": models[0] if models else "none",
        "topic_entities": _topic_label(sources),
        "breakdowns": {
            "metrics": {"precision": overall["precision"], "recall": overall["recall"],
                        "answered": sum(1 for r in records if r["answers"]) / len(records) if records else 0.0},
            "by_hop": _grouped(records, "hop"),
            "by_qtype": _grouped(records, "qtype"),
            "cost": costs,
            "by_step": _steps(records),
            "topic_sources": dict(sources),
        },
    }


def without_timing(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary less its wall-clock numbers (``seconds_per_q``, the ``seconds`` cost, each step's
    seconds): what a repeat of the run reproduces exactly, with any number of workers."""
    kept = json.loads(json.dumps(summary))
    del kept["seconds_per_q"]
    del kept["breakdowns"]["cost"]["seconds"]
    for step in kept["breakdowns"]["by_step"].values():
        del step["seconds"]
    return kept


def _topic_label(sources: Counter) -> str:
    """"gold" when every question's topics came from the dataset, "linked" when every one was
    linked, "mixed" (with the counts in ``breakdowns.topic_sources``) otherwise."""
    if sources and set(sources) == {"gold"}:
        return "gold"
    if sources and set(sources) == {"linked"}:
        return "linked"
    return "mixed" if sources else "none"


def _grouped(records: Sequence[dict[str, Any]], key: str) -> dict[str, dict[str, float]]:
    groups: dict[str, list[dict[str, float]]] = defaultdict(list)
    for record in records:
        if record.get(key) is not None:
            groups[str(record[key])].append(record["metrics"])
    return {name: aggregate(rows) for name, rows in sorted(groups.items())}


def _steps(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """LLM cost totalled per reasoner step (the ``step`` of each call); ``cached`` counts the calls
    answered from ``--llm-cache`` (their seconds are the lookup's)."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0, "cached": 0, "prompt_tokens": 0,
                                                               "completion_tokens": 0, "seconds": 0.0})
    for record in records:
        for call in record.get("trace", {}).get("llm", []):
            step = totals[str(call.get("step", "?"))]
            step["calls"] += 1
            step["cached"] += int(bool(call.get("cached")))
            step["prompt_tokens"] += int(call.get("prompt_tokens", 0))
            step["completion_tokens"] += int(call.get("completion_tokens", 0))
            step["seconds"] += float(call.get("seconds", 0.0))
    return dict(sorted(totals.items()))
