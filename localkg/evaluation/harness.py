"""Run a reasoner over a questions file and score it: ``localkg eval``.

One run writes into its output folder ``run.json`` (what was run, and what the reasoner settled
on the store when the run started: ``relations=auto`` as ``embed`` or ``trained``, each checkpoint
it reads with its fingerprint; so ``--resume`` refuses to mix two runs), ``predictions.jsonl``
(one line per question, appended as soon as any worker answers it, so a killed run loses only
what was in flight), ``status.json`` (running, finished, failed with its error, or interrupted),
and once every question is answered ``summary.json`` (the metric and the cost, see
:func:`summarise`) and ``report.md`` (``localkg.evaluation.report``). A run that stops writes no
summary: its numbers would look like a result.

Questions are picked deterministically (``--sample N --seed S`` draws N in the order drawn, then
``--limit`` keeps the first; :func:`localkg.datasets.select_questions`) and the LLM is seeded
alike, so a run can be repeated and resumed.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator, Sequence

from tqdm import tqdm

from localkg.datasets import detect_format, read_questions, select_questions
from localkg.errors import EvaluationError
from localkg.evaluation.answering import check_settings
from localkg.evaluation.metrics import aggregate, distribution
from localkg.evaluation.config import RESUMABLE_CHANGES, EvalConfig
from localkg.evaluation.pools import open_pool
from localkg.evaluation.workers import Pool

PREDICTIONS = "predictions.jsonl"
SUMMARY = "summary.json"
REPORT = "report.md"
RUN = "run.json"
STATUS = "status.json"
COSTS = ("llm_calls", "prompt_tokens", "completion_tokens", "kg_queries", "seconds")
# ---------------------------------------------------------------- the run
def run_eval(config: EvalConfig, resume: bool = False, progress: bool = True,
             pool: Pool | None = None) -> dict[str, Any]:
    """Run ``config`` and write predictions, summary and report into ``config.out``.

    With ``resume``, questions already in ``predictions.jsonl`` are kept and not asked again
    (a line cut short by a kill is dropped and redone). The questions are answered by ``pool``
    (a grid passes one for all its cells), else by the workers ``config`` asks for. Before the
    first question every worker builds the reasoner, and what it settled on the store is
    recorded (a resumed run must settle the same). Returns the summary.
    """
    check_inputs(config)
    questions = select_questions(read_questions(config.questions, config.format), config.sample, config.seed,
                                 config.limit)
    out = Path(config.out)
    previous = _check_folder(out, config, resume)
    done = set(_read_predictions(out / PREDICTIONS, repair=True))
    todo = [q for q in questions if q.id not in done]
    config.uses = (previous or {}).get("uses")
    if todo:
        _answer(config, out, len(questions), todo, previous if done else None, progress, pool)
    answered = _read_predictions(out / PREDICTIONS)
    records = [answered[q.id] for q in questions if q.id in answered]  # question order: the summary is the same
    summary = summarise(records, config)
    (out / SUMMARY).write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    from localkg.evaluation.report import write_report

    write_report(out, summary, records)
    _write_status(out, "finished", questions=len(questions), answered=len(records))
    return summary


def check_inputs(config: EvalConfig) -> None:
    """Refuse, before any worker starts, what this process can tell will not run: an unknown
    reasoner or setting (the reasoner's own error), no questions file, no ``--db`` for a file
    without its own graphs. Settles ``config.format`` when it is ``auto``. The store is the
    workers' to open: on a Ray cluster it need not be on this machine."""
    check_settings(config)
    questions = Path(config.questions)
    if not questions.is_file():
        raise EvaluationError(f"no questions file at {questions}")
    if config.format == "auto":
        config.format = detect_format(questions)
    if config.db is None and config.format != "rog":
        raise EvaluationError("--db is needed: only per-question-subgraph (rog) files bring their own graph")


def _answer(config: EvalConfig, out: Path, questions: int, todo: Sequence[Any], previous: dict[str, Any] | None,
            progress: bool, pool: Pool | None) -> None:
    """Prepare the workers, record the run with what its reasoner settled (which must be what
    ``previous``, the run whose answers are kept, settled), and answer ``todo``."""
    with (nullcontext(pool) if pool is not None else open_pool(config)) as workers:
        with _stop_recorded(out, questions):
            config.uses = workers.prepare(config)
        _start_run(out, config, previous, questions)
        with _stop_recorded(out, questions), (out / PREDICTIONS).open("a", encoding="utf-8") as handle, \
                tqdm(total=questions, initial=questions - len(todo), desc=f"eval {config.reasoner}", unit="q",
                     disable=not progress) as bar:
            for record in workers.answer_all(config, todo):  # in the order they finish
                handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                handle.flush()
                bar.update(1)


# ---------------------------------------------------------------- output folder, status and resume
def _check_folder(out: Path, config: EvalConfig, resume: bool) -> dict[str, Any] | None:
    """Check the folder against the run; the identity its ``run.json`` recorded (None: a new run,
    recorded now; what its reasoner settles is added once the workers have built it).

    What a resumed run's reasoner settles is compared then too (:func:`_start_run`).
    """
    out.mkdir(parents=True, exist_ok=True)
    predictions = out / PREDICTIONS
    if predictions.exists() and predictions.stat().st_size > 0 and not resume:
        raise EvaluationError(f"{out} already holds predictions of a run; pass --resume to continue it, "
                              "or choose another --out")
    if not resume or not (out / RUN).exists():
        (out / RUN).write_text(json.dumps(config.identity(), indent=2))
        return None
    previous = json.loads((out / RUN).read_text())
    current = json.loads(json.dumps(config.identity()))
    changed = sorted(k for k in set(previous) | set(current)
                     if k not in RESUMABLE_CHANGES + ("uses",) and previous.get(k) != current.get(k))
    if changed:
        raise EvaluationError(f"--resume: {out} holds a run with different {', '.join(changed)}; "
                              "resume it with the same options, or choose another --out")
    return previous


def _start_run(out: Path, config: EvalConfig, previous: dict[str, Any] | None, questions: int) -> None:
    """Record the run in ``run.json`` and mark it running (the summary of an earlier pass goes: it
    no longer describes the run). A resumed run whose reasoner settled otherwise (the store gained
    a path scorer, a checkpoint was retrained) is refused first: its answers would mix two runs."""
    if previous is not None and previous.get("uses") != config.uses:
        from localkg.evaluation.report import describe_uses

        raise EvaluationError(f"--resume: {out} was run with {describe_uses(previous.get('uses'))}, and this store "
                              f"now gives {describe_uses(config.uses)}; the answers would mix the two. Put back "
                              "what the run used, or start a new run with another --out")
    (out / RUN).write_text(json.dumps(config.identity(), indent=2))
    for stale in (SUMMARY, REPORT):
        (out / stale).unlink(missing_ok=True)
    _write_status(out, "running", questions=questions)


@contextmanager
def _stop_recorded(out: Path, questions: int) -> Iterator[None]:
    """A run that stops is marked so in ``status.json``: interrupted, or failed with its error."""
    try:
        yield
    except KeyboardInterrupt:
        _write_status(out, "interrupted", questions=questions)
        raise
    except Exception as error:
        _write_status(out, "failed", questions=questions, error=str(error))
        raise


def _write_status(out: Path, state: str, **details: Any) -> None:
    (out / STATUS).write_text(json.dumps({"state": state, **details}, indent=2, ensure_ascii=False))


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
        "uses": config.uses,
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
