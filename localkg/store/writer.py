"""The bulk write path: batches of facts and node attributes into Kùzu.

Every loader (custom triples, Freebase, Wikidata) fills :class:`FactBatch`
objects and hands them to one :class:`GraphWriter`, which

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
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from localkg.store import schema
from localkg.store.keyset import KeySet, hash_keys
from localkg.store.labels import relation_label
from localkg.store.model import ENTITY, IN, LITERAL, OUT

if TYPE_CHECKING:
    from localkg.store.kg import KG

SEP = "\x1f"
KEYSETS = ("nodes", "facts", "labels", "names")
_UPDATE_BATCH = 5_000
_REBUILD_RANGE = 200_000


@dataclass
class NodeAttributes:
    """What a batch says about one node. ``explicit`` attributes overwrite stored ones."""

    name: str = ""
    kind: str = ENTITY
    aliases: list[str] = field(default_factory=list)
    description: str = ""
    types: list[str] = field(default_factory=list)
    value: str = ""
    datatype: str = ""
    lang: str = ""
    explicit: bool = False

    def merge(self, other: "NodeAttributes") -> None:
        self.name = other.name or self.name
        if other.explicit or other.kind != ENTITY:
            self.kind = other.kind
        self.aliases.extend(a for a in other.aliases if a not in self.aliases)
        self.description = other.description or self.description
        self.types.extend(t for t in other.types if t not in self.types)
        self.value = other.value or self.value
        self.datatype = other.datatype or self.datatype
        self.lang = other.lang or self.lang
        self.explicit = self.explicit or other.explicit


@dataclass
class FactBatch:
    """Facts, node attributes and relation labels gathered by a loader for one write."""

    heads: list[str] = field(default_factory=list)
    relations: list[str] = field(default_factory=list)
    tails: list[str] = field(default_factory=list)
    nodes: dict[str, NodeAttributes] = field(default_factory=dict)
    relation_info: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.heads)

    def add_fact(self, head: str, relation: str, tail: str) -> None:
        self.heads.append(head)
        self.relations.append(relation)
        self.tails.append(tail)

    def add_node(self, node_id: str, attributes: NodeAttributes) -> None:
        existing = self.nodes.get(node_id)
        if existing is None:
            self.nodes[node_id] = attributes
        else:
            existing.merge(attributes)

    def add_entity(self, node_id: str, name: str = "", explicit: bool = False, **attributes: Any) -> None:
        """An entity (or, with ``kind="cvt"``, a mediator); ``explicit`` updates a stored node too."""
        self.add_node(node_id, NodeAttributes(name=name, explicit=explicit, **attributes))

    def add_literal(self, node_id: str, value: str, datatype: str = "", lang: str = "") -> None:
        self.add_node(node_id, NodeAttributes(name=value, kind=LITERAL, value=value, datatype=datatype, lang=lang))

    def add_relation(self, relation_id: str, label: str = "", description: str = "") -> None:
        self.relation_info[relation_id] = (label, description)


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
    """Appends :class:`FactBatch` objects to a database, deduplicating; use as a context manager."""

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
    def write(self, batch: FactBatch) -> WriteCounts:
        """Append one batch atomically; return what it added."""
        self.staging.mkdir(parents=True, exist_ok=True)
        pending: dict[str, np.ndarray] = {}
        counts = WriteCounts()
        try:
            with self._transaction():
                self._write_relations(batch)
                new_nodes, updated = self._write_nodes(batch, pending)
                counts.nodes_added, counts.nodes_updated = new_nodes, updated
                self._write_labels(batch, pending)
                counts.facts_added, counts.duplicates, new_facts = self._write_facts(batch, pending)
                self._write_summaries(new_facts)
        finally:
            for path in self.staging.glob("*.parquet"):
                path.unlink()
        for name, hashes in pending.items():
            self.keys[name].add(hashes)
        self.totals += counts
        self._changed = self._changed or counts.facts_added > 0 or counts.nodes_added > 0 or counts.nodes_updated > 0
        return counts

    def _stage(self, name: str, columns: dict[str, pa.Array | list]) -> str:
        """Write rows to a staging Parquet file; return its path, quoted-safe for a Cypher literal."""
        path = self.staging / f"{name}.parquet"
        pq.write_table(pa.table(columns), path)
        return _quote_path(path)

    def _copy(self, table: str, columns: dict[str, pa.Array | list]) -> None:
        self.kg.execute(f"COPY {table} FROM '{self._stage(table, columns)}'")

    def _write_relations(self, batch: FactBatch) -> None:
        wanted = set(batch.relations) | set(batch.relation_info)
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

    def _write_nodes(self, batch: FactBatch, pending: dict[str, np.ndarray]) -> tuple[int, int]:
        for node_id in set(batch.heads) | set(batch.tails):
            if node_id not in batch.nodes:
                batch.nodes[node_id] = NodeAttributes()
        ids = list(batch.nodes)
        if not ids:
            return 0, 0
        hashes = hash_keys(ids)
        known = self.keys["nodes"].contains(hashes)
        new_ids = [node_id for node_id, seen in zip(ids, known) if not seen]
        if new_ids:
            records = [batch.nodes[node_id] for node_id in new_ids]
            self._copy("Node", {
                "id": new_ids,
                "name": [r.name for r in records],
                "kind": [r.kind for r in records],
                "aliases": pa.array([r.aliases for r in records], pa.list_(pa.string())),
                "description": [r.description for r in records],
                "types": pa.array([r.types for r in records], pa.list_(pa.string())),
                "value": [r.value for r in records],
                "datatype": [r.datatype for r in records],
                "lang": [r.lang for r in records],
                "hub": pa.array([False] * len(records), pa.bool_()),
            })
            pending["nodes"] = hashes[~known]
        updated = [node_id for node_id, seen in zip(ids, known) if seen and batch.nodes[node_id].explicit]
        if updated:
            # Staged rows read with LOAD FROM are matched by primary key; `UNWIND $rows ... MATCH`
            # scanned the table once per row (38 s for 5,000 rows against 200k nodes).
            records = [batch.nodes[node_id] for node_id in updated]
            path = self._stage("NodeUpdate", {
                "id": updated,
                "name": [r.name for r in records],
                "kind": [r.kind for r in records],
                "description": [r.description for r in records],
            })
            self.kg.execute(
                f"LOAD FROM '{path}' MATCH (n:Node {{id: id}}) SET "
                "n.name = CASE WHEN name = '' THEN n.name ELSE name END, n.kind = kind, "
                "n.description = CASE WHEN description = '' THEN n.description ELSE description END")
            with_lists = [(node_id, r) for node_id, r in zip(updated, records) if r.aliases or r.types]
            if with_lists:
                self._save_pending_lists(with_lists)
        return len(new_ids), len(updated)

    def _save_pending_lists(self, rows: list[tuple[str, NodeAttributes]]) -> None:
        """Save list additions for stored nodes, applied at close (written before the batch commits,
        so a crash after the commit loses nothing; applying them twice adds nothing)."""
        self.pending.mkdir(parents=True, exist_ok=True)
        index = len(list(self.pending.glob("*.parquet")))
        target = self.pending / f"{index:08d}.parquet"
        tmp = target.with_suffix(".part")
        pq.write_table(pa.table({
            "id": [node_id for node_id, _ in rows],
            "aliases": pa.array([r.aliases for _, r in rows], pa.list_(pa.string())),
            "types": pa.array([r.types for _, r in rows], pa.list_(pa.string())),
        }), tmp)
        tmp.replace(target)

    def _write_labels(self, batch: FactBatch, pending: dict[str, np.ndarray]) -> None:
        pairs: dict[tuple[str, str], str] = {}
        for node_id, attributes in batch.nodes.items():
            if attributes.kind != ENTITY:
                continue
            if attributes.name:
                pairs.setdefault((schema.normalise_label(attributes.name), node_id), "name")
            for alias in attributes.aliases:
                pairs.setdefault((schema.normalise_label(alias), node_id), "alias")
        pairs = {pair: how for pair, how in pairs.items() if pair[0]}
        if not pairs:
            return
        pair_list = list(pairs)
        pair_hashes = hash_keys(label + SEP + node for label, node in pair_list)
        pair_known = self.keys["names"].contains(pair_hashes)
        new_pairs = [pair for pair, seen in zip(pair_list, pair_known) if not seen]
        if not new_pairs:
            return
        labels = list(dict.fromkeys(label for label, _ in new_pairs))
        label_hashes = hash_keys(labels)
        label_known = self.keys["labels"].contains(label_hashes)
        new_labels = [label for label, seen in zip(labels, label_known) if not seen]
        if new_labels:
            self._copy("Label", {"id": new_labels})
            pending["labels"] = label_hashes[~label_known]
        self._copy("Names", {"from": [p[0] for p in new_pairs], "to": [p[1] for p in new_pairs],
                             "how": [pairs[p] for p in new_pairs]})
        pending["names"] = pair_hashes[~pair_known]

    def _write_facts(self, batch: FactBatch, pending: dict[str, np.ndarray]) -> tuple[int, int, list[tuple[str, str, str]]]:
        if not batch.heads:
            return 0, 0, []
        hashes = hash_keys(h + SEP + r + SEP + t for h, r, t in zip(batch.heads, batch.relations, batch.tails))
        _, first = np.unique(hashes, return_index=True)
        first.sort()
        fresh = first[~self.keys["facts"].contains(hashes[first])]
        facts = [(batch.heads[i], batch.relations[i], batch.tails[i]) for i in fresh]
        if facts:
            self._copy("Fact", {"from": [f[0] for f in facts], "to": [f[2] for f in facts], "rel": [f[1] for f in facts]})
            pending["facts"] = hashes[fresh]
        return len(facts), len(batch.heads) - len(facts), facts

    def _write_summaries(self, facts: list[tuple[str, str, str]]) -> None:
        """Append one summary row per (node, relation, direction) of this batch's new facts.

        Rows are only ever appended (``KG.relations`` sums them): updating counts in place
        costs a pattern match per row, which made loads 20× slower."""
        if not facts:
            return
        per_pair: Counter[tuple[str, str, str]] = Counter()
        per_relation: Counter[str] = Counter()
        for head, relation, tail in facts:
            per_pair[(head, relation, OUT)] += 1
            per_pair[(tail, relation, IN)] += 1
            per_relation[relation] += 1
        pairs = list(per_pair)
        self._copy("HasRel", {"from": [p[0] for p in pairs], "to": [p[1] for p in pairs], "dir": [p[2] for p in pairs],
                              "n": pa.array([per_pair[p] for p in pairs], pa.int64())})
        path = self._stage("RelationCount", {"id": list(per_relation),
                                             "n": pa.array(list(per_relation.values()), pa.int64())})
        self.kg.execute(f"LOAD FROM '{path}' MATCH (r:Relation {{id: id}}) SET r.facts = r.facts + n")


def _chunks(rows: list, size: int) -> Iterable[list]:
    for start in range(0, len(rows), size):
        yield rows[start:start + size]


def _quote_path(path: Path) -> str:
    """Staging paths are ours (never user text); refuse anything that could break the literal."""
    text = str(path)
    if "'" in text or "\\" in text:
        raise ValueError(f"staging path {text!r} contains a quote or backslash")
    return text
