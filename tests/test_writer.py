"""The bulk write path (`GraphWriter`) on a real Kùzu database: list additions to stored nodes,
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


def test_aliases_added_over_several_writes_are_applied_file_by_file(tmp_path: Path) -> None:
    """m1 is stored by a first flush; each later write adds an alias to it, saved as a pending
    file at the next flush and applied in its own transaction."""
    with KG.create(tmp_path / "db") as kg:
        with kg.writer() as writer:
            writer.write(_batch(("m1", "r", "m2")))
            writer.flush()
            for round_number in range(3):
                writer.write(_batch(("m1", "r", f"x{round_number}"), m1=[f"alias {round_number}"]))
        assert not list((kg.path / "pending").glob("*.parquet"))
        node = kg.node("m1")
        assert sorted(node.aliases) == ["alias 0", "alias 1", "alias 2"] and node.types == ("type.1",)
        assert kg.node("m2").aliases == ()  # no other row took m1's lists


def test_updates_of_nodes_staged_in_the_same_flush_are_folded_into_the_copied_rows(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """m2 is staged bare (an object), then named and aliased by later writes of the same flush:
    it is copied once with all of it, with no update statement and no pending file."""
    statements: list[str] = []
    with KG.create(tmp_path / "db") as kg:
        execute = kg.execute
        monkeypatch.setattr(kg, "execute", lambda query, parameters=None: (statements.append(query),
                                                                          execute(query, parameters))[1])
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
                with writer._transaction():
                    kg.execute("CREATE (:Node {id: 'm3', kind: 'entity'})")
                    kg.execute("MATCH (n:Nowhere) RETURN n")
            assert "No active transaction" not in str(failure.value)
            writer.write(_batch(("m2", "r", "m4")))
        assert not kg.has_node("m3") and kg.has_node("m4") and kg.stats().facts == 2


def test_key_sets_rebuilt_range_by_range_match_the_database(tmp_path: Path, monkeypatch) -> None:
    """Lost hash sets are rebuilt from the database in ranges of nodes (one query over every fact
    ran out of a small buffer pool at scale); every range must be read, so nothing is added twice."""
    import shutil

    import localkg.store.writer as writer_module

    facts = [(f"h{i}", f"r{i % 3}", f"t{i % 4}") for i in range(12)]
    with KG.create(tmp_path / "db") as kg:
        with kg.writer() as writer:
            writer.write(_batch(*facts, h0=["first head"]))
        shutil.rmtree(kg.path / "keys")
        monkeypatch.setattr(writer_module, "_REBUILD_RANGE", 2)
        with kg.writer() as writer:
            assert {name: len(keys) for name, keys in writer.keys.items()} == writer._database_counts()
            again = writer.write(_batch(*facts, h0=["first head"]))
        assert (again.facts_added, again.duplicates, again.nodes_added) == (0, 12, 0)
        assert kg.stats().facts == 12
