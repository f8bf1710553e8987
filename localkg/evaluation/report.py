"""Human-readable reports of evaluation runs: ``report.md`` with PNG plots, and comparisons.

Plots use matplotlib's Agg backend (files only, no display), so reports are
written the same way on a laptop, a server and CI.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from localkg.errors import EvaluationError

ACCURACY_PLOT = "accuracy_by_hop.png"
COST_PLOT = "cost_distribution.png"
COMPARE_TABLE = "compare.md"
COMPARE_PLOT = "compare.png"
MISSES_SHOWN = 5


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3f}"
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def write_report(out: Path, summary: dict[str, Any], records: Sequence[dict[str, Any]]) -> Path:
    """Write ``report.md`` and its two plots into ``out``; return the report's path."""
    breakdowns = summary["breakdowns"]
    lines = [
        f"# {summary['reasoner']} on {summary['dataset']}",
        "",
        f"Model: {summary['model']} · topic entities: {summary['topic_entities']} "
        f"({', '.join(f'{k}: {v}' for k, v in breakdowns['topic_sources'].items())}) · questions: {summary['n']}",
        "",
        f"Settled when the run started: {describe_uses(summary.get('uses'))}.",
        "",
        "Metric (docs/metrics.md): normalised exact match against each gold answer and its aliases; "
        "unanswered questions count as wrong. `em_loose` is ToG's lenient substring match, shown only for "
        "comparison with papers that use it.",
        "",
        "## Accuracy",
        "",
        *_table(["n", "Hits@1", "Hit", "precision", "recall", "F1", "answered", "em_loose (ToG-style)"],
                [[summary["n"], summary["hits@1"], summary["hit"], breakdowns["metrics"]["precision"],
                  breakdowns["metrics"]["recall"], summary["f1"], breakdowns["metrics"]["answered"],
                  summary["em_loose"]]]),
        "",
    ]
    for title, key in (("By hop", "by_hop"), ("By question type", "by_qtype")):
        groups = breakdowns[key]
        if groups:
            lines += [f"## {title}", "",
                      *_table(["group", "n", "Hits@1", "Hit", "F1", "em_loose"],
                              [[name, g["n"], g["hits@1"], g["hit"], g["f1"], g["em_loose"]]
                               for name, g in groups.items()]), ""]
            if key == "by_hop":
                lines += [f"![accuracy by hop]({ACCURACY_PLOT})", ""]
    lines += ["## Cost per question", "",
              *_table(["cost", "mean", "p50", "p95", "total"],
                      [[name, d["mean"], d["p50"], d["p95"], d["total"]] for name, d in breakdowns["cost"].items()]),
              "", f"![cost distribution]({COST_PLOT})", ""]
    if breakdowns["by_step"]:
        lines += ["## LLM cost per reasoner step (totals)", "",
                  *_table(["step", "calls", "from cache", "prompt tokens", "completion tokens", "seconds"],
                          [[name, int(s["calls"]), int(s.get("cached", 0)), int(s["prompt_tokens"]),
                            int(s["completion_tokens"]), s["seconds"]]
                           for name, s in breakdowns["by_step"].items()]), ""]
    misses = [r for r in records if not r["metrics"]["hits@1"]][:MISSES_SHOWN]
    if misses:
        lines += [f"## First {len(misses)} misses", "",
                  *_table(["question", "gold", "predicted", "notes"],
                          [[r["question"], "; ".join(g[0] for g in r["gold"][:5]),
                            "; ".join(a["name"] for a in r["answers"][:5]) or "(none)", " / ".join(r["notes"])[:200]]
                           for r in misses]), ""]
    _plot_accuracy(out / ACCURACY_PLOT, summary)
    _plot_costs(out / COST_PLOT, records)
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _plot_accuracy(path: Path, summary: dict[str, Any]) -> None:
    plt = _pyplot()
    groups = summary["breakdowns"]["by_hop"] or {"all": summary}
    names = list(groups)
    figure, axes = plt.subplots(figsize=(max(4, 1.6 * len(names) + 2), 3.2))
    width = 0.38
    for offset, (metric, label) in enumerate((("hits@1", "Hits@1"), ("f1", "F1"))):
        positions = [i + (offset - 0.5) * width for i in range(len(names))]
        axes.bar(positions, [groups[n][metric] for n in names], width, label=label)
    axes.set_xticks(range(len(names)), [f"{n} hop" if n != "all" else n for n in names])
    axes.set_ylim(0, 1)
    axes.set_ylabel("score")
    axes.set_title(f"{summary['reasoner']}: accuracy by hop")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _plot_costs(path: Path, records: Sequence[dict[str, Any]]) -> None:
    plt = _pyplot()
    panels = (("seconds", "wall seconds"), ("kg_queries", "KG queries"), ("llm_calls", "LLM calls"),
              ("tokens", "prompt + completion tokens"))
    figure, axes = plt.subplots(1, len(panels), figsize=(13, 3))
    for axis, (key, label) in zip(axes, panels):
        values = [r["prompt_tokens"] + r["completion_tokens"] if key == "tokens" else r[key] for r in records]
        axis.hist(values, bins=20)
        axis.set_xlabel(label)
        axis.set_ylabel("questions")
    figure.suptitle("cost per question")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def describe_uses(uses: dict[str, Any] | None, short: bool = False) -> str:
    """What a run's reasoner settled on its store, in words: ``relations=trained; checkpoint
    /db/paths/scorer.pt (fingerprint)``; ``short`` names each checkpoint by its last two parts."""
    if uses is None:
        return "nothing recorded (a run from before localkg recorded what its reasoner settled)"
    settings = ", ".join(f"{key}={value}" for key, value in uses["settings"].items())
    checkpoints = [f"checkpoint {'/'.join(Path(path).parts[-2:]) if short else path} ({fingerprint})"
                   for path, fingerprint in uses["checkpoints"].items()]
    return "; ".join(([settings] if settings else []) + (checkpoints or ["no checkpoint"]))


# ---------------------------------------------------------------- compare
COMPARE_COLUMNS = ("dataset", "reasoner", "model", "topic_entities", "n", "hits@1", "hit", "f1", "em_loose",
                   "llm_calls_per_q", "prompt_tokens_per_q", "completion_tokens_per_q", "seconds_per_q")
UNFINISHED = "—"


@dataclass(frozen=True)
class Run:
    """A run folder as ``eval compare`` sees it: its state and, once finished, its summary."""

    folder: Path
    state: str                       # "finished", "failed after ...", "interrupted after ..." or "incomplete: ..."
    summary: dict[str, Any] | None   # only for a finished run
    identity: dict[str, Any]         # run.json (empty for a run from before it was written)

    def row(self) -> list[Any]:
        """The compare table's row: the summary's numbers, or for an unfinished run what it was
        (from run.json) and dashes, never numbers that would look like a result."""
        if self.summary is not None:
            return [self.summary[c] for c in COMPARE_COLUMNS] + [describe_uses(self.summary.get("uses"), True),
                                                                  self.state]
        known = {"dataset": self.identity.get("questions", "?"), "reasoner": self.identity.get("reasoner", "?")}
        return ([known.get(c, UNFINISHED) for c in COMPARE_COLUMNS]
                + [describe_uses(self.identity["uses"], True) if self.identity.get("uses") else UNFINISHED, self.state])


def read_run(folder: str | Path) -> Run:
    """The run in ``folder`` (``localkg.evaluation.harness`` writes it): finished when its
    ``summary.json`` reads and no later pass has started; else failed (``status.json`` keeps the
    error), interrupted, or incomplete (killed, still running, or a damaged summary)."""
    folder = Path(folder)
    files = {name: folder / name for name in ("run.json", "status.json", "summary.json", "predictions.jsonl")}
    if not any(path.is_file() for path in files.values()):
        raise EvaluationError(f"{folder} holds no run (no summary.json, run.json or predictions; is it the --out "
                              "of a `localkg eval`?)")
    identity, status, summary = (_json_or_none(files[name]) for name in ("run.json", "status.json", "summary.json"))
    identity = identity or {}
    state = (status or {"state": "finished"})["state"]   # a run from before status.json: finished if summarised
    answered = _lines(files["predictions.jsonl"])
    of = f"{answered} of {status['questions']}" if status and "questions" in status else f"{answered}"
    if state == "failed":
        return Run(folder, f"failed after {of} answered: {status['error']}", None, identity)  # type: ignore[index]
    if state == "interrupted":
        return Run(folder, f"interrupted after {of} answered", None, identity)
    if state != "finished" or summary is None or not set(COMPARE_COLUMNS) <= set(summary):
        return Run(folder, f"incomplete: {of} answered, no summary (killed, still running, or damaged)", None,
                   identity)
    return Run(folder, "finished", summary, identity)


def _json_or_none(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.is_file() else 0


def compare_runs(folders: Sequence[str | Path], out: str | Path) -> str:
    """One table across runs and one plot of the finished ones (accuracy against LLM calls and
    tokens per question). A run that failed, was interrupted or is incomplete is a row that
    says so, with no numbers.

    Writes ``compare.md`` and ``compare.png`` into ``out`` and returns the table.
    """
    runs = [read_run(folder) for folder in folders]
    table = "\n".join(_table(COMPARE_COLUMNS + ("uses", "status"), [run.row() for run in runs]))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / COMPARE_TABLE).write_text(table + "\n", encoding="utf-8")
    _plot_compare(out / COMPARE_PLOT, [run.summary for run in runs if run.summary is not None])
    return table


def _plot_compare(path: Path, summaries: Sequence[dict[str, Any]]) -> None:
    plt = _pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    for summary in summaries:
        label = f"{summary['reasoner']} · {Path(summary['dataset']).parent.name}/{Path(summary['dataset']).stem}"
        tokens = summary["prompt_tokens_per_q"] + summary["completion_tokens_per_q"]
        for axis, x in zip(axes, (summary["llm_calls_per_q"], tokens)):
            axis.scatter([x], [summary["hits@1"]])
            axis.annotate(label, (x, summary["hits@1"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for axis, label in zip(axes, ("LLM calls per question", "tokens per question")):
        axis.set_xlabel(label)
        axis.set_ylabel("Hits@1")
        axis.set_ylim(0, 1)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
