"""Resuming dump loads: a load killed (SIGKILL) or interrupted (Ctrl-C) mid-way and resumed ends
with exactly the graph of an uninterrupted load; a checkpoint older than the last commit (a crash
between commit and checkpoint) duplicates nothing; a checkpoint of another load is refused."""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localkg.errors import LoadError, ResumeError
from localkg.loaders.freebase import load_freebase
from localkg.store import KG

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MAKE_DUMP = SHARED / "tools" / "make_dump.py"
CHUNK = 1 << 20


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About ten 1 MB chunks: the load is still running when the tests kill or interrupt it after
    the first checkpoint, and one flush does not fit a 10 MiB buffer pool."""
    path = tmp_path_factory.mktemp("dump") / "fb.nt.gz"
    subprocess.run([sys.executable, str(MAKE_DUMP), "freebase", "--entities", "10000", "--out", str(path)],
                   check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, dump: Path) -> dict:
    """The graph of an uninterrupted load."""
    with KG.create(tmp_path_factory.mktemp("ref") / "db") as kg:
        report = load_freebase(kg, [dump], workers=0, progress=False, chunk_bytes=CHUNK, batch_bytes=CHUNK)
        assert report.chunks >= 3
        return snapshot(kg)


def snapshot(kg: KG) -> dict:
    nodes = sorted((r.id, r.name, r.kind, tuple(sorted(r.aliases)), r.description, tuple(sorted(r.types)))
                   for batch in kg.iter_nodes(kinds=("entity", "cvt", "literal")) for r in batch)
    busiest = kg.execute("MATCH (n:Node)-[f:Fact]-() WITH n, count(f) AS degree "
                         "RETURN n.id ORDER BY degree DESC, n.id LIMIT 20").get_all()
    summary = {node: kg.relations(node) for (node,) in busiest}
    return {"stats": kg.stats(), "catalogue": kg.relation_catalogue(), "nodes": nodes, "summary": summary}


def start_cli(dump: Path, db: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from localkg.cli import main; main()", "load", "freebase",
                             str(dump), "--db", str(db), "--chunk-mb", "1", "--batch-mb", "1", "--workers", "0",
                             "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)


def _default_sigint() -> None:
    """A runner started in the background of a shell (as CI scripts can be) ignores SIGINT, the
    children inherit that, and Python then never raises KeyboardInterrupt: restore the default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_checkpoint(db: Path, process: subprocess.Popen, chunks: int = 1, timeout: float = 120) -> Path:
    path = db / "checkpoints" / "freebase.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            try:
                if json.loads(path.read_text())["position"]["chunk"] >= chunks:
                    return path
            except ValueError:
                pass  # being replaced right now
        assert process.poll() is None, "the load ended before it could be interrupted"
        time.sleep(0.05)
    raise AssertionError("no checkpoint appeared")


def test_killed_load_resumes_to_the_same_graph(tmp_path: Path, dump: Path, reference: dict) -> None:
    db = tmp_path / "db"
    process = start_cli(dump, db)
    checkpoint = wait_for_checkpoint(db, process)
    early = checkpoint.read_text()
    process.send_signal(signal.SIGKILL)
    process.wait()
    staged = [path for path in (db / "staged").iterdir() if path.name.isdigit()]
    assert staged  # what the killed load parsed waits on disk for the next writer
    with KG.open(db) as kg:
        assert kg.stats().facts < reference["stats"].facts
        report = load_freebase(kg, [dump], resume=True, workers=0, progress=False, chunk_bytes=CHUNK, batch_bytes=CHUNK)
        assert report.resumed and report.complete
        assert snapshot(kg) == reference
        complete = json.loads(checkpoint.read_text())["report"]
        assert complete["lines_read"] == report.lines_read  # every line counted once across both runs
    # A crash after commits whose checkpoints were never saved: the resume repeats those chunks,
    # and the writer's dedupe adds nothing twice.
    checkpoint.write_text(early)
    with KG.open(db) as kg:
        again = load_freebase(kg, [dump], resume=True, workers=0, progress=False, chunk_bytes=CHUNK, batch_bytes=CHUNK)
        assert again.complete and again.duplicates > 0
        assert snapshot(kg) == reference


def test_ctrl_c_stops_cleanly_and_resume_finishes(tmp_path: Path, dump: Path, reference: dict) -> None:
    db = tmp_path / "db"
    process = start_cli(dump, db)
    wait_for_checkpoint(db, process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    with KG.open(db) as kg:
        report = load_freebase(kg, [dump], resume=True, workers=0, progress=False, chunk_bytes=CHUNK, batch_bytes=CHUNK)
        assert report.complete and snapshot(kg) == reference
        finished = load_freebase(kg, [dump], resume=True, workers=0, progress=False)
        assert finished.complete and finished.lines_read == report.lines_read  # nothing left to do
        assert snapshot(kg) == reference


def test_resume_refuses_a_checkpoint_of_another_load(tmp_path: Path, dump: Path) -> None:
    small = tmp_path / "small.nt"
    small.write_bytes(b"<http://rdf.freebase.com/ns/m.01>\t<http://rdf.freebase.com/ns/a.b.c>\t"
                      b"<http://rdf.freebase.com/ns/m.02>\t.\n")
    with KG.create(tmp_path / "db") as kg:
        load_freebase(kg, [small], workers=0, progress=False)
        with pytest.raises(ResumeError, match="other options"):
            load_freebase(kg, [small], langs=["fr"], resume=True, workers=0, progress=False)
        with pytest.raises(ResumeError, match="it is for"):
            load_freebase(kg, [dump], resume=True, workers=0, progress=False)
        copy = tmp_path / "copy" / "small.nt"
        copy.parent.mkdir()
        shutil.copy(small, copy)
        report = load_freebase(kg, [copy], workers=0, progress=False)  # without --resume: starts over
        assert report.facts_loaded == 0 and report.duplicates == 1


def test_a_buffer_pool_too_small_stops_with_advice_and_resume_with_a_larger_one_finishes(
        tmp_path: Path, dump: Path, reference: dict) -> None:
    """10 MiB holds the new database's schema but not one flush of its staged writes (whose size
    follows the pool). Measured with kuzu 0.11.3 on this dump: the load fails with pools up to
    16 MiB and completes from 24 MiB, so 10 MiB is far from the edge. The failed flush is rolled
    back, its writes stay staged, and the resume adds exactly what was missing."""
    db = tmp_path / "db"
    with pytest.raises(LoadError, match="--resume and a larger --buffer-pool-mb"):
        with KG.create(db, buffer_pool_bytes=10 << 20) as kg:
            load_freebase(kg, [dump], workers=0, progress=False, chunk_bytes=CHUNK, batch_bytes=64 << 20)
    with KG.open(db, buffer_pool_bytes=256 << 20) as kg:
        report = load_freebase(kg, [dump], resume=True, workers=0, progress=False, chunk_bytes=CHUNK,
                               batch_bytes=64 << 20)
        assert report.complete and snapshot(kg) == reference
