"""Batches as columns (`ColumnBatch`): what the dump loaders' workers hand the writer. Parts of one
write that describe the same node must merge as `NodeAttributes.merge` does, each row keeping its
own key hash, and the writer must store the merged node once."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from localkg.store import KG
from localkg.store.batch import ColumnBatch, FactBatch, NodeAttributes
from localkg.store.keyset import hash_keys


def _parts() -> list[FactBatch]:
    first, second, third = FactBatch(), FactBatch(), FactBatch()
    first.add_fact("m.x", "film.director", "m.y")
    first.add_entity("m.x", name="X", explicit=True, aliases=["a"])
    second.add_fact("m.y", "film.director", "m.x")   # m.x bare here, m.y described
    second.add_entity("m.y", name="Y", explicit=True)
    second.add_literal("lit:1", "1999", "date")      # the same literal in two parts
    third.add_fact("m.z", "film.director", "m.x")
    third.add_entity("m.x", explicit=True, aliases=["b"], types=["film.director"])
    third.add_literal("lit:1", "1999", "date")
    return [first, second, third]


def test_distinct_nodes_merge_the_described_rows_and_keep_each_hash_on_its_row() -> None:
    parts = _parts()
    nodes, hashes = ColumnBatch.concat([p.columns() for p in parts]).distinct_nodes()
    ids = nodes.column("id").to_pylist()
    assert ids == ["m.y", "lit:1", "m.z", "m.x"]   # input order (Kùzu stores that order); merged nodes last
    assert np.array_equal(hashes, hash_keys(ids))
    rows = {row["id"]: row for row in nodes.to_pylist()}
    expected = NodeAttributes(name="X", explicit=True, aliases=["a"])
    expected.merge(NodeAttributes(explicit=True, aliases=["b"], types=["film.director"]))
    assert (rows["m.x"]["name"], rows["m.x"]["aliases"], rows["m.x"]["types"]) == (
        expected.name, expected.aliases, expected.types)
    assert rows["m.y"]["name"] == "Y" and rows["m.z"]["described"] is False
    assert (rows["lit:1"]["kind"], rows["lit:1"]["value"]) == ("literal", "1999")


def test_names_and_facts_come_with_their_hashes() -> None:
    columns = _parts()[0].columns()
    assert columns.names.to_pylist() == [{"from": "x", "to": "m.x", "how": "name"},
                                         {"from": "a", "to": "m.x", "how": "alias"}]
    assert np.array_equal(columns.name_hashes, hash_keys(["x\x1fm.x", "a\x1fm.x"]))
    assert np.array_equal(columns.label_hashes, hash_keys(["x", "a"]))
    assert np.array_equal(columns.fact_hashes, hash_keys(["m.x\x1ffilm.director\x1fm.y"]))


def test_a_write_of_several_parts_stores_each_node_once_with_the_merge(tmp_path: Path) -> None:
    with KG.create(tmp_path / "db") as kg:
        with kg.writer() as writer:
            counts = writer.write(ColumnBatch.concat([p.columns() for p in _parts()]))
            again = writer.write(ColumnBatch.concat([p.columns() for p in _parts()]))
        assert (counts.nodes_added, counts.facts_added) == (4, 3)
        assert (again.nodes_added, again.facts_added, again.duplicates) == (0, 0, 3)
        node = kg.node("m.x")
        assert node.name == "X" and sorted(node.aliases) == ["a", "b"] and node.types == ("film.director",)
        assert kg.stats().labels == 4   # x, a, b (aliases of m.x) and y
        assert sorted((r.direction, r.count) for r in kg.relations("m.x")) == [("in", 2), ("out", 1)]
