"""Fault injection for appending and resumed dump loads: a generated Freebase dump is loaded whole,
or split and appended, while the loading process kills itself (SIGKILL, a named crash point:
localkg/store/crashpoints.py) at one stage (parse, checkpoint, staging, each flush step and piece,
the end-of-load passes). The next run (``--resume``) must open the store, finish, and hold exactly
the nodes and facts of one clean load. Small chunks, flushes and update ranges put every stage
inside a dump of 23k lines."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localkg.store.crashpoints import ENV as CRASH_ENV

REPO = Path(__file__).resolve().parents[1]
POOL = 64 << 20
CHILD = f"""
import json
import sys
import localkg.store.pool as pool
from localkg.store import KG, schema
from localkg.loaders.freebase import load_freebase

pool.POOL_BYTES_PER_FLUSHED_ROW = {POOL} // 6_000  # a flush every 6,000 staged rows
pool.POOL_BYTES_PER_UPDATED_NUMBER = {POOL} // 2_000  # end-of-load passes in ranges of 2,000 nodes
schema.HUB_DEGREE = 100  # the dump's hub, and a few more, become hubs
db, mode, *paths = sys.argv[1:]
with KG.open(db, create=True, buffer_pool_bytes={POOL}) as kg:
    report = load_freebase(kg, paths, resume=mode == "resume", workers=0, progress=False, chunk_bytes=64 << 10,
                           batch_bytes=256 << 10)
print(json.dumps(report.to_json()))
"""


def run_load(db: Path, paths: list[Path], resume: bool = False,
             crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash_at:
        env[CRASH_ENV] = crash_at
    done = subprocess.run([sys.executable, "-c", CHILD, str(db), "resume" if resume else "load",
                           *map(str, paths)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, -9), done.stderr[-3000:]
    return done


def load(db: Path, paths: list[Path], resume: bool = False, crash_at: str | None = None) -> int:
    return run_load(db, paths, resume, crash_at).returncode


def report_of(done: subprocess.CompletedProcess) -> dict:
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory, dumps) -> Path:
    path = tmp_path_factory.mktemp("faults") / "fb.nt"
    dumps.make_dump(path, "freebase", 2_500, "--seed", "7", "--hub-edges", "300")
    return path


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory, dump: Path) -> tuple[Path, dict]:
    """A clean load of the dump: its store and its report."""
    db = tmp_path_factory.mktemp("reference") / "db"
    done = run_load(db, [dump])
    assert done.returncode == 0
    return db, report_of(done)


@pytest.fixture(scope="module")
def reference(reference_run: tuple[Path, dict], dumps) -> dict:
    return dumps.contents(reference_run[0])


STAGES = ["parsed:3", "checkpointed:2", "staged:4", "flush marked:1", "copying Relation:1", "copying Node:1",
          "copied a piece of Node:1", "flushed nodes:2", "copying Label:1", "flushed labels:1", "flushed names:1",
          "copying Fact:2", "flushed facts:1", "batch dropped:2",
          "applied updates in a range:1", "flagged hubs in a range:1", "marked cvt nodes in a range:2"]


@pytest.mark.parametrize("crash_at", STAGES)
def test_a_load_killed_at_a_stage_resumes_to_the_graph_of_one_clean_load(
        tmp_path: Path, dump: Path, reference: dict, dumps, crash_at: str) -> None:
    db = tmp_path / "db"
    assert load(db, [dump], crash_at=crash_at) == -9, f"the load never reached {crash_at}"
    assert load(db, [dump], resume=True) == 0
    assert dumps.contents(db) == reference


@pytest.mark.parametrize("split, crash_at", [(2_000, "flushed nodes:1"), (7_919, "copied a piece of Node:1"),
                                             (11_404, "flushed facts:1"), (11_404, "flushed summaries:1"),
                                             (11_404, "applied updates in a range:1"),
                                             (16_000, "copying Label:1"), (20_000, "marked cvt nodes in a range:1"),
                                             (11_404, None)])
def test_an_appending_load_killed_at_a_stage_resumes_to_the_graph_of_one_clean_load(
        tmp_path: Path, dump: Path, reference: dict, dumps, split: int, crash_at: str | None) -> None:
    first, rest = dumps.split_after(dump, split, tmp_path)
    db = tmp_path / "db"
    assert load(db, [first]) == 0
    if crash_at is not None:
        assert load(db, [rest], crash_at=crash_at) == -9, f"the load never reached {crash_at}"
    assert load(db, [rest], resume=crash_at is not None) == 0
    assert dumps.contents(db) == reference


COUNTED = ("lines_read", "facts_loaded", "duplicates", "nodes_added", "rejected")


@pytest.mark.parametrize("crash_at, resume", [("staged:4", True), ("flush marked:1", True), ("copying Fact:1", True),
                                              ("flushed nodes:2", True), ("checkpointed:2", True),
                                              ("copying Fact:1", False)])
def test_the_run_after_a_killed_load_reports_what_the_load_added(
        tmp_path: Path, dump: Path, reference_run: tuple[Path, dict], crash_at: str, resume: bool) -> None:
    """The run that finishes a killed load (with --resume or over again) reports the counts of one
    clean load: the batches the killed run staged, which the next writer sees into the store, are
    this load's facts and nodes, not duplicates (was: a rerun after a recovered flush reported
    facts_loaded: 0 for what that flush committed)."""
    db = tmp_path / "db"
    assert load(db, [dump], crash_at=crash_at) == -9, f"the load never reached {crash_at}"
    finished = report_of(run_load(db, [dump], resume=resume))
    assert {key: finished[key] for key in COUNTED} == {key: reference_run[1][key] for key in COUNTED}
