"""``localkg eval --ray``: the workers as actors of a local Ray runtime (2 actors, 1 CPU each;
real store, real MiniLM). One runtime for the whole file: starting Ray is the slow part."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.errors import WorkerError
from localkg.evaluation.config import EvalConfig
from localkg.evaluation.harness import run_eval, without_timing

CHECKOUT = Path(__file__).resolve().parents[1]

# Not imported here: the local runtime binds to the loopback only when localkg imports Ray first.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs pip install 'localkg[ray]'")


def test_a_local_ray_run_with_two_actors(metaqa_sample, tmp_path: Path) -> None:
    from localkg.evaluation.ray_runner import RayPool

    questions, db = metaqa_sample
    args = [questions, "--db", db, "--reasoner", "embed-path", "--sample", 6, "--seed", 2]
    inline = CliRunner().invoke(main, ["eval", *map(str, args), "--out", str(tmp_path / "inline")])
    assert inline.exit_code == 0, inline.output

    def config(out: str, store: Path) -> EvalConfig:
        return EvalConfig(questions=str(questions), reasoner="embed-path", out=str(tmp_path / out), db=str(store),
                          sample=6, seed=2, workers=2, ray="local")

    with RayPool("local", workers=2, threads=1) as pool:
        import ray

        assert pool.size == 2
        assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}   # nothing beyond localhost
        summary = run_eval(config("ray", db), progress=False, pool=pool)
        inline_summary = json.loads((tmp_path / "inline" / "summary.json").read_text())
        assert without_timing(summary) == without_timing(inline_summary)
        lines = (tmp_path / "ray" / "predictions.jsonl").read_text().splitlines()
        assert len(lines) == 6 and len({json.loads(line)["qid"] for line in lines}) == 6

        with pytest.raises(WorkerError) as missing:                # a node that cannot open the store
            run_eval(config("missing", tmp_path / "no-such-db"), progress=False, pool=pool)
        message = str(missing.value)
        assert message.startswith("node ") and "no-such-db" in message and "same path" in message

    assert not ray.is_initialized()                                # the runtime is shut down with the pool


def test_bad_ray_addresses_are_one_clear_line(metaqa_sample, tmp_path: Path) -> None:
    questions, db = metaqa_sample
    result = CliRunner().invoke(main, ["eval", str(questions), "--db", str(db), "--out", str(tmp_path / "r"),
                                       "--ray", "not an address"])
    assert result.exit_code == 1 and "--ray takes local, auto, ray://HOST:PORT or HOST:PORT" in result.output


@pytest.mark.parametrize("where", ["the checkout's root", "a folder with a localkg/ of its own"])
def test_the_actors_import_the_installed_localkg_whatever_the_working_directory(where, metaqa_sample, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray puts the driver's working directory first on its workers' sys.path unless the job has a
    working_dir: run from the checkout's root, the actors imported its localkg/, which (with any
    install but the editable one, whose finder maps them) has no indexes/ or loaders/. A folder
    whose localkg/ cannot be imported shows it with any install."""
    questions, db = metaqa_sample
    if where == "the checkout's root":
        here = CHECKOUT
    else:
        here = tmp_path / "elsewhere"
        (here / "localkg").mkdir(parents=True)
        (here / "localkg" / "__init__.py").write_text('raise ImportError("not the installed localkg")\n')
    monkeypatch.chdir(here)
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["eval", str(questions), "--db", str(db), "--reasoner", "embed-path",
                                       "--sample", "2", "--out", str(out), "--ray"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["n"] == 2


def test_a_node_that_cannot_import_localkg_is_told_so_not_about_the_store() -> None:
    from localkg.evaluation.ray_runner import node_problem

    config = EvalConfig(questions="q.txt", reasoner="embed-path", out="run", db="/shared/dbs/metaqa")
    message = node_problem("vm (127.0.0.1)", config, ModuleNotFoundError("No module named 'localkg.indexes'"))
    assert message.startswith("node vm (127.0.0.1) cannot import ") and "No module named 'localkg.indexes'" in message
    assert "needs localkg installed" in message and "store" not in message
    missing = node_problem("vm (127.0.0.1)", config, FileNotFoundError("no localkg database at /shared/dbs/metaqa"))
    assert "(store /shared/dbs/metaqa)" in missing and "same path" in missing
