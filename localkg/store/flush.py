"""The flush: every staged batch copied into Kùzu, one table per transaction, safe to cut off anywhere.

Kùzu's commit cost grows with the tables written into, so the staged batches are copied in few
large flushes with one ``COPY`` per table. Each table is copied in its own transaction with a
reopen after it (a relationship ``COPY`` holds memory per node until the database closes), and
keyed tables take rows in pieces (``copying.keyed_pieces``). Before its first step a flush
records in ``staged/flushing.json`` which batches it copies and the rows each table holds before
and after (:func:`flush_record`), and raises the manifest's :data:`UNFINISHED` flag, so the close's
passes (``closing.py``) are owed from its first commit on. A flush cut off between its steps is
finished by the next one, which copies only what the tables do not hold yet; ``recovery.py``
settles the record of one cut off before or after all of its steps.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from localkg.errors import LoadError
from localkg.store import schema
from localkg.store.copying import append_keyed, copy_files, scratch_file
from localkg.store.crashpoints import crash_point
from localkg.store.keyset import KeySet, write_atomically
from localkg.store.staging import expected_counts, read_staged
from localkg.store.updates import fold_updates, save_pending_updates

if TYPE_CHECKING:
    from localkg.store.kg import KG

UNFINISHED = "unfinished_writer"  # manifest flag: a writer flushed and has not yet closed (its close's passes owed)
FLUSH_MARKER = "flushing.json"
COUNTED = {  # what a flush's steps add to, counted in the database
    "nodes": "MATCH (n:Node) RETURN count(*)",
    "labels": "MATCH (l:Label) RETURN count(*)",
    "names": "MATCH ()-[x:Names]->() RETURN count(*)",
    "facts": "MATCH ()-[f:Fact]->() RETURN count(*)",
    "summaries": "MATCH ()-[s:HasRel]->() RETURN count(*)",
}


def database_counts(kg: "KG") -> dict[str, int]:
    """The rows each table holds, under the names of :data:`COUNTED` (and of the hash sets)."""
    return {name: kg.rows(query)[0][0] for name, query in COUNTED.items()}


def flush_marker(store: Path) -> Path:
    """Where a flush of the store at ``store`` records what it copies while it runs."""
    return store / schema.STAGED_DIR / FLUSH_MARKER


def flush_record(store: Path) -> dict | None:
    """The record of a flush that was cut off (its batches, and the counts before and after), if any."""
    marker = flush_marker(store)
    return json.loads(marker.read_text()) if marker.exists() else None


def flush_staged(kg: "KG", node_keys: KeySet, batches: list[Path]) -> None:
    """Copy ``batches`` into Kùzu, one table per transaction, reopening the database after each,
    and drop them (updates of stored nodes are saved in ``pending/``: ``updates.py``).

    Raises what Kùzu raises (e.g. "buffer pool is full"); that step's transaction is then rolled
    back and the batches stay staged, with the record of what the flush had committed."""
    marker = flush_marker(kg.path)
    if not kg.manifest.get(UNFINISHED):  # the close's passes are owed from the first commit on
        kg.update_manifest(**{UNFINISHED: True})
    record = _record(kg, batches)
    # a flush cut off between its steps resumes from what the database holds
    held = database_counts(kg) if marker.exists() else record["before"]
    write_atomically(marker, lambda handle: handle.write(json.dumps(record).encode()))
    crash_point("flush marked")
    for name, copy in _Flush(kg, node_keys, batches).steps():
        if record["expected"][name] == record["before"][name]:
            copy(held[name], 0)  # nothing to copy (the node step may save updates of stored nodes)
        elif held[name] != record["expected"][name]:  # else committed before the interruption
            copy(held[name], held[name] - record["before"][name])
            crash_point(f"flushed {name}")
            kg.reopen()  # Kùzu frees what a copy held only when the database closes
    for batch in batches:
        shutil.rmtree(batch)
        crash_point("batch dropped")
    marker.unlink()


def _record(kg: "KG", batches: list[Path]) -> dict:
    """What flushing ``batches`` starts from and ends with: the record of a flush that was cut
    off between its steps (the database then holds part of the batches), or counted now."""
    names = [batch.name for batch in batches]
    record = flush_record(kg.path)
    if record is not None:
        if record["batches"] != names:
            raise LoadError(f"the staged batches {names} are not those of the interrupted flush "
                            f"{record['batches']} recorded in {flush_marker(kg.path)}")
        return record
    before = database_counts(kg)
    return {"batches": names, "before": before, "expected": expected_counts(before, batches)}


@dataclass
class _Flush:
    """The steps of one flush of ``batches``."""

    kg: "KG"
    node_keys: KeySet
    batches: list[Path]

    def steps(self) -> list[tuple[str, Callable[[int, int], None]]]:
        """A flush's steps, in order, each named by the count it raises and called with the rows
        the database holds of it, and how many of those an interrupted flush copied: nodes (with
        the updates of staged nodes folded in, those of stored nodes saved for later), labels,
        name links, facts with the relations' fact counts, hub summaries. The tables with a
        primary key take their rows in pieces (``copying.keyed_pieces``), the others in one
        transaction."""
        return [("nodes", self.copy_nodes), ("labels", self.copy_labels),
                ("names", partial(self.copy_rel_table, "Names")), ("facts", self.copy_facts),
                ("summaries", partial(self.copy_rel_table, "HasRel"))]

    def copy_nodes(self, held: int, copied: int) -> None:
        """Copy the staged nodes, each with the later batches' updates already applied.

        In a dump, most updates are of nodes staged in the same flush (a node named by an earlier
        line's object is described later), so they are folded into the rows copied; those of
        nodes stored by earlier flushes are saved in ``pending/`` for the writer's close."""
        changes = [table for name in ("NodeUpdate", "NodeLists")
                   if (table := read_staged(self.batches, name)) is not None]
        nodes, stored = fold_updates(read_staged(self.batches, "Node"), changes)
        if stored is not None:
            save_pending_updates(self.kg.path, self.node_keys, stored)
        append_keyed(self.kg, "Node", nodes, held, copied)

    def copy_labels(self, held: int, copied: int) -> None:
        append_keyed(self.kg, "Label", read_staged(self.batches, "Label"), held, copied)

    def copy_rel_table(self, table: str, held: int, copied: int) -> None:
        with self.kg.transaction():
            copy_files(self.kg, table, self._files(table))

    def copy_facts(self, held: int, copied: int) -> None:
        """The facts, and each relation's fact count raised by as many (in one transaction, so the
        counts never disagree with the facts)."""
        with self.kg.transaction():
            copy_files(self.kg, "Fact", self._files("Fact"))
            counted = read_staged(self.batches, "RelationCount")
            if counted is not None:
                per_relation = counted.group_by("id", use_threads=False).aggregate([("n", "sum")])
                path = scratch_file(self.kg.path, "RelationCount", {"id": per_relation.column("id"),
                                                                     "n": per_relation.column("n_sum")})
                self.kg.execute(f"LOAD FROM {path} MATCH (r:Relation {{id: id}}) SET r.facts = r.facts + n")
            crash_point("copying Fact")

    def _files(self, table: str) -> list[Path]:
        return [batch / f"{table}.parquet" for batch in self.batches]
