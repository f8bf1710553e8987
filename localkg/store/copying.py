"""Rows into Kùzu: Parquet files named as Cypher literals, and ``COPY`` into keyed tables in pieces.

Kùzu takes the files of ``COPY`` and ``LOAD FROM`` only as string literals, so every write of
rows goes through a Parquet file: a staged batch's own (``staging.py``), or a transient one under
``DB/staging/`` (:func:`scratch_file`). Rows reach Kùzu as Arrow or Parquet, never pandas: pandas
string columns crash kuzu 0.11.3.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from localkg.store import schema
from localkg.store.crashpoints import crash_point

if TYPE_CHECKING:
    from localkg.store.kg import KG

KEYED_PIECE_MIN = 256


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write rows for Kùzu; without dictionary encoding, which costs a third of the write and
    saves little here (ids and names are mostly distinct)."""
    pq.write_table(table, path, use_dictionary=False)


def path_literal(path: Path) -> str:
    r"""``path`` as a Cypher string literal: Kùzu takes the files of ``COPY`` and ``LOAD FROM`` only
    as literals (a parameter must be a data frame), and a store may live under any directory name.

    >>> print(path_literal(Path("/data/it's\\here/Node.parquet")))
    '/data/it\'s\\here/Node.parquet'
    """
    return "'" + str(path).replace("\\", "\\\\").replace("'", "\\'") + "'"


def scratch_file(store: Path, name: str, table: pa.Table | dict[str, pa.Array | list]) -> str:
    """Write rows to the transient ``DB/staging/<name>.parquet`` of the store at ``store``; return
    its path as a Cypher string literal."""
    staging = store / schema.STAGING_DIR
    staging.mkdir(parents=True, exist_ok=True)
    path = staging / f"{name}.parquet"
    write_parquet(table if isinstance(table, pa.Table) else pa.table(table), path)
    return path_literal(path)


def copy_files(kg: "KG", table: str, files: list[Path]) -> None:
    """One ``COPY`` of every file that exists among ``files`` into ``table`` (none: nothing)."""
    literals = [path_literal(path) for path in files if path.exists()]
    if literals:
        kg.execute(f"COPY {table} FROM [{', '.join(literals)}]")


def keyed_pieces(held: int, rows: int) -> list[tuple[int, int]]:
    """The pieces ``[start, stop)`` in which ``rows`` new rows go into a table with a primary key
    that holds ``held``: all at once into an empty table (Kùzu builds its hash index whole), else
    each piece at most a quarter of what the table holds by then, and at least
    :data:`KEYED_PIECE_MIN` rows.

    Why: kuzu 0.11.3 loses keys from a primary-key index when one checkpoint more than doubles
    one of the index's 256 hash partitions (its slot split splits again a slot it made in the same
    call and drops entries moved there). A lost key's node is in the table but not found by its
    ``id``, so the next ``COPY`` of facts naming it fails, every retry too: appending 115k Freebase
    nodes to 88k lost one; in quarters, none (docs/loading.md, "Appending"). A quarter keeps every
    partition far from doubling; a piece of 256 rows adds about one key to each partition.

    >>> keyed_pieces(0, 5000)
    [(0, 5000)]
    >>> keyed_pieces(1000, 1000)
    [(0, 256), (256, 570), (570, 962), (962, 1000)]
    """
    if held == 0:
        return [(0, rows)] if rows else []
    pieces, start = [], 0
    while start < rows:
        stop = min(rows, start + max(KEYED_PIECE_MIN, (held + start) // 4))
        pieces.append((start, stop))
        start = stop
    return pieces


def append_keyed(kg: "KG", table: str, rows: pa.Table | None, held: int, copied: int) -> None:
    """Copy ``rows`` into a node table (a table with a primary key) that holds ``held`` rows,
    skipping the first ``copied``, which an interrupted flush already copied (the rows are
    rebuilt in the same order), in the pieces of :func:`keyed_pieces`, each its own transaction
    followed by a checkpoint, which is when Kùzu merges a piece's keys into the table's hash index."""
    if rows is None or copied >= rows.num_rows:
        return
    for start, stop in keyed_pieces(held, rows.num_rows - copied):
        with kg.transaction():
            kg.execute(f"COPY {table} FROM {scratch_file(kg.path, table, rows.slice(copied + start, stop - start))}")
            crash_point(f"copying {table}")
        kg.execute("CHECKPOINT")
        crash_point(f"copied a piece of {table}")
