"""Staged writes (`GraphWriter`): batches wait on disk and reach Kùzu at a flush, one transaction per
table. A process killed at each step between staging and the flush's cleanup, between the flush's
transactions included, leaves a database whose next writer ends with
exactly the graph of an uninterrupted write: nothing lost, nothing copied twice."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localkg.store import KG
from localkg.store.batch import FactBatch
from localkg.store.crashpoints import ENV as CRASH_ENV
from localkg.store.flush import database_counts
from localkg.store.staging import staged_batches

FACTS = [(f"h{i}", f"r{i % 3}", f"t{i % 5}") for i in range(40)]


def _batch(facts: list[tuple[str, str, str]]) -> FactBatch:
    batch = FactBatch()
    for head, relation, tail in facts:
        batch.add_fact(head, relation, tail)
        batch.add_entity(head, name=f"name of {head}", explicit=True, aliases=[f"alias of {head}"])
    return batch


def _graph(kg: KG) -> tuple:
    facts = sorted(kg.execute("MATCH (a:Node)-[f:Fact]->(b:Node) RETURN a.id, f.rel, b.id").get_all())
    nodes = sorted(kg.execute("MATCH (n:Node) RETURN n.id, n.name, n.aliases").get_all())
    summary = {node[0]: kg.relations(node[0]) for node in nodes}
    counts = sorted(kg.execute("MATCH (r:Relation) RETURN r.id, r.facts").get_all())
    return facts, nodes, summary, counts, kg.stats()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    with KG.create(tmp_path_factory.mktemp("ref") / "db") as kg:
        with kg.writer() as writer:
            writer.write(_batch(FACTS[:20]))
            writer.write(_batch(FACTS[20:]))
        return _graph(kg)


KILL_POINTS = {  # what the tests call each point: the writer's crash point (localkg/store/crashpoints.py)
    "before saving the keys": "staged:2",  # the second batch is staged, its keys are not saved
    "inside the flush, before its first commit": "copying Node",
    "between the flush's steps (nodes, labels and names committed)": "flushed names",
    "inside the flush's fact step, before its commit": "copying Fact",
    "after the flush committed": "batch dropped",  # dies removing the first flushed batch
}


def _killed_at(db: Path, point: str) -> None:
    """Write the two batches in a child process that kills itself (SIGKILL) at ``point``."""
    code = f"""
from localkg.store import KG
from tests.test_writer_staging import FACTS, _batch

kg = KG.create({str(db)!r})
writer = kg.writer()
writer.write(_batch(FACTS[:20]))
writer.write(_batch(FACTS[20:]))
writer.flush()
raise SystemExit("not killed")
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1],
                          env={**os.environ, CRASH_ENV: KILL_POINTS[point]}, capture_output=True, text=True)
    assert done.returncode == -9, done.stderr


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_writer_killed_while_staging_or_flushing_loses_and_duplicates_nothing(
        tmp_path: Path, reference: tuple, point: str) -> None:
    db = tmp_path / "db"
    _killed_at(db, point)
    with KG.open(db) as kg:
        with kg.writer() as writer:  # opening recovers and flushes what was staged
            assert not staged_batches(kg.path)
            for part in (FACTS[:20], FACTS[20:]):  # both batches were staged before each kill
                again = writer.write(_batch(part))
                assert again.facts_added == 0 and again.nodes_added == 0
        assert _graph(kg) == reference


def test_hash_sets_lost_after_a_flush_cut_off_between_its_steps_are_rebuilt_without_repeats(
        tmp_path: Path, reference: tuple) -> None:
    """The rebuild reads the database and the staged batches; after a partial flush some staged rows
    are in both, and each must count once, or the sets disagree with the flush's counts."""
    import shutil

    db = tmp_path / "db"
    _killed_at(db, "between the flush's steps (nodes, labels and names committed)")
    shutil.rmtree(db / "keys")
    with KG.open(db) as kg:
        with kg.writer() as writer:
            assert not staged_batches(kg.path)
            counts = database_counts(kg)
            assert {name: len(keys) for name, keys in writer.keys.items()} == {name: counts[name] for name in writer.keys}
            again = writer.write(_batch(FACTS))
            assert again.facts_added == 0 and again.nodes_added == 0
        assert _graph(kg) == reference


def test_writes_reach_the_database_at_each_flush_of_flush_rows(tmp_path: Path, reference: tuple) -> None:
    with KG.create(tmp_path / "db") as kg:
        with kg.writer(flush_rows=30) as writer:
            writer.write(_batch(FACTS[:10]))  # 10 facts + 15 nodes staged: below 30
            assert kg.stats().facts == 0 and len(staged_batches(kg.path)) == 1
            database = kg._database
            writer.write(_batch(FACTS[10:20]))  # past 30: both batches are flushed together
            assert kg.stats().facts == 20 and not staged_batches(kg.path)
            assert kg._database is not database  # reopened after the flush, to free Kùzu's memory
            writer.write(_batch(FACTS[20:]))
        assert _graph(kg) == reference


def test_a_flush_that_overflows_the_buffer_pool_stays_staged_for_the_next_writer(tmp_path: Path) -> None:
    """A flush that does not fit the pool is rolled back and says so as a LocalKGError with the
    way out, to a program that writes through ``KG.writer()`` as to the CLI; the writer then
    refuses to flush again (kuzu 0.11.3 aborts the process on a second rollback on one
    connection) and closes without trying, and a writer with a larger pool flushes the staged
    writes when it opens."""
    from localkg.errors import BufferPoolFullError, LoadError

    facts = [(f"m.{i}", f"r{i % 50}", f"m.{i * 7 % 40_000}") for i in range(60_000)]
    db = tmp_path / "db"
    with KG.create(db, buffer_pool_bytes=10 << 20) as kg:
        with kg.writer(flush_rows=10**9) as writer:
            writer.write(_batch(facts))
            with pytest.raises(BufferPoolFullError, match="buffer pool is too small for this write; open the "
                                                          "store with a larger buffer pool and write again"):
                writer.flush()
            with pytest.raises(LoadError, match="an earlier flush of this writer failed"):
                writer.flush()
    with KG.open(db, buffer_pool_bytes=256 << 20) as kg:
        assert kg.stats().facts == 0  # (not asked on the full pool: even a count may not fit there)
        with kg.writer():
            pass
        assert kg.stats().facts == len(facts)
