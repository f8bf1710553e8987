"""A matrix of evaluation runs from one TOML file: ``localkg eval grid GRID.toml --out DIR``.

The cells are question files × models × reasoners × each reasoner's settings; each cell is an
ordinary run in its own folder, ``DIR/<reasoner label>/<questions name>`` (``@<model>`` is added
to the label when the grid has several models), always resumed, so a grid stopped anywhere
continues where it was and a finished cell costs nothing. One pool of workers serves every cell,
and the cells are ordered store by store and model by model, so cells that share them reuse the
workers' open store and loaded model. docs/evaluation.md describes the file; docs/grids/ holds
the grid of docs/results.md.
"""
from __future__ import annotations

import dataclasses
import itertools
import tomllib
from pathlib import Path
from typing import Any, Iterator

from localkg.errors import EvaluationError
from localkg.evaluation.config import EvalConfig
from localkg.evaluation.harness import check_inputs, run_eval
from localkg.evaluation.pools import open_pool, resolve_workers
from localkg.reasoners.base import get_reasoner
from localkg.reasoners.default import default_reasoner

# The run options a grid may set in [run], in a [[questions]] entry or in a [[reasoners]] entry;
# the workers serve the whole grid, so they are set in [run] only.
OPTIONS = ("format", "limit", "sample", "seed", "n_ctx", "prompt_style", "n_gpu_layers", "llm_threads", "llm_cache")
FAN_OUT = ("workers", "ray")
PATH_OPTIONS = ("llm_cache",)
BUNDLED = "bundled"


@dataclasses.dataclass
class Cell:
    """One run of the grid: its folder name and its configuration."""

    name: str
    config: EvalConfig


def read_grid(path: str | Path, out: str | Path) -> list[Cell]:
    """The grid's cells, checked (question files, reasoners, settings) before anything runs.

    A grid without ``[[reasoners]]`` runs on each question set the reasoner its store supports
    best (``localkg.reasoners.default``)."""
    path = Path(path)
    try:
        grid = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise EvaluationError(f"cannot read the grid {path}: {error}") from None
    _only(grid, ("run", "models", "questions", "reasoners"), str(path))
    here = path.resolve().parent
    run = grid.get("run", {})
    _only(run, OPTIONS + FAN_OUT, "[run]")
    defaults = _options(run, here)
    if "workers" in run:
        defaults["workers"] = resolve_workers(str(run["workers"]))
    if "ray" in run:
        defaults["ray"] = str(run["ray"])
    models = grid.get("models", [BUNDLED])
    question_sets = _entries(grid, "questions", ("name", "path", "db"))
    reasoners = _entries(grid, "reasoners", ("name", "label", "settings", "questions"))
    known = {entry["name"] for entry in question_sets}
    cells = []
    for entry, model in itertools.product(question_sets, models):
        db = _resolve(here, entry["db"]) if entry.get("db") else None
        for reasoner in reasoners or [{"name": default_reasoner(db).name}]:
            wanted = reasoner.get("questions", sorted(known))
            unknown = set(wanted) - known
            if unknown:
                raise EvaluationError(f"{path}: reasoner {reasoner['name']} names questions {sorted(unknown)}, "
                                      f"which no [[questions]] entry defines")
            if entry["name"] not in wanted:
                continue
            uses_llm = get_reasoner(reasoner["name"]).uses_llm
            if not uses_llm and model != models[0]:
                continue  # the model plays no part: one cell
            for settings in _variants(reasoner.get("settings", {})):
                label = _label(reasoner, settings, model if uses_llm and len(models) > 1 else None)
                options = {**defaults, **_options(entry, here), **_options(reasoner, here)}
                config = EvalConfig(questions=str(_resolve(here, entry["path"])), reasoner=reasoner["name"],
                                    out=str(Path(out) / label / entry["name"]), db=str(db) if db else None,
                                    settings=settings,
                                    model=None if model == BUNDLED else str(_resolve(here, model)), **options)
                try:
                    check_inputs(config)
                except EvaluationError as error:
                    raise EvaluationError(f"{path}: [[questions]] {entry['name']}: {error}") from None
                cells.append(Cell(f"{label}/{entry['name']}", config))
    folders = [cell.name for cell in cells]
    repeated = sorted({name for name in folders if folders.count(name) > 1})
    if repeated:
        raise EvaluationError(f"{path}: two cells would share the folder {repeated[0]}; give one a label")
    if not cells:
        raise EvaluationError(f"{path} defines no cell (it needs [[questions]] entries)")
    return cells


def run_grid(cells: list[Cell], progress: bool = True, **fan_out: Any) -> Iterator[tuple[Cell, dict[str, Any]]]:
    """Run (resume) every cell through one pool; yields each cell with its summary.

    ``fan_out`` (``workers``, ``ray``) overrides the grid's own for every cell."""
    cells = [dataclasses.replace(cell, config=dataclasses.replace(cell.config, **fan_out)) for cell in cells]
    with open_pool(cells[0].config) as pool:
        for cell in cells:
            yield cell, run_eval(cell.config, resume=True, progress=progress, pool=pool)


def _only(table: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise EvaluationError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(allowed)}")


def _entries(grid: dict[str, Any], key: str, own: tuple[str, ...]) -> list[dict[str, Any]]:
    entries = grid.get(key, [])
    if not isinstance(entries, list):
        raise EvaluationError(f"{key} must be a list of tables ([[{key}]])")
    for entry in entries:
        _only(entry, own + OPTIONS, f"[[{key}]] {entry.get('name', '?')}")
        if "name" not in entry or (key == "questions" and "path" not in entry):
            raise EvaluationError(f"every [[{key}]] entry needs a name" + (" and a path" if key == "questions" else ""))
    return entries


def _options(table: dict[str, Any], here: Path) -> dict[str, Any]:
    options = {key: table[key] for key in OPTIONS if key in table}
    for key in PATH_OPTIONS:
        if options.get(key):
            options[key] = str(_resolve(here, options[key]))
    return options


def _variants(settings: dict[str, Any] | list[dict[str, Any]]) -> list[dict[str, str]]:
    """A table of settings is one cell; a list of tables is one cell each (a sweep)."""
    tables = settings if isinstance(settings, list) else [settings]
    return [{str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in table.items()} for table in tables]


def _label(reasoner: dict[str, Any], settings: dict[str, str], model: str | None) -> str:
    label = reasoner.get("label") or reasoner["name"]
    if isinstance(reasoner.get("settings"), list):
        label += "-" + "-".join(f"{k}={v}" for k, v in sorted(settings.items()))
    return label + (f"@{Path(model).stem}" if model else "")


def _resolve(here: Path, value: str) -> Path:
    """Paths in the grid are relative to its file."""
    return (here / Path(value).expanduser()).resolve()
