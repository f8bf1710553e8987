"""The bulk write path: batches of facts and node attributes into Kùzu.

Every loader (custom triples, Freebase, Wikidata) fills :class:`FactBatch`
objects (the dump loaders turn them into :class:`ColumnBatch` columns in their
worker processes, ``batch.py``) and hands them to one :class:`GraphWriter`, which

* stages each batch as Parquet and ``COPY``s it (pandas string columns crash
  kuzu 0.11.3; Arrow/Parquet does not), all inside one Kùzu transaction, so an
  interrupted batch leaves the previous contents intact;
* deduplicates against what the database already holds with the hash sets of
  ``keyset.py`` (appending the same file twice adds nothing);
* appends to the per-node relation summary (``HasRel``) and keeps the relation
  catalogue's fact counts up to date, so ``KG.relations`` never scans edges.

If the process dies after a commit but before the hash sets are saved, the
next writer notices that the counts disagree and rebuilds the sets from the
database.

Aliases and types added to nodes that are already stored are list-column
updates, and kuzu 0.11.3 corrupts list values when a list ``SET`` shares a
transaction with a ``COPY``, or is not separated from later ``COPY``s by a
checkpoint (rows then read other rows' lists). So these additions are saved
as Parquet under ``DB/pending/`` before the batch commits and applied when
the writer closes, each file in its own transaction between checkpoints; a
writer that finds pending files left by a crashed one applies them first.
Names, descriptions and kinds (scalars) are updated in the batch itself.
"""
from __future__ import annotations

import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from localkg.store import schema
from localkg.store.batch import SEP, ColumnBatch, FactBatch, list_lengths
from localkg.store.keyset import KeySet, hash_keys
from localkg.store.labels import relation_label
from localkg.store.model import IN, OUT

if TYPE_CHECKING:
    from localkg.store.kg import KG

KEYSETS = ("nodes", "facts", "labels", "names")
_UPDATE_BATCH = 5_000
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
    """Appends :class:`FactBatch` or :class:`ColumnBatch` objects to a database, deduplicating; use as a context manager."""

    def __init__(self, kg: "KG"):
        self.kg = kg
        self.keys = {name: KeySet(kg.path / schema.KEYS_DIR / name) for name in KEYSETS}
        self.staging = kg.path / schema.STAGING_DIR
        self.pending = kg.path / "pending"
        self.totals = WriteCounts()
        self._changed = False
        self._ensure_keys_match_database()
        self._apply_pending_lists()

    def __enter__(self) -> "GraphWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Finish: apply pending list additions, bump the generation if anything changed, drop staging."""
        self._apply_pending_lists()
        if self._changed:
            self._flag_hubs()
            self.kg.update_manifest(generation=self.kg.generation + 1)
            self._changed = False
        shutil.rmtree(self.staging, ignore_errors=True)

    def _flag_hubs(self) -> None:
        """Flag nodes that now have more than ``hub_degree`` facts (degrees only grow on append)."""
        threshold = int(self.kg.manifest.get("hub_degree", schema.HUB_DEGREE))
        self.kg.execute("MATCH (n:Node)-[h:HasRel]->() WHERE NOT n.hub WITH n, sum(h.n) AS degree "
                        "WHERE degree > $threshold SET n.hub = true", {"threshold": threshold})

    def _apply_pending_lists(self) -> None:
        """Add the saved aliases and types to stored nodes, isolated by checkpoints (see module doc).

        One transaction per pending file (one per write batch), each removed once committed: a
        single transaction for all of them made Kùzu's memory grow with the dump (an 8M-line
        load ran out of a 256 MiB buffer pool here). Applying a file twice adds nothing, so a
        crash between files loses nothing either.
        """
        files = sorted(self.pending.glob("*.parquet")) if self.pending.is_dir() else []
        if not files:
            return
        self.kg.execute("CHECKPOINT")
        for path in files:
            with self._transaction():
                self.kg.execute(
                    f"LOAD FROM '{_quote_path(path)}' MATCH (n:Node {{id: id}}) SET "
                    "n.aliases = list_distinct(list_concat(coalesce(n.aliases, []), aliases)), "
                    "n.types = list_distinct(list_concat(coalesce(n.types, []), types))")
            self.kg.execute("CHECKPOINT")
            path.unlink()

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
        run = self.kg._run
        return {
            "nodes": run("MATCH (n:Node) RETURN count(*)")[0][0],
            "facts": run("MATCH ()-[f:Fact]->() RETURN count(*)")[0][0],
            "labels": run("MATCH (l:Label) RETURN count(*)")[0][0],
            "names": run("MATCH ()-[x:Names]->() RETURN count(*)")[0][0],
        }

    def _ensure_keys_match_database(self) -> None:
        counts = self._database_counts()
        if all(len(self.keys[name]) == counts[name] for name in KEYSETS):
            return
        self._rebuild_keys()

    def _rebuild_keys(self) -> None:
        """Recompute every hash set from the database (after a crash between commit and save).

        The joins (facts, name links) are read in ranges of their first node's offset: one query
        over every fact needed more than a 256 MiB buffer pool on an 8M-line Freebase load, a
        range of :data:`_REBUILD_RANGE` nodes does not.
        """
        queries = {
            "nodes": ("MATCH (n:Node) RETURN n.id", None),
            "facts": ("MATCH (a:Node)-[f:Fact]->(b:Node) WHERE offset(id(a)) >= $low AND offset(id(a)) < $high "
                      "RETURN a.id, f.rel, b.id", "Node"),
            "labels": ("MATCH (l:Label) RETURN l.id", None),
            "names": ("MATCH (l:Label)-[:Names]->(n:Node) WHERE offset(id(l)) >= $low AND offset(id(l)) < $high "
                      "RETURN l.id, n.id", "Label"),
        }
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
                    keyset.add(hash_keys(SEP.join(row) for row in rows))
            keyset.compact()

    # ------------------------------------------------------------------ writing
    def write(self, batch: FactBatch | ColumnBatch) -> WriteCounts:
        """Append one batch atomically; return what it added."""
        columns = batch.columns() if isinstance(batch, FactBatch) else batch
        self.staging.mkdir(parents=True, exist_ok=True)
        pending: dict[str, np.ndarray] = {}
        counts = WriteCounts()
        try:
            with self._transaction():
                self._write_relations(columns)
                counts.nodes_added, counts.nodes_updated = self._write_nodes(columns, pending)
                self._write_labels(columns, pending)
                counts.facts_added, counts.duplicates, new_facts = self._write_facts(columns, pending)
                self._write_summaries(new_facts)
        finally:
            for path in self.staging.glob("*.parquet"):
                path.unlink()
        for name, hashes in pending.items():
            self.keys[name].add(hashes)
        self.totals += counts
        self._changed = self._changed or counts.facts_added > 0 or counts.nodes_added > 0 or counts.nodes_updated > 0
        return counts

    def _stage(self, name: str, table: pa.Table | dict[str, pa.Array | list]) -> str:
        """Write rows to a staging Parquet file; return its path, quoted-safe for a Cypher literal."""
        path = self.staging / f"{name}.parquet"
        pq.write_table(table if isinstance(table, pa.Table) else pa.table(table), path)
        return _quote_path(path)

    def _copy(self, table_name: str, table: pa.Table | dict[str, pa.Array | list]) -> None:
        self.kg.execute(f"COPY {table_name} FROM '{self._stage(table_name, table)}'")

    def _write_relations(self, batch: ColumnBatch) -> None:
        wanted = set(pc.unique(batch.facts.column("rel")).to_pylist()) | set(batch.relation_info)
        if not wanted:
            return
        existing = {row[0] for row in self.kg._run(
            "MATCH (r:Relation) WHERE list_contains($ids, r.id) RETURN r.id", {"ids": sorted(wanted)})}
        rows = []
        for relation in sorted(wanted):
            label, description = batch.relation_info.get(relation, ("", ""))
            if relation not in existing:
                rows.append({"id": relation, "label": label or relation_label(relation), "description": description})
            elif label or description:
                rows.append({"id": relation, "label": label, "description": description})
        for chunk in _chunks(rows, _UPDATE_BATCH):
            self.kg.execute(
                "UNWIND $rows AS row MERGE (r:Relation {id: row.id}) "
                "ON CREATE SET r.label = row.label, r.description = row.description, r.facts = 0 "
                "ON MATCH SET r.label = CASE WHEN row.label = '' THEN r.label ELSE row.label END, "
                "r.description = CASE WHEN row.description = '' THEN r.description ELSE row.description END",
                {"rows": chunk})

    def _write_nodes(self, batch: ColumnBatch, pending: dict[str, np.ndarray]) -> tuple[int, int]:
        nodes, hashes = batch.distinct_nodes()
        if not nodes.num_rows:
            return 0, 0
        known = self.keys["nodes"].contains(hashes)
        fresh = nodes.filter(pa.array(~known))
        if fresh.num_rows:
            self._copy("Node", fresh.drop_columns(["explicit", "described"]).append_column(
                "hub", pa.array(np.zeros(fresh.num_rows, dtype=bool))))
            pending["nodes"] = hashes[~known]
        explicit = nodes.column("explicit").to_numpy(zero_copy_only=False)
        updated = nodes.filter(pa.array(known & explicit))
        if updated.num_rows:
            # Staged rows read with LOAD FROM are matched by primary key; `UNWIND $rows ... MATCH`
            # scanned the table once per row (38 s for 5,000 rows against 200k nodes).
            path = self._stage("NodeUpdate", updated.select(["id", "name", "kind", "description"]))
            self.kg.execute(
                f"LOAD FROM '{path}' MATCH (n:Node {{id: id}}) SET "
                "n.name = CASE WHEN name = '' THEN n.name ELSE name END, n.kind = kind, "
                "n.description = CASE WHEN description = '' THEN n.description ELSE description END")
            with_lists = (list_lengths(updated.column("aliases")) + list_lengths(updated.column("types"))) > 0
            if with_lists.any():
                self._save_pending_lists(updated.filter(pa.array(with_lists)).select(["id", "aliases", "types"]))
        return fresh.num_rows, updated.num_rows

    def _save_pending_lists(self, rows: pa.Table) -> None:
        """Save list additions for stored nodes, applied at close (written before the batch commits,
        so a crash after the commit loses nothing; applying them twice adds nothing)."""
        self.pending.mkdir(parents=True, exist_ok=True)
        index = len(list(self.pending.glob("*.parquet")))
        target = self.pending / f"{index:08d}.parquet"
        tmp = target.with_suffix(".part")
        pq.write_table(rows, tmp)
        tmp.replace(target)

    def _write_labels(self, batch: ColumnBatch, pending: dict[str, np.ndarray]) -> None:
        if not batch.names.num_rows:
            return
        first = _first_of_each(batch.name_hashes)
        first = first[~self.keys["names"].contains(batch.name_hashes[first])]
        if not len(first):
            return
        label_hashes = batch.label_hashes[first]
        new_labels = _first_of_each(label_hashes)
        new_labels = new_labels[~self.keys["labels"].contains(label_hashes[new_labels])]
        links = batch.names.take(first)
        if len(new_labels):
            self._copy("Label", links.select(["from"]).take(new_labels).rename_columns(["id"]))
            pending["labels"] = label_hashes[new_labels]
        self._copy("Names", links)
        pending["names"] = batch.name_hashes[first]

    def _write_facts(self, batch: ColumnBatch, pending: dict[str, np.ndarray]) -> tuple[int, int, pa.Table]:
        first = _first_of_each(batch.fact_hashes)
        fresh = first[~self.keys["facts"].contains(batch.fact_hashes[first])]
        facts = batch.facts.take(fresh)
        if facts.num_rows:
            self._copy("Fact", facts)
            pending["facts"] = batch.fact_hashes[fresh]
        return facts.num_rows, len(batch) - facts.num_rows, facts

    def _write_summaries(self, facts: pa.Table) -> None:
        """Append one summary row per (node, relation, direction) of this batch's new facts.

        Rows are only ever appended (``KG.relations`` sums them): updating counts in place
        costs a pattern match per row, which made loads 20× slower."""
        if not facts.num_rows:
            return
        per_end = []
        for end, direction in (("from", OUT), ("to", IN)):
            counted = facts.group_by([end, "rel"], use_threads=False).aggregate([([], "count_all")])
            per_end.append(pa.table({"from": counted.column(end), "to": counted.column("rel"),
                                     "dir": pa.array(np.full(counted.num_rows, direction)),
                                     "n": counted.column("count_all")}))
        self._copy("HasRel", pa.concat_tables(per_end))
        per_relation = facts.group_by("rel", use_threads=False).aggregate([([], "count_all")])
        path = self._stage("RelationCount", {"id": per_relation.column("rel"), "n": per_relation.column("count_all")})
        self.kg.execute(f"LOAD FROM '{path}' MATCH (r:Relation {{id: id}}) SET r.facts = r.facts + n")


def _first_of_each(hashes: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct hash, in input order."""
    _, first = np.unique(hashes, return_index=True)
    first.sort()
    return first


def _chunks(rows: list, size: int) -> Iterable[list]:
    for start in range(0, len(rows), size):
        yield rows[start:start + size]


def _quote_path(path: Path) -> str:
    """Staging paths are ours (never user text); refuse anything that could break the literal."""
    text = str(path)
    if "'" in text or "\\" in text:
        raise ValueError(f"staging path {text!r} contains a quote or backslash")
    return text
