"""The bulk write path: batches of facts and node attributes into Kùzu.

Every loader fills :class:`FactBatch` objects (or, in the dump loaders' worker
processes, :class:`ColumnBatch` columns) and hands them to one
:class:`GraphWriter`. It deduplicates each batch against the hash sets of
``keyset.py``, stages its new rows as Parquet under ``DB/staged/``, and flushes
the staged batches with one ``COPY`` per table, because Kùzu's commit cost grows
with the tables written into, so few large copies make a dump load fast. Each
table is copied in its own transaction with a reopen after it (a relationship
``COPY`` holds memory per node until the database closes), and keyed tables
take rows in pieces (:func:`keyed_pieces`: a larger merge makes kuzu 0.11.3
lose keys). Updates of stored nodes wait under ``DB/pending/`` and are applied
by ``seq`` range when the writer closes. A crash at any step loses nothing: the
next writer finishes the flush or the close it finds recorded, and lists the
batches it found staged with the origin their writer gave each
(``GraphWriter.recovered``), so a load can count what it had staged itself. The reasons and
measurements are in docs/architecture.md and docs/benchmarks.md.
"""
from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from localkg.errors import LoadError
from localkg.store import schema
from localkg.store.batch import SEP, ColumnBatch, FactBatch, list_lengths, merge_rows_by_id
from localkg.store.crashpoints import crash_point
from localkg.store.keyset import KeySet, hash_keys, write_atomically
from localkg.store.labels import relation_label
from localkg.store.model import IN, OUT

if TYPE_CHECKING:
    from localkg.store.kg import KG

KEYSETS = ("nodes", "facts", "labels", "names")
POOL_BYTES_PER_FLUSHED_ROW = 256
_COUNTED = {  # what a flush's steps add to, counted in the database
    "nodes": "MATCH (n:Node) RETURN count(*)",
    "labels": "MATCH (l:Label) RETURN count(*)",
    "names": "MATCH ()-[x:Names]->() RETURN count(*)",
    "facts": "MATCH ()-[f:Fact]->() RETURN count(*)",
    "summaries": "MATCH ()-[s:HasRel]->() RETURN count(*)",
}
_FLUSH_MARKER = "flushing.json"
_UNFINISHED = "unfinished_writer"  # manifest flag: a writer flushed and has not yet closed (hub flags owed)
_MERGED_SCALARS = ("name", "kind", "description")  # what a node update may change
_MERGED_LISTS = ("aliases", "types")  # ... and what it may add to
POOL_BYTES_PER_UPDATED_NUMBER = 1024
PENDING_SPAN = 1 << 20  # sequence numbers per directory of pending updates (see the module docstring)
_UPDATE_BATCH = 5_000
KEYED_PIECE_MIN = 256
_RELATION_SCHEMA = pa.schema([("id", pa.string()), ("label", pa.string()), ("description", pa.string()),
                              ("facts", pa.int64())])
_REBUILD_RANGE = 200_000


@dataclass
class WriteCounts:
    """What one or more writes did."""

    facts_added: int = 0
    duplicates: int = 0
    nodes_added: int = 0
    nodes_updated: int = 0

    def __iadd__(self, other: "WriteCounts") -> "WriteCounts":
        self.facts_added += other.facts_added
        self.duplicates += other.duplicates
        self.nodes_added += other.nodes_added
        self.nodes_updated += other.nodes_updated
        return self


class GraphWriter:
    """Appends :class:`FactBatch` or :class:`ColumnBatch` objects to a database, deduplicating; use as a
    context manager. Writes are staged and reach Kùzu at a flush (see the module docstring):
    ``flush_rows`` staged nodes and facts trigger one."""

    def __init__(self, kg: "KG", flush_rows: int):
        self.kg = kg
        self.flush_rows = flush_rows
        self.keys = {name: KeySet(kg.path / schema.KEYS_DIR / name, with_values=name == "nodes")
                     for name in KEYSETS}  # the node set maps each node to its sequence number
        self.staging = kg.path / schema.STAGING_DIR
        self.staged = kg.path / schema.STAGED_DIR
        self.pending = kg.path / "pending"
        self.totals = WriteCounts()
        self._changed = bool(kg.manifest.get(_UNFINISHED))  # a writer that changed the graph died before closing
        self._flush_failed = False
        self.recovered = staged_writes(kg.path)  # an interrupted writer's batches: in the store once this opens
        self._recover_staged()
        self._hubs = pa.array([row[0] for row in kg._run("MATCH (n:Node) WHERE n.hub RETURN n.id")], pa.string())
        self._staged_rows = 0
        self.update_span = update_span_for_pool(kg.buffer_pool_bytes)
        self._ensure_keys_match_database()
        if self._batches():
            self.flush()  # what a crashed or interrupted writer staged

    def __enter__(self) -> "GraphWriter":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            shutil.rmtree(self.staging, ignore_errors=True)  # stop now: staged batches wait for the next writer
            return
        self.close()

    def close(self) -> None:
        """Finish: flush, apply the pending updates of stored nodes, bump the generation if anything
        changed, drop the transient files. After a failed flush the staged batches stay for the next
        writer (kuzu 0.11.3 aborts the process on a second rollback on one connection)."""
        if not self._flush_failed:
            self.flush()
            self.apply_updates()
            if self._changed:
                self._flag_hubs()
                self.kg.update_manifest(generation=self.kg.generation + 1, **{_UNFINISHED: False})
                self._changed = False
        shutil.rmtree(self.staging, ignore_errors=True)

    def _flag_hubs(self) -> None:
        """Flag the nodes that now have more than ``hub_degree`` facts, and count their relation
        summary from their edges, a range of :attr:`update_span` sequence numbers at a time.

        Degrees only grow on append, and a node becomes a hub at the close of the load that took
        it past the threshold; from then on the writes append to its summary (``_stage_summaries``).
        A range's flags and summaries commit together, so ``KG.relations`` never reads the summary
        of a hub that has none; after a crash before a commit, the next load that changes the graph
        flags the node. Ranges keep each transaction's degree counts to the range's nodes (one
        count over every fact held a row per node of the table).
        """
        threshold = int(self.kg.manifest.get("hub_degree", schema.HUB_DEGREE))
        for low, high in self.sequence_ranges():
            with self._transaction():
                hubs = [row[0] for row in self.kg._run(
                    "MATCH (n:Node)-[f:Fact]-() WHERE n.seq >= $low AND n.seq < $high AND NOT n.hub "
                    "WITH n, count(f) AS degree WHERE degree > $threshold SET n.hub = true RETURN n.id",
                    {"low": low, "high": high, "threshold": threshold})]
                if hubs:
                    self._summarise_new_hubs(hubs)
            crash_point("flagged hubs in a range")

    def sequence_ranges(self) -> list[tuple[int, int]]:
        """The ranges ``[low, high)`` of :attr:`update_span` sequence numbers that cover every stored
        node, for passes over all nodes that must hold one range at a time."""
        top = self.kg._run("MATCH (n:Node) RETURN max(n.seq)")[0][0]
        return [(low, low + self.update_span) for low in range(0, -1 if top is None else top + 1, self.update_span)]

    def _summarise_new_hubs(self, hubs: list[str]) -> None:
        """Count the relation summary of nodes just flagged as hubs from their edges."""
        # Databases written before summaries were kept for hubs only have rows for every node.
        self.kg.execute("MATCH (n:Node)-[h:HasRel]->() WHERE list_contains($ids, n.id) DELETE h", {"ids": hubs})
        for pattern, direction in (("-[f:Fact]->", OUT), ("<-[f:Fact]-", IN)):
            self.kg.execute(f"MATCH (n:Node){pattern}() WHERE list_contains($ids, n.id) "
                            "WITH n, f.rel AS rel, count(*) AS facts MATCH (r:Relation {id: rel}) "
                            "CREATE (n)-[:HasRel {dir: $dir, n: facts}]->(r)", {"ids": hubs, "dir": direction})

    def apply_updates(self) -> None:
        """Apply the updates of stored nodes that the flushes saved (:meth:`close` does too; a load
        that reads node attributes before closing calls it first), a range of
        :attr:`update_span` sequence numbers at a time, each range in its own transaction followed
        by a checkpoint (see the module docstring).

        A directory's files are merged per node in the order they were saved, and removed once all
        its ranges have committed. Raises :class:`LoadError` when a saved node is missing from its
        range (that range is rolled back and the files stay).
        """
        directories = sorted(path for path in self.pending.iterdir() if path.is_dir()) if self.pending.is_dir() else []
        if not directories:
            return
        self.kg.execute("CHECKPOINT")  # list SETs never follow an unchecked COPY
        for directory in directories:
            files = sorted(directory.glob("*.parquet"))
            if files:
                rows = merge_rows_by_id(pa.concat_tables([pq.read_table(path) for path in files]),
                                        _MERGED_SCALARS, _MERGED_LISTS)
                seq = self._sequence_numbers(rows.column("id"))
                pieces = seq // self.update_span
                for piece in np.unique(pieces):
                    self._apply_updates(rows.filter(pa.array(pieces == piece)), int(piece) * self.update_span,
                                        (int(piece) + 1) * self.update_span)
            shutil.rmtree(directory)

    def _apply_updates(self, rows: pa.Table, low: int, high: int) -> None:
        """Set the changes of ``rows`` on their nodes, whose sequence numbers lie in [low, high)."""
        path = self._stage("NodeChanges", rows)
        with self._transaction():
            matched = self.kg._run(
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
        self.kg.execute("CHECKPOINT")
        crash_point("applied updates in a range")

    def _sequence_numbers(self, ids: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """The sequence numbers of stored or staged nodes (from the node hash set)."""
        seq = self.keys["nodes"].lookup(hash_keys(ids.to_pylist()))
        if (seq < 0).any():
            raise LoadError(f"{int((seq < 0).sum())} updated nodes are neither staged nor stored")
        return seq

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One Kùzu transaction: committed when the block ends, rolled back when it raises.

        Kùzu rolls a transaction back itself when a statement fails (then ``ROLLBACK`` would
        raise "No active transaction" and hide the real error), so rolling back is attempted
        only while a transaction is still open.
        """
        connection = self.kg._connection
        connection.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            try:
                connection.execute("ROLLBACK")
            except RuntimeError as rollback_error:
                if "No active transaction" not in str(rollback_error):
                    raise
            raise
        connection.execute("COMMIT")

    # ------------------------------------------------------------------ consistency
    def _database_counts(self) -> dict[str, int]:
        return database_counts(self.kg)

    def _batches(self) -> list[Path]:
        return staged_batches(self.kg.path)

    def _recover_staged(self) -> None:
        """Drop half-written batches; after a crash inside a flush, drop its batches if all of its
        steps committed, forget it if none did, and keep its record if some did (the writer's first
        flush then finishes it)."""
        if not self.staged.is_dir():
            return
        for part in self.staged.glob("*.part"):  # half-written batches, and a marker's temporary file
            if part.is_dir():
                shutil.rmtree(part)
            else:
                part.unlink()
        marker = self.staged / _FLUSH_MARKER
        flush = flush_record(self.kg.path)
        if flush is not None:
            counts = self._database_counts()
            counts = {name: counts[name] for name in flush["before"]}  # records of older writers count fewer tables
            if counts == flush["before"]:
                marker.unlink()
            elif counts == flush["expected"]:
                for name in flush["batches"]:
                    shutil.rmtree(self.staged / name, ignore_errors=True)
                marker.unlink()

    def _flush_record(self, batches: list[Path]) -> dict:
        """What flushing ``batches`` starts from and ends with: the record of a flush that was cut
        off between its steps (the database then holds part of the batches), or counted now."""
        names = [batch.name for batch in batches]
        record = flush_record(self.kg.path)
        if record is not None:
            if record["batches"] != names:
                raise LoadError(f"the staged batches {names} are not those of the interrupted flush "
                                f"{record['batches']} recorded in {self.staged / _FLUSH_MARKER}")
            return record
        before = self._database_counts()
        return {"batches": names, "before": before, "expected": expected_counts(before, batches)}

    def _ensure_keys_match_database(self) -> None:
        counts = self._flush_record(self._batches())["expected"]
        if all(len(self.keys[name]) == counts[name] for name in KEYSETS) and self.keys["nodes"].has_values:
            return
        self._rebuild_keys()

    def _rebuild_keys(self) -> None:
        """Recompute every hash set from the database and the staged batches (after a crash between
        staging a batch and saving the sets, or on a set written before nodes had sequence numbers).

        The joins (facts, name links) are read in ranges of their first node's offset: one query
        over every fact needed more than a 256 MiB buffer pool on an 8M-line Freebase load, a
        range of :data:`_REBUILD_RANGE` nodes does not.
        """
        queries = {
            "nodes": ("MATCH (n:Node) RETURN n.id, n.seq", None),
            "facts": ("MATCH (a:Node)-[f:Fact]->(b:Node) WHERE offset(id(a)) >= $low AND offset(id(a)) < $high "
                      "RETURN a.id, f.rel, b.id", "Node"),
            "labels": ("MATCH (l:Label) RETURN l.id", None),
            "names": ("MATCH (l:Label)-[:Names]->(n:Node) WHERE offset(id(l)) >= $low AND offset(id(l)) < $high "
                      "RETURN l.id, n.id", "Label"),
        }
        staged_keys = {"nodes": ("Node", ["id"]), "facts": ("Fact", ["from", "rel", "to"]),
                       "labels": ("Label", ["id"]), "names": ("Names", ["from", "to"])}
        for name, (query, ranged_by) in queries.items():
            keyset = self.keys[name]
            keyset.clear()
            if ranged_by is None:
                ranges = [None]
            else:
                size = self.kg._run(f"MATCH (x:{ranged_by}) RETURN count(*)")[0][0]
                ranges = [{"low": low, "high": low + _REBUILD_RANGE} for low in range(0, size, _REBUILD_RANGE)]
            for parameters in ranges:
                result = self.kg.execute(query, parameters)
                while result.has_next():
                    rows = [result.get_next() for _ in range(100_000) if result.has_next()]
                    if keyset.with_values:  # (id, seq) rows
                        keyset.add(hash_keys(row[0] for row in rows), np.array([row[1] for row in rows]))
                    else:
                        keyset.add(hash_keys(SEP.join(row) for row in rows))
            table, columns = staged_keys[name]
            for batch in self._batches():
                path = batch / f"{table}.parquet"
                if path.exists():
                    staged = pq.read_table(path, columns=columns + (["seq"] if keyset.with_values else []))
                    joined = (staged.column(columns[0]) if len(columns) == 1 else
                              pc.binary_join_element_wise(*(staged.column(c) for c in columns), SEP))
                    hashes = hash_keys(joined.to_pylist())
                    fresh = ~keyset.contains(hashes)  # a flush cut off between its steps stored some
                    keyset.add(hashes[fresh], staged.column("seq").to_numpy()[fresh] if keyset.with_values else None)
            keyset.compact()

    # ------------------------------------------------------------------ writing
    def write(self, batch: FactBatch | ColumnBatch, origin: Any = None) -> WriteCounts:
        """Append one batch (staged; durable once this returns) and flush when enough rows have
        gathered; return what it added. ``origin`` (JSON) says where the batch came from: a later
        writer that finds the batch staged and commits it lists it in :attr:`recovered`."""
        counts = self.stage(batch, origin)
        self.flush_when_full()
        return counts

    def stage(self, batch: FactBatch | ColumnBatch, origin: Any = None) -> WriteCounts:
        """:meth:`write` without the flush, for a loader that records its progress between the two
        (a crash in the flush then finds the batch recorded as written)."""
        columns = batch.columns() if isinstance(batch, FactBatch) else batch
        self._write_relations(columns)
        self.staged.mkdir(parents=True, exist_ok=True)
        batches = self._batches()
        number = int(batches[-1].name) + 1 if batches else 0
        target = self.staged / f"{number:08d}.part"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        pending: dict[str, np.ndarray] = {}  # the hashes each set gains (and the new nodes' numbers)
        counts = WriteCounts()
        counts.nodes_added, counts.nodes_updated = self._stage_nodes(columns, pending, target)
        labels, names = self._stage_labels(columns, pending, target)
        counts.facts_added, counts.duplicates, new_facts = self._stage_facts(columns, pending, target)
        self._stage_summaries(new_facts, target)
        if any(target.iterdir()):
            staged = {"nodes": counts.nodes_added, "facts": counts.facts_added, "labels": labels, "names": names,
                      "origin": origin}
            (target / "counts.json").write_text(json.dumps(staged))
            target.rename(self.staged / f"{number:08d}")
            self._staged_rows += counts.nodes_added + counts.facts_added
        else:
            target.rmdir()
        crash_point("staged")
        for name in KEYSETS:
            if name in pending:
                self.keys[name].add(pending[name], pending.get("seq") if name == "nodes" else None)
        self.totals += counts
        self._changed = self._changed or counts.facts_added > 0 or counts.nodes_added > 0 or counts.nodes_updated > 0
        return counts

    def flush_when_full(self) -> None:
        """Flush once the staged nodes and facts reach ``flush_rows``."""
        if self._staged_rows >= self.flush_rows:
            self.flush()

    def flush(self) -> None:
        """Copy every staged batch into Kùzu, one table per transaction, reopening the database
        after each (updates of stored nodes wait in ``pending/`` for :meth:`close`; see the module
        docstring).

        Raises what Kùzu raises (e.g. "buffer pool is full"); that step's transaction is then rolled
        back and the staged batches stay for the next writer, which finishes the flush when it
        opens; this writer refuses to flush again (kuzu 0.11.3 aborts the process on a second
        rollback)."""
        if self._flush_failed:
            raise LoadError("an earlier flush of this writer failed; its writes stay staged for the next "
                            "writer, which flushes them when it opens")
        batches = self._batches()
        if not batches:
            return
        marker = self.staged / _FLUSH_MARKER
        if not self.kg.manifest.get(_UNFINISHED):  # the close's passes are owed from the first commit on
            self.kg.update_manifest(**{_UNFINISHED: True})
        try:
            record = self._flush_record(batches)
            # a flush cut off between its steps resumes from what the database holds
            held = self._database_counts() if marker.exists() else record["before"]
            write_atomically(marker, lambda handle: handle.write(json.dumps(record).encode()))
            crash_point("flush marked")
            for name, copy in self._flush_steps():
                if record["expected"][name] == record["before"][name]:
                    copy(batches, held[name], 0)  # nothing to copy (the node step may save updates of stored nodes)
                elif held[name] != record["expected"][name]:  # else committed before the interruption
                    copy(batches, held[name], held[name] - record["before"][name])
                    crash_point(f"flushed {name}")
                    self.kg.reopen()  # Kùzu frees what a copy held only when the database closes
        except BaseException:
            self._flush_failed = True
            raise
        for batch in batches:
            shutil.rmtree(batch)
            crash_point("batch dropped")
        marker.unlink()
        self._staged_rows = 0
        self._changed = True

    def _flush_steps(self) -> list[tuple[str, Callable[[list[Path], int, int], None]]]:
        """A flush's steps, in order, each named by the count it raises and called with the rows
        the database holds of it, and how many of those an interrupted flush copied: nodes (with the updates of staged nodes folded in, those of stored
        nodes saved for later), labels, name links, facts with the relations' fact counts, hub
        summaries. The tables with a primary key take their rows in pieces (:func:`keyed_pieces`),
        the others in one transaction."""
        return [("nodes", self._copy_nodes),
                ("labels", lambda batches, held, copied: self._append_keyed("Label", _read_staged(batches, "Label"),
                                                                       held, copied)),
                ("names", partial(self._copy_rel_table, "Names")), ("facts", self._copy_facts),
                ("summaries", partial(self._copy_rel_table, "HasRel"))]

    def _copy_rel_table(self, table: str, batches: list[Path], held: int, copied: int) -> None:
        with self._transaction():
            self._copy_table(table, batches)

    def _copy_table(self, table: str, batches: list[Path]) -> None:
        files = [path_literal(path) for batch in batches if (path := batch / f"{table}.parquet").exists()]
        if files:
            self.kg.execute(f"COPY {table} FROM [{', '.join(files)}]")

    def _copy_facts(self, batches: list[Path], held: int, copied: int) -> None:
        """The facts, and each relation's fact count raised by as many (in one transaction, so the
        counts never disagree with the facts)."""
        with self._transaction():
            self._copy_table("Fact", batches)
            counted = _read_staged(batches, "RelationCount")
            if counted is not None:
                per_relation = counted.group_by("id", use_threads=False).aggregate([("n", "sum")])
                path = self._stage("RelationCount", {"id": per_relation.column("id"),
                                                     "n": per_relation.column("n_sum")})
                self.kg.execute(f"LOAD FROM {path} MATCH (r:Relation {{id: id}}) SET r.facts = r.facts + n")
            crash_point("copying Fact")

    def _append_keyed(self, table: str, rows: pa.Table | None, held: int, copied: int) -> None:
        """Copy the ``rows`` of a flush into a node table (a table with a primary key) that holds
        ``held`` rows, skipping the first ``copied``, which an interrupted flush already copied
        (the rows are rebuilt in the same order), in the pieces of :func:`keyed_pieces`, each its own transaction followed
        by a checkpoint, which is when Kùzu merges a piece's keys into the table's hash index."""
        if rows is None or copied >= rows.num_rows:
            return
        for start, stop in keyed_pieces(held, rows.num_rows - copied):
            with self._transaction():
                self.kg.execute(f"COPY {table} FROM {self._stage(table, rows.slice(copied + start, stop - start))}")
                crash_point(f"copying {table}")
            self.kg.execute("CHECKPOINT")
            crash_point(f"copied a piece of {table}")

    def _copy_nodes(self, batches: list[Path], held: int, copied: int) -> None:
        """Copy the staged nodes, each with the later batches' updates already applied.

        In a dump, most updates are of nodes staged in the same flush (a node named by an earlier
        line's object is described later), so they are folded into the rows copied. Updates of
        nodes stored by earlier flushes are merged per node (in batch order) and saved in
        ``pending/`` for :meth:`close` (see the module docstring)."""
        nodes = _read_staged(batches, "Node")
        changes = [table for name in ("NodeUpdate", "NodeLists") if (table := _read_staged(batches, name)) is not None]
        if changes:
            changed = pa.concat_tables(changes, promote_options="default")
            for name in _MERGED_LISTS:  # no list additions among the changes
                if name not in changed.column_names:
                    changed = changed.append_column(name, pa.nulls(changed.num_rows, pa.list_(pa.string())))
            staged_ids = nodes.column("id") if nodes is not None else pa.array([], pa.string())
            to_staged = pc.is_in(changed.column("id"), value_set=staged_ids)
            if pc.any(to_staged).as_py():
                affected = pc.is_in(staged_ids, value_set=changed.column("id"))
                base = nodes.filter(affected)
                merged = merge_rows_by_id(pa.concat_tables([base, changed.filter(to_staged)], promote_options="default"),
                                          _MERGED_SCALARS, _MERGED_LISTS)
                for name in merged.column_names[1:]:  # base has one row per id, in the merged order
                    base = base.set_column(base.schema.get_field_index(name), name,
                                           merged.column(name).cast(base.schema.field(name).type))
                nodes = pa.concat_tables([nodes.filter(pc.invert(affected)), base])
            stored = changed.filter(pc.invert(to_staged))
            if stored.num_rows:
                self._save_pending_updates(merge_rows_by_id(stored, _MERGED_SCALARS, _MERGED_LISTS))
        self._append_keyed("Node", nodes, held, copied)

    def _stage(self, name: str, table: pa.Table | dict[str, pa.Array | list]) -> str:
        """Write rows to a transient staging Parquet file; return its path as a Cypher string literal."""
        self.staging.mkdir(parents=True, exist_ok=True)
        path = self.staging / f"{name}.parquet"
        _write_parquet(table if isinstance(table, pa.Table) else pa.table(table), path)
        return path_literal(path)

    def _write_relations(self, batch: ColumnBatch) -> None:
        """Add the batch's new relations (``Relation`` has a primary key: :meth:`_append_keyed`) and
        set the labels and descriptions it gives known ones."""
        wanted = set(pc.unique(batch.facts.column("rel")).to_pylist()) | set(batch.relation_info)
        if not wanted:
            return
        existing = {row[0] for row in self.kg._run(
            "MATCH (r:Relation) WHERE list_contains($ids, r.id) RETURN r.id", {"ids": sorted(wanted)})}
        new, changed = [], []
        for relation in sorted(wanted):
            label, description = batch.relation_info.get(relation, ("", ""))
            if relation not in existing:
                new.append({"id": relation, "label": label or relation_label(relation), "description": description,
                            "facts": 0})
            elif label or description:
                changed.append({"id": relation, "label": label, "description": description})
        if new:
            held = self.kg._run("MATCH (r:Relation) RETURN count(*)")[0][0]
            self._append_keyed("Relation", pa.Table.from_pylist(new, _RELATION_SCHEMA), held, 0)
        for chunk in _chunks(changed, _UPDATE_BATCH):
            with self._transaction():
                self.kg.execute(
                    "UNWIND $rows AS row MATCH (r:Relation {id: row.id}) "
                    "SET r.label = CASE WHEN row.label = '' THEN r.label ELSE row.label END, "
                    "r.description = CASE WHEN row.description = '' THEN r.description ELSE row.description END",
                    {"rows": chunk})

    def _stage_nodes(self, batch: ColumnBatch, pending: dict[str, np.ndarray], target: Path) -> tuple[int, int]:
        """Stage the batch's new nodes, numbered on from the nodes stored and staged so far, and its
        updates of known nodes; return how many of each."""
        nodes, hashes = batch.distinct_nodes()
        if not nodes.num_rows:
            return 0, 0
        known = self.keys["nodes"].contains(hashes)
        fresh = nodes.filter(pa.array(~known))
        if fresh.num_rows:
            seq = len(self.keys["nodes"]) + np.arange(fresh.num_rows, dtype=np.int64)
            _write_parquet(fresh.drop_columns(["explicit", "described"])
                           .append_column("hub", pa.array(np.zeros(fresh.num_rows, dtype=bool)))
                           .append_column("seq", pa.array(seq)), target / "Node.parquet")
            pending["nodes"], pending["seq"] = hashes[~known], seq
        explicit = nodes.column("explicit").to_numpy(zero_copy_only=False)
        updated = nodes.filter(pa.array(known & explicit))
        if updated.num_rows:
            _write_parquet(updated.select(["id", "name", "kind", "description"]), target / "NodeUpdate.parquet")
            with_lists = (list_lengths(updated.column("aliases")) + list_lengths(updated.column("types"))) > 0
            if with_lists.any():
                _write_parquet(updated.filter(pa.array(with_lists)).select(["id", "aliases", "types"]),
                               target / "NodeLists.parquet")
        return fresh.num_rows, updated.num_rows

    def _save_pending_updates(self, rows: pa.Table) -> None:
        """Save updates of stored nodes (one row per node) for :meth:`close`, split by range of
        sequence number; saved before the flush commits, so a crash loses nothing, and applying
        them twice changes nothing."""
        ranges = self._sequence_numbers(rows.column("id")) // PENDING_SPAN
        existing = [int(path.stem) for path in self.pending.glob("*/*.parquet") if path.stem.isdigit()]
        name = f"{max(existing, default=-1) + 1:08d}.parquet"
        for number in np.unique(ranges):
            directory = self.pending / f"{number * PENDING_SPAN:012d}-{(number + 1) * PENDING_SPAN:012d}"
            directory.mkdir(parents=True, exist_ok=True)
            tmp = directory / (name + ".part")
            _write_parquet(rows.filter(pa.array(ranges == number)), tmp)
            tmp.replace(directory / name)

    def _stage_labels(self, batch: ColumnBatch, pending: dict[str, np.ndarray], target: Path) -> tuple[int, int]:
        """Stage new labels and name links; return how many of each."""
        if not batch.names.num_rows:
            return 0, 0
        first = _first_of_each(batch.name_hashes)
        first = first[~self.keys["names"].contains(batch.name_hashes[first])]
        if not len(first):
            return 0, 0
        label_hashes = batch.label_hashes[first]
        new_labels = _first_of_each(label_hashes)
        new_labels = new_labels[~self.keys["labels"].contains(label_hashes[new_labels])]
        links = batch.names.take(first)
        if len(new_labels):
            _write_parquet(links.select(["from"]).take(new_labels).rename_columns(["id"]), target / "Label.parquet")
            pending["labels"] = label_hashes[new_labels]
        _write_parquet(links, target / "Names.parquet")
        pending["names"] = batch.name_hashes[first]
        return len(new_labels), links.num_rows

    def _stage_facts(self, batch: ColumnBatch, pending: dict[str, np.ndarray],
                     target: Path) -> tuple[int, int, pa.Table]:
        first = _first_of_each(batch.fact_hashes)
        fresh = first[~self.keys["facts"].contains(batch.fact_hashes[first])]
        facts = batch.facts.take(fresh)
        if facts.num_rows:
            _write_parquet(facts, target / "Fact.parquet")
            pending["facts"] = batch.fact_hashes[fresh]
        return facts.num_rows, len(batch) - facts.num_rows, facts

    def _stage_summaries(self, facts: pa.Table, target: Path) -> None:
        """Stage one summary row per (hub, relation, direction) of this batch's new facts, and the
        batch's fact count per relation.

        Only hubs have a summary: any other node has at most ``hub_degree`` facts, which
        ``KG.relations`` counts from its edges, and summary rows for every node outnumbered the
        facts (schema.py). Rows are only ever appended (``KG.relations`` sums them): updating
        counts in place costs a pattern match per row."""
        if not facts.num_rows:
            return
        if len(self._hubs):
            per_end = []
            for end, direction in (("from", OUT), ("to", IN)):
                at_hubs = facts.filter(pc.is_in(facts.column(end), value_set=self._hubs))
                counted = at_hubs.group_by([end, "rel"], use_threads=False).aggregate([([], "count_all")])
                per_end.append(pa.table({"from": counted.column(end), "to": counted.column("rel"),
                                         "dir": pa.array(np.full(counted.num_rows, direction)),
                                         "n": counted.column("count_all")}))
            summary = pa.concat_tables(per_end)
            if summary.num_rows:
                _write_parquet(summary, target / "HasRel.parquet")
        per_relation = facts.group_by("rel", use_threads=False).aggregate([([], "count_all")])
        _write_parquet(pa.table({"id": per_relation.column("rel"), "n": per_relation.column("count_all")}),
                       target / "RelationCount.parquet")


def database_counts(kg: "KG") -> dict[str, int]:
    """The rows each table holds, under the names of :data:`_COUNTED` (and of the hash sets)."""
    return {name: kg._run(query)[0][0] for name, query in _COUNTED.items()}


def staged_batches(path: Path) -> list[Path]:
    """The complete staged batches of the store at ``path``, oldest first."""
    staged = path / schema.STAGED_DIR
    if not staged.is_dir():
        return []
    return sorted(batch for batch in staged.iterdir() if batch.is_dir() and batch.name.isdigit())


@dataclass
class StagedWrite:
    """A batch that an interrupted writer staged, as the next writer found it on opening (and then
    saw into the store): the ``origin`` its writer gave it, and the new nodes and facts it holds."""

    origin: Any
    counts: WriteCounts


def staged_writes(path: Path) -> list[StagedWrite]:
    """The staged batches of the store at ``path``, oldest first, with their origins and counts."""
    writes = []
    for batch in staged_batches(path):
        staged = json.loads((batch / "counts.json").read_text())
        writes.append(StagedWrite(staged.get("origin"), WriteCounts(facts_added=staged["facts"],
                                                                    nodes_added=staged["nodes"])))
    return writes


def flush_record(path: Path) -> dict | None:
    """The record of a flush that was cut off (its batches, and the counts before and after), if any."""
    marker = path / schema.STAGED_DIR / _FLUSH_MARKER
    return json.loads(marker.read_text()) if marker.exists() else None


def expected_counts(counts: dict[str, int], batches: list[Path]) -> dict[str, int]:
    """``counts`` (of the database) plus the rows of each kind that ``batches`` hold."""
    total = dict(counts)
    for batch in batches:
        staged = json.loads((batch / "counts.json").read_text())
        for name in KEYSETS:
            total[name] += staged[name]
        if (summaries := batch / "HasRel.parquet").exists():
            total["summaries"] += pq.read_metadata(summaries).num_rows
    return total


def flush_rows_for_pool(buffer_pool_bytes: int) -> int:
    """How many staged nodes and facts one flush may copy with this Kùzu buffer pool.

    A ``COPY`` needs buffer-pool memory for what it copies: with a 256 MiB pool a flush of 1.1M
    rows of a Freebase dump fits, one of 4M rows does not ("buffer pool is full").

    >>> flush_rows_for_pool(1 << 30)  # the dump loads' default pool
    4194304
    """
    return max(1, buffer_pool_bytes // POOL_BYTES_PER_FLUSHED_ROW)


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


def update_span_for_pool(buffer_pool_bytes: int) -> int:
    """How many sequence numbers one transaction of updates of stored nodes may cover with this
    Kùzu buffer pool.

    Matched within a range of numbers, an update builds a hash table over the range's nodes and
    holds the node groups it changes until the checkpoint: about 250 bytes of pool per number on
    a 5.1M-node store (a range of 1M numbers: +254 MB); a quarter of that leaves room.

    >>> update_span_for_pool(1 << 30)  # the dump loads' default pool
    1048576
    """
    return max(1, buffer_pool_bytes // POOL_BYTES_PER_UPDATED_NUMBER)


def _write_parquet(table: pa.Table, path: Path) -> None:
    """Stage rows; without dictionary encoding, which costs a third of the write and saves little
    here (ids and names are mostly distinct)."""
    pq.write_table(table, path, use_dictionary=False)


def _read_staged(batches: list[Path], name: str) -> pa.Table | None:
    """The staged rows of one kind over ``batches``, in batch order (None when there are none)."""
    tables = [pq.read_table(path) for batch in batches if (path := batch / f"{name}.parquet").exists()]
    return pa.concat_tables(tables) if tables else None


def _first_of_each(hashes: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct hash, in input order."""
    _, first = np.unique(hashes, return_index=True)
    first.sort()
    return first


def _chunks(rows: list, size: int) -> Iterable[list]:
    for start in range(0, len(rows), size):
        yield rows[start:start + size]


def path_literal(path: Path) -> str:
    r"""``path`` as a Cypher string literal: Kùzu takes the files of ``COPY`` and ``LOAD FROM`` only
    as literals (a parameter must be a data frame), and a store may live under any directory name.

    >>> print(path_literal(Path("/data/it's\\here/Node.parquet")))
    '/data/it\'s\\here/Node.parquet'
    """
    return "'" + str(path).replace("\\", "\\\\").replace("'", "\\'") + "'"
