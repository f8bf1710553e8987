"""Imports point one way (docs/architecture.md draws the map): every module's imports, read with
``ast`` (function-level and type-checking imports included), go only to a lower layer; the llm
package knows no graph; no reasoner module imports another reasoner module."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from localkg.reasoners.base import REASONERS

CHECKOUT = Path(__file__).resolve().parents[1]

#: Each top-level part of the ``localkg`` namespace and its layer: a module may import from its
#: own part and from parts of a lower layer only (parts of one layer know nothing of each other).
LAYERS = {
    "errors": 0, "text": 0, "prompts": 0, "beam": 0,
    "store": 1, "llm": 1, "training": 1,
    "loaders": 2, "indexes": 2, "datasets": 2,
    "fog": 3, "path_scorer": 3, "demo": 3, "localkg": 3,
    "reasoners": 4,
    "evaluation": 5,
    "cli": 6,
    "__main__": 7,
}


def module_name(path: Path) -> str:
    """The module a source file installs as (``loaders/x.py`` → ``localkg.loaders.x``)."""
    parts = list(path.relative_to(CHECKOUT).with_suffix("").parts)
    if parts[0] != "localkg":
        parts = ["localkg", *parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> list[Path]:
    found = [*CHECKOUT.glob("localkg/**/*.py"), *CHECKOUT.glob("loaders/**/*.py"),
             *CHECKOUT.glob("indexes/**/*.py"), CHECKOUT / "cli.py"]
    return sorted(path for path in found if not path.is_symlink())


def imported(path: Path) -> set[str]:
    """Every ``localkg`` module a file imports (``from localkg import x`` counts as ``localkg.x``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names |= ({f"localkg.{alias.name}" for alias in node.names} if node.module == "localkg"
                      else {node.module})
    return {name for name in names if name == "localkg" or name.startswith("localkg.")}


def part(module: str) -> str:
    return module.split(".")[1] if "." in module else "localkg"


IMPORTS = {module_name(path): imported(path) for path in sources()}


def test_every_part_has_a_layer() -> None:
    assert {part(module) for module in IMPORTS} <= set(LAYERS)


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_imports_go_only_to_lower_layers(module: str) -> None:
    here = part(module)
    wrong = sorted(name for name in IMPORTS[module]
                   if part(name) != here and LAYERS[part(name)] >= LAYERS[here])
    assert not wrong, f"{module} (layer {LAYERS[here]}) imports {wrong}"


def test_the_llm_package_knows_no_graph() -> None:
    graph = {"store", "loaders", "indexes", "datasets", "fog", "path_scorer", "reasoners", "evaluation"}
    wrong = {module: sorted(name for name in names if part(name) in graph)
             for module, names in IMPORTS.items() if part(module) == "llm"}
    assert not any(wrong.values()), wrong


def test_no_reasoner_module_imports_another() -> None:
    reasoner_modules = set(REASONERS.values())
    wrong = {module: sorted(IMPORTS[module] & (reasoner_modules - {module})) for module in reasoner_modules}
    assert not any(wrong.values()), wrong


def test_the_check_sees_an_import_that_goes_up(tmp_path: Path) -> None:
    """The reader finds function-level imports, so a lazy import cannot slip past the layers."""
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from localkg.evaluation.harness import run_eval\n    import localkg.cli\n")
    assert imported(source) == {"localkg.evaluation.harness", "localkg.cli"}
