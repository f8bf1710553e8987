"""Fault injection for appending and resumed dump loads: a generated Freebase dump is loaded whole,
or split and appended, while the loading process kills itself (SIGKILL, a named crash point:
localkg/store/crashpoints.py) at one stage (parse, checkpoint, staging, each flush step and piece,
the end-of-load passes). The next run (``--resume``) must open the store, finish, and hold exactly
the nodes and facts of one clean load. Small chunks, flushes and update ranges put every stage
inside a dump of 23k lines."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from localkg.store.crashpoints import ENV as CRASH_ENV

REPO = Path(__file__).resolve().parents[1]
POOL = 64 << 20
CHILD = f"""
import sys
import localkg.store.writer as writer
from localkg.store import KG, schema
from localkg.loaders.freebase import load_freebase

writer.POOL_BYTES_PER_FLUSHED_ROW = {POOL} // 6_000  # a flush every 6,000 staged rows
writer.POOL_BYTES_PER_UPDATED_NUMBER = {POOL} // 2_000  # end-of-load passes in ranges of 2,000 nodes
schema.HUB_DEGREE = 100  # the dump's hub, and a few more, become hubs
db, mode, *paths = sys.argv[1:]
with KG.open(db, create=True, buffer_pool_bytes={POOL}) as kg:
    load_freebase(kg, paths, resume=mode == "resume", workers=0, progress=False, chunk_bytes=64 << 10,
                  batch_bytes=256 << 10)
"""


def load(db: Path, paths: list[Path], resume: bool = False, crash_at: str | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash_at:
        env[CRASH_ENV] = crash_at
    done = subprocess.run([sys.executable, "-c", CHILD, str(db), "resume" if resume else "load", *map(str, paths)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, -9), done.stderr[-3000:]
    return done.returncode


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory, dumps) -> Path:
    path = tmp_path_factory.mktemp("faults") / "fb.nt"
    dumps.make_dump(path, "freebase", 2_500, "--seed", "7", "--hub-edges", "300")
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, dump: Path, dumps) -> dict:
    db = tmp_path_factory.mktemp("reference") / "db"
    assert load(db, [dump]) == 0
    return dumps.contents(db)


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
