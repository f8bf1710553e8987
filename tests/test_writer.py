"""The bulk write path (`GraphWriter`) on a real Kùzu database: updates of stored nodes,
and what a failing statement inside a write leaves behind."""
from __future__ import annotations

from pathlib import Path

import pytest

from localkg.store import KG
from localkg.store.batch import FactBatch


def _batch(*facts: tuple[str, str, str], **aliases: list[str]) -> FactBatch:
    batch = FactBatch()
    for head, relation, tail in facts:
        batch.add_fact(head, relation, tail)
    for node_id, names in aliases.items():
        batch.add_entity(node_id, explicit=True, aliases=names, types=[f"type.{len(names)}"])
    return batch


def _record_statements(kg: KG, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement ``kg`` runs from now on: all go through ``execute`` (``rows``, which the
    store's own queries and the writer's updates take, included)."""
    statements: list[str] = []
    original = kg.execute
    monkeypatch.setattr(kg, "execute", lambda query, parameters=None: (
        statements.append(query), original(query, parameters))[1])
    return statements


def test_aliases_added_over_several_writes_are_applied_when_the_writer_closes(tmp_path: Path) -> None:
    """m1 is stored by a first flush; each later write adds an alias to it, saved as a pending
    update at each flush and applied when the writer closes."""
    with KG.create(tmp_path / "db") as kg:
        with kg.writer() as writer:
            writer.write(_batch(("m1", "r", "m2")))
            writer.flush()
            for round_number in range(3):
                writer.write(_batch(("m1", "r", f"x{round_number}"), m1=[f"alias {round_number}"]))
                writer.flush()
            assert len(list((kg.path / "pending").glob("*/*.parquet"))) == 3
            assert kg.node("m1").aliases == ()
        assert not any((kg.path / "pending").iterdir())
        node = kg.node("m1")
        assert sorted(node.aliases) == ["alias 0", "alias 1", "alias 2"] and node.types == ("type.1",)
        assert kg.node("m2").aliases == ()  # no other row took m1's lists


def test_updates_of_nodes_staged_in_the_same_flush_are_folded_into_the_copied_rows(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """m2 is staged bare (an object), then named and aliased by later writes of the same flush:
    it is copied once with all of it, with no update statement and no pending file."""
    with KG.create(tmp_path / "db") as kg:
        statements = _record_statements(kg, monkeypatch)
        with kg.writer() as writer:
            writer.write(_batch(("m1", "r", "m2")))
            first = _batch(("m2", "r", "m3"), m2=["alias a"])
            first.add_entity("m2", name="Second", explicit=True)
            writer.write(first)
            renamed = _batch(("m2", "r", "m4"), m2=["alias b"])
            renamed.add_entity("m2", name="Renamed", explicit=True)
            writer.write(renamed)
            writer.write(_batch(("m2", "r", "m5"), m2=["alias a"]))  # no name: the last one given stays
        assert not any("SET n.name" in s or "n.aliases" in s for s in statements)
        node = kg.node("m2")
        assert node.name == "Renamed" and list(node.aliases) == ["alias a", "alias b"]
        assert node.types == ("type.1",) and kg.stats().facts == 4


def test_a_failing_statement_raises_its_own_error_and_rolls_the_write_back(tmp_path: Path) -> None:
    """Kùzu rolls back by itself when a statement fails; the writer must then not hide the error
    behind "No active transaction for ROLLBACK", and the database must stay usable."""
    with KG.create(tmp_path / "db") as kg:
        with kg.writer() as writer:
            writer.write(_batch(("m1", "r", "m2")))
            with pytest.raises(RuntimeError) as failure:
                with kg.transaction():
                    kg.execute("CREATE (:Node {id: 'm3', kind: 'entity'})")
                    kg.execute("MATCH (n:Nowhere) RETURN n")
            assert "No active transaction" not in str(failure.value)
            writer.write(_batch(("m2", "r", "m4")))
        assert not kg.has_node("m3") and kg.has_node("m4") and kg.stats().facts == 2


def test_key_sets_rebuilt_range_by_range_match_the_database(tmp_path: Path, monkeypatch) -> None:
    """Lost hash sets are rebuilt from the database in ranges of nodes (one query over every fact
    ran out of a small buffer pool at scale); every range must be read, so nothing is added twice."""
    import shutil

    import localkg.store.dedupe as dedupe_module
    from localkg.store.flush import database_counts

    facts = [(f"h{i}", f"r{i % 3}", f"t{i % 4}") for i in range(12)]
    with KG.create(tmp_path / "db") as kg:
        with kg.writer() as writer:
            writer.write(_batch(*facts, h0=["first head"]))
        shutil.rmtree(kg.path / "keys")
        monkeypatch.setattr(dedupe_module, "_REBUILD_RANGE", 2)
        with kg.writer() as writer:
            counts = database_counts(kg)
            assert {name: len(keys) for name, keys in writer.keys.items()} == {name: counts[name] for name in writer.keys}
            again = writer.write(_batch(*facts, h0=["first head"]))
        assert (again.facts_added, again.duplicates, again.nodes_added) == (0, 12, 0)
        assert kg.stats().facts == 12


def _numbered_graph(count: int) -> list[FactBatch]:
    """A flush's worth of bare nodes n0..n{count-1}, then a batch that names every other one."""
    stored = FactBatch()
    for i in range(count):
        stored.add_fact("hub", "r", f"n{i}")
    named = FactBatch()
    for i in range(0, count, 2):
        named.add_entity(f"n{i}", name=f"node {i}", explicit=True, aliases=[f"n-{i}"], types=["t"])
    return [stored, named]


def test_updates_of_stored_nodes_are_applied_a_sequence_range_at_a_time(tmp_path: Path, monkeypatch) -> None:
    """Each range of sequence numbers is matched within its range (a match on the id alone scans
    every node) in a transaction of its own, and every update lands on its own node."""
    with KG.create(tmp_path / "db") as kg:
        statements = _record_statements(kg, monkeypatch)
        stored, named = _numbered_graph(20)
        with kg.writer() as writer:
            writer.update_span = 4
            writer.write(stored)
            writer.flush()
            writer.write(named)
        updates = [query for query in statements if query.startswith("LOAD") and "n.seq >= $low" in query]
        assert len(updates) == 5  # hub is number 0 and n{i} i + 1: the named n0, n2, ..., n18 are 1, 3, ..., 19
        for i in range(20):
            node = kg.node(f"n{i}")
            assert (node.name, node.aliases) == ((f"node {i}", (f"n-{i}",)) if i % 2 == 0 else ("", ()))
        assert not any((kg.path / "pending").iterdir())


def test_an_update_that_misses_its_node_stops_with_a_clear_error_and_stays_pending(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    from localkg.errors import LoadError

    stored, named = _numbered_graph(4)
    with KG.create(tmp_path / "db") as kg:
        writer = kg.writer()
        writer.write(stored)
        writer.flush()
        writer.write(named)
        kg.execute("MATCH (n:Node {id: 'n2'}) SET n.seq = 10000000")
        with pytest.raises(LoadError, match="1 of 2 saved node updates name nodes"):
            writer.close()
        assert len(list((kg.path / "pending").glob("*/*.parquet"))) == 1
        assert kg.node("n0").name == ""  # the range was rolled back whole


def test_a_writer_killed_while_applying_updates_leaves_them_to_the_next_one(tmp_path: Path) -> None:
    """Killed after the first range of updates committed: the next writer applies every range
    (the first again, which changes nothing), and the graph is the uninterrupted one."""
    import subprocess
    import sys

    code = f"""
import os, shutil, signal
import localkg.store.updates as updates_module
from localkg.store import KG
from tests.test_writer import _numbered_graph

updates_module.PENDING_SPAN = 4
remove = shutil.rmtree
def remove_or_die(path, *args, **kwargs):
    if path.parent.name == "pending":
        os.kill(os.getpid(), signal.SIGKILL)
    remove(path, *args, **kwargs)
shutil.rmtree = remove_or_die
stored, named = _numbered_graph(20)
with KG.create({str(tmp_path / "killed")!r}) as kg:
    with kg.writer() as writer:
        writer.write(stored)
        writer.flush()
        writer.write(named)
raise SystemExit("not killed")
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True)
    assert done.returncode == -9, done.stderr
    graphs = []
    for name in ("killed", "whole"):
        with KG.open(tmp_path / name, create=True) as kg:
            with kg.writer() as writer:
                if name == "whole":
                    stored, named = _numbered_graph(20)
                    writer.write(stored)
                    writer.flush()
                    writer.write(named)
                else:
                    assert len(list((kg.path / "pending").iterdir())) == 5
            graphs.append(sorted(kg.execute("MATCH (n:Node) RETURN n.id, n.name, n.aliases, n.types").get_all()))
            assert not any((kg.path / "pending").iterdir())
    assert graphs[0] == graphs[1]
