"""The writer's hash sets under ``DB/keys/``: what the store and its staged batches hold, by key.

One :class:`~localkg.store.keyset.KeySet` per kind of key (:data:`KEYSETS`): node ids (each with
its sequence number), facts, labels and name links. A staged batch adds its keys to the sets
right after it is staged, so a process that dies in between leaves sets that count fewer keys
than the database and the staged batches hold; the next writer sees the counts disagree and
rebuilds the sets from both (:func:`rebuild_key_sets`). So it does for sets hashed by another
function than today's (``keyset.HASH_FUNCTION``: a store written before it).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from localkg.store import schema
from localkg.store.batch import SEP
from localkg.store.keyset import HASH_FUNCTION, KeySet, hash_function_of, hash_keys

if TYPE_CHECKING:
    from localkg.store.kg import KG

KEYSETS = ("nodes", "facts", "labels", "names")
_REBUILD_RANGE = 200_000
_STORED_KEYS = {  # each set's keys in the database: a query, and the node table whose offsets range it (or None)
    "nodes": ("MATCH (n:Node) RETURN n.id, n.seq", None),
    "facts": ("MATCH (a:Node)-[f:Fact]->(b:Node) WHERE offset(id(a)) >= $low AND offset(id(a)) < $high "
              "RETURN a.id, f.rel, b.id", "Node"),
    "labels": ("MATCH (l:Label) RETURN l.id", None),
    "names": ("MATCH (l:Label)-[:Names]->(n:Node) WHERE offset(id(l)) >= $low AND offset(id(l)) < $high "
              "RETURN l.id, n.id", "Label"),
}
_STAGED_KEYS = {"nodes": ("Node", ["id"]), "facts": ("Fact", ["from", "rel", "to"]),
                "labels": ("Label", ["id"]), "names": ("Names", ["from", "to"])}  # staged file, key columns

KeySets = dict[str, KeySet]


def open_key_sets(store: Path) -> KeySets:
    """The hash sets of the store at ``store``; the node set maps each node to its sequence number."""
    return {name: KeySet(store / schema.KEYS_DIR / name, with_values=name == "nodes") for name in KEYSETS}


def outdated_key_sets(store: Path) -> list[str]:
    """The hash sets of the store at ``store`` whose keys another function hashed (a store an
    earlier localkg wrote): its next writer rebuilds them from the database (:func:`keys_agree`)."""
    return [name for name in KEYSETS if (directory := store / schema.KEYS_DIR / name).is_dir()
            and any(directory.glob("run-*.npy")) and hash_function_of(directory) != HASH_FUNCTION]


def key_set_sizes(store: Path) -> dict[str, int]:
    """How many keys each hash set of the store at ``store`` holds."""
    return {name: len(keys) for name, keys in open_key_sets(store).items()}


def keys_agree(keys: KeySets, expected: dict[str, int]) -> bool:
    """Whether the sets count the ``expected`` keys, were hashed by today's function, and the node
    set has its sequence numbers."""
    return (all(len(keys[name]) == expected[name] and keys[name].hashed_by == HASH_FUNCTION for name in KEYSETS)
            and keys["nodes"].has_values)


def rebuild_key_sets(kg: "KG", keys: KeySets, batches: list[Path]) -> None:
    """Recompute every hash set from the database and the staged ``batches`` (after a crash
    between staging a batch and saving the sets, on a set written before nodes had sequence
    numbers, or on one hashed by an earlier function).

    The joins (facts, name links) are read in ranges of their first node's offset: one query
    over every fact needed more than a 256 MiB buffer pool on an 8M-line Freebase load, a
    range of :data:`_REBUILD_RANGE` nodes does not.
    """
    for name, (query, ranged_by) in _STORED_KEYS.items():
        keyset = keys[name]
        keyset.clear()
        if ranged_by is None:
            ranges = [None]
        else:
            size = kg.rows(f"MATCH (x:{ranged_by}) RETURN count(*)")[0][0]
            ranges = [{"low": low, "high": low + _REBUILD_RANGE} for low in range(0, size, _REBUILD_RANGE)]
        for parameters in ranges:
            result = kg.execute(query, parameters)
            while result.has_next():
                rows = [result.get_next() for _ in range(100_000) if result.has_next()]
                if keyset.with_values:  # (id, seq) rows
                    keyset.add(hash_keys(row[0] for row in rows), np.array([row[1] for row in rows]))
                else:
                    keyset.add(hash_keys(SEP.join(row) for row in rows))
        table, columns = _STAGED_KEYS[name]
        for batch in batches:
            path = batch / f"{table}.parquet"
            if path.exists():
                staged = pq.read_table(path, columns=columns + (["seq"] if keyset.with_values else []))
                joined = (staged.column(columns[0]) if len(columns) == 1 else
                          pc.binary_join_element_wise(*(staged.column(c) for c in columns), SEP))
                hashes = hash_keys(joined)
                fresh = ~keyset.contains(hashes)  # a flush cut off between its steps stored some
                keyset.add(hashes[fresh], staged.column("seq").to_numpy()[fresh] if keyset.with_values else None)
        keyset.compact()
