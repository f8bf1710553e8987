"""Updates of stored nodes: saved under ``DB/pending/`` at each flush, applied when the writer closes.

A dump often describes a node long after a line used it as an object. An update of a node staged
in the same flush is folded into the row copied (:func:`fold_updates`); one of a node an earlier
flush stored is the one write that is not a ``COPY``, and Kùzu makes it dear (matched by ``id``
it builds a hash table over every node, and it holds each node group it changes until a
checkpoint). So a flush saves such updates, one row per node, in a directory per range of
:data:`PENDING_SPAN` sequence numbers (:func:`save_pending_updates`), before it commits, so a
crash loses nothing and applying them twice changes nothing; the writer's close applies them a
range of sequence numbers at a time (:func:`apply_pending_updates`). docs/architecture.md has
the reasons and figures.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from localkg.errors import LoadError
from localkg.store import schema
from localkg.store.batch import merge_rows_by_id
from localkg.store.copying import scratch_file, write_parquet
from localkg.store.crashpoints import crash_point
from localkg.store.keyset import KeySet, hash_keys

if TYPE_CHECKING:
    from localkg.store.kg import KG

MERGED_SCALARS = ("name", "kind", "description")  # what a node update may change
MERGED_LISTS = ("aliases", "types")  # ... and what it may add to
PENDING_SPAN = 1 << 20  # sequence numbers per directory of pending updates


def has_pending_updates(store: Path) -> bool:
    """Whether updates of stored nodes saved by a flush of the store at ``store`` wait to be applied."""
    return any((store / schema.PENDING_DIR).glob("*/*.parquet"))


def fold_updates(nodes: pa.Table | None, changes: list[pa.Table]) -> tuple[pa.Table | None, pa.Table | None]:
    """The staged node rows ``nodes`` with the ``changes`` of staged nodes applied (in batch
    order), and the changes of stored nodes merged to one row per node (None when there are none)."""
    if not changes:
        return nodes, None
    changed = pa.concat_tables(changes, promote_options="default")
    for name in MERGED_LISTS:  # no list additions among the changes
        if name not in changed.column_names:
            changed = changed.append_column(name, pa.nulls(changed.num_rows, pa.list_(pa.string())))
    staged_ids = nodes.column("id") if nodes is not None else pa.array([], pa.string())
    to_staged = pc.is_in(changed.column("id"), value_set=staged_ids)
    if pc.any(to_staged).as_py():
        affected = pc.is_in(staged_ids, value_set=changed.column("id"))
        base = nodes.filter(affected)
        merged = merge_rows_by_id(pa.concat_tables([base, changed.filter(to_staged)], promote_options="default"),
                                  MERGED_SCALARS, MERGED_LISTS)
        for name in merged.column_names[1:]:  # base has one row per id, in the merged order
            base = base.set_column(base.schema.get_field_index(name), name,
                                   merged.column(name).cast(base.schema.field(name).type))
        nodes = pa.concat_tables([nodes.filter(pc.invert(affected)), base])
    stored = changed.filter(pc.invert(to_staged))
    return nodes, merge_rows_by_id(stored, MERGED_SCALARS, MERGED_LISTS) if stored.num_rows else None


def save_pending_updates(store: Path, node_keys: KeySet, rows: pa.Table) -> None:
    """Save updates of stored nodes (one row per node) in the store at ``store``, split by range
    of sequence number, each file written under a temporary name first."""
    pending = store / schema.PENDING_DIR
    ranges = sequence_numbers(node_keys, rows.column("id")) // PENDING_SPAN
    existing = [int(path.stem) for path in pending.glob("*/*.parquet") if path.stem.isdigit()]
    name = f"{max(existing, default=-1) + 1:08d}.parquet"
    for number in np.unique(ranges):
        directory = pending / f"{number * PENDING_SPAN:012d}-{(number + 1) * PENDING_SPAN:012d}"
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / (name + ".part")
        write_parquet(rows.filter(pa.array(ranges == number)), tmp)
        tmp.replace(directory / name)


def apply_pending_updates(kg: "KG", node_keys: KeySet, update_span: int) -> None:
    """Apply the saved updates of stored nodes, ``update_span`` sequence numbers at a time, each
    range in its own transaction followed by a checkpoint.

    A directory's files are merged per node in the order they were saved, and removed once all
    its ranges have committed. Raises :class:`LoadError` when a saved node is missing from its
    range (that range is rolled back and the files stay).
    """
    pending = kg.path / schema.PENDING_DIR
    directories = sorted(path for path in pending.iterdir() if path.is_dir()) if pending.is_dir() else []
    if not directories:
        return
    kg.execute("CHECKPOINT")  # list SETs never follow an unchecked COPY
    for directory in directories:
        files = sorted(directory.glob("*.parquet"))
        if files:
            rows = merge_rows_by_id(pa.concat_tables([pq.read_table(path) for path in files]),
                                    MERGED_SCALARS, MERGED_LISTS)
            pieces = sequence_numbers(node_keys, rows.column("id")) // update_span
            for piece in np.unique(pieces):
                _apply_range(kg, rows.filter(pa.array(pieces == piece)), int(piece) * update_span,
                             (int(piece) + 1) * update_span)
        shutil.rmtree(directory)


def _apply_range(kg: "KG", rows: pa.Table, low: int, high: int) -> None:
    """Set the changes of ``rows`` on their nodes, whose sequence numbers lie in [low, high)."""
    path = scratch_file(kg.path, "NodeChanges", rows)
    with kg.transaction():
        matched = kg.rows(
            f"LOAD FROM {path} MATCH (n:Node) WHERE n.seq >= $low AND n.seq < $high AND n.id = id SET "
            "n.name = CASE WHEN name = '' THEN n.name ELSE name END, "
            "n.kind = CASE WHEN kind = '' THEN n.kind ELSE kind END, "
            "n.description = CASE WHEN description = '' THEN n.description ELSE description END, "
            "n.aliases = list_distinct(list_concat(coalesce(n.aliases, []), aliases)), "
            "n.types = list_distinct(list_concat(coalesce(n.types, []), types)) RETURN count(*)",
            {"low": low, "high": high})[0][0]
        if matched != rows.num_rows:
            raise LoadError(f"{rows.num_rows - matched} of {rows.num_rows} saved node updates name nodes "
                            f"that are not stored with their sequence number in [{low}, {high})")
    kg.execute("CHECKPOINT")
    crash_point("applied updates in a range")


def sequence_numbers(node_keys: KeySet, ids: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The sequence numbers of stored or staged nodes (from the node hash set)."""
    seq = node_keys.lookup(hash_keys(ids))
    if (seq < 0).any():
        raise LoadError(f"{int((seq < 0).sum())} updated nodes are neither staged nor stored")
    return seq
