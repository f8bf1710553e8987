"""Human-readable reports of evaluation runs: ``report.md`` with PNG plots, and comparisons.

Plots use matplotlib's Agg backend (files only, no display), so reports are
written the same way on a laptop, a server and CI.
"""
from __future__ import annotations

import json
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


# ---------------------------------------------------------------- compare
COMPARE_COLUMNS = ("dataset", "reasoner", "model", "topic_entities", "n", "hits@1", "hit", "f1", "em_loose",
                   "llm_calls_per_q", "prompt_tokens_per_q", "completion_tokens_per_q", "seconds_per_q")


def load_summaries(folders: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The ``summary.json`` of each run folder (an error names a folder without one)."""
    summaries = []
    for folder in folders:
        path = Path(folder) / "summary.json"
        if not path.is_file():
            raise EvaluationError(f"{folder} holds no summary.json (is it the --out of a finished `localkg eval`?)")
        summaries.append(json.loads(path.read_text(encoding="utf-8")))
    return summaries


def compare_runs(folders: Sequence[str | Path], out: str | Path) -> str:
    """One table and one plot across runs (accuracy against LLM calls and tokens per question).

    Writes ``compare.md`` and ``compare.png`` into ``out`` and returns the table.
    """
    summaries = load_summaries(folders)
    table = "\n".join(_table(COMPARE_COLUMNS, [[s[c] for c in COMPARE_COLUMNS] for s in summaries]))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / COMPARE_TABLE).write_text(table + "\n", encoding="utf-8")
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
    figure.savefig(out / COMPARE_PLOT, dpi=100)
    plt.close(figure)
    return table
