"""Start-up pays only for what runs: naming a reasoner imports only its module and the components
it uses. ``localkg stats`` and ``localkg ask --reasoner io`` (the real bundled model, no graph
reasoning) never import torch, which only the encoder and the trained scorers need; choosing the
default reasoner and building tog on a store without trained scorers import none of it, and tog
answering imports the encoder's torch but neither sentence-transformers nor fog's model code."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: The heavy modules a run may or may not import: torch, sentence-transformers (which the bundled
#: encoder does without), fog's model and the path scorer's.
WATCHED = ("torch", "sentence_transformers", "localkg.fog.model", "localkg.path_scorer.model")
LOADED = f"print('loaded:', [name for name in {WATCHED!r} if name in sys.modules])"

RUN = """
import sys
from localkg.cli import main
try:
    main({args!r}, standalone_mode=False)
finally:
    LOADED
""".replace("LOADED", LOADED)

BUILD = """
import sys
from localkg.reasoners.base import Context, get_reasoner
from localkg.store import KG
with KG.open({db!r}, read_only=True) as kg:
    get_reasoner({name!r})(Context(kg))
LOADED
""".replace("LOADED", LOADED)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from localkg.store import KG

    path = tmp_path_factory.mktemp("lazy") / "db"
    with KG.create(path) as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich")])
    return path


def run_python(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def run_cli(*args: str) -> list[str]:
    return run_python(RUN.format(args=list(args)))


def test_stats_never_imports_torch(db: Path) -> None:
    lines = run_cli("stats", "--db", str(db))
    assert any("facts: 1" in line for line in lines)
    assert lines[-1] == "loaded: []"


@pytest.mark.model
def test_ask_with_the_io_reasoner_never_imports_torch(db: Path) -> None:
    lines = run_cli("ask", "who directed Top Hat", "--db", str(db), "--reasoner", "io", "--n-ctx", "512")
    assert "io: 1 LLM calls" in lines[-2]
    assert lines[-1] == "loaded: []"


def test_choosing_the_default_reasoner_never_imports_torch(db: Path) -> None:
    """Whether the store has a trained path scorer is a look for its file."""
    lines = run_python(f"import sys; from localkg.cli import pick_reasoner; print(pick_reasoner({str(db)!r}, None)); "
                       + LOADED)
    assert lines[-2:] == ["tog", "loaded: []"]


def test_building_tog_without_trained_scorers_imports_no_torch(db: Path) -> None:
    """tog takes its depth from fog's answer-distance head only with depth_from=distance, and ranks
    relations with the path scorer only when the store has one: neither is imported without."""
    assert run_python(BUILD.format(db=str(db), name="tog"))[-1] == "loaded: []"


@pytest.mark.model
def test_tog_answering_imports_the_encoders_torch_only(db: Path) -> None:
    lines = run_cli("ask", "who directed Top Hat", "--db", str(db), "--reasoner", "tog", "--topic", "Top Hat",
                    "--n-ctx", "1024")
    assert any(line.startswith("(tog: ") for line in lines)
    assert lines[-1] == "loaded: ['torch']"


def test_a_reasoner_that_needs_torch_does_import_it() -> None:
    """The check above can fail: naming fog imports torch through its trained scorer."""
    code = "import sys; from localkg.reasoners import get_reasoner; get_reasoner('fog'); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True"]
