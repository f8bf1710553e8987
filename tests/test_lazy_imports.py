"""Naming a reasoner imports only its module: ``localkg stats`` and ``localkg ask --reasoner io``
(the real bundled model, no graph reasoning) never import torch, which only the trained scorers need."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RUN = """
import sys
from localkg.cli import main
try:
    main({args!r}, standalone_mode=False)
finally:
    print("TORCH" if "torch" in sys.modules else "NO TORCH")
"""


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from localkg.store import KG

    path = tmp_path_factory.mktemp("lazy") / "db"
    with KG.create(path) as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich")])
    return path


def run_cli(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", RUN.format(args=list(args))], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_stats_never_imports_torch(db: Path) -> None:
    lines = run_cli("stats", "--db", str(db))
    assert any("facts: 1" in line for line in lines)
    assert lines[-1] == "NO TORCH"


@pytest.mark.model
def test_ask_with_the_io_reasoner_never_imports_torch(db: Path) -> None:
    lines = run_cli("ask", "who directed Top Hat", "--db", str(db), "--reasoner", "io", "--n-ctx", "512")
    assert "io: 1 LLM calls" in lines[-2]
    assert lines[-1] == "NO TORCH"


def test_a_reasoner_that_needs_torch_does_import_it() -> None:
    """The check above can fail: naming fog imports torch through its trained scorer."""
    code = "import sys; from localkg.reasoners import get_reasoner; get_reasoner('fog'); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True"]
