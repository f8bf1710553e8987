"""Staging: a batch deduplicated against the writer's hash sets, its new rows written under ``DB/staged/``.

Each batch becomes one numbered directory of Parquet files (new nodes, updates of known nodes,
labels, name links, facts, hub summary rows, fact counts per relation) and ``counts.json`` (what
it adds, and the origin its writer gave it), written as ``NNNNNNNN.part`` and renamed when
complete, so a staged batch is durable and whole. New nodes are numbered on from the nodes stored
and staged so far (``seq``, kept in the node hash set). New relations are the one thing written
straight into Kùzu, since the batch's facts name them. A flush (``flush.py``) copies the staged
batches into Kùzu.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from localkg.store import schema
from localkg.store.batch import ColumnBatch, FactBatch, list_lengths
from localkg.store.copying import append_keyed, write_parquet
from localkg.store.crashpoints import crash_point
from localkg.store.dedupe import KEYSETS, KeySets
from localkg.store.labels import relation_label
from localkg.store.model import IN, OUT

if TYPE_CHECKING:
    from localkg.store.kg import KG

COUNTS_FILE = "counts.json"
_UPDATE_BATCH = 5_000
_RELATION_SCHEMA = pa.schema([("id", pa.string()), ("label", pa.string()), ("description", pa.string()),
                              ("facts", pa.int64())])


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


@dataclass
class StagedWrite:
    """A batch that an interrupted writer staged, as the next writer found it on opening (and then
    saw into the store): the ``origin`` its writer gave it, and the new nodes and facts it holds."""

    origin: Any
    counts: WriteCounts


def staged_batches(store: Path) -> list[Path]:
    """The complete staged batches of the store at ``store``, oldest first."""
    staged = store / schema.STAGED_DIR
    if not staged.is_dir():
        return []
    return sorted(batch for batch in staged.iterdir() if batch.is_dir() and batch.name.isdigit())


def staged_writes(store: Path) -> list[StagedWrite]:
    """The staged batches of the store at ``store``, oldest first, with their origins and counts."""
    writes = []
    for batch in staged_batches(store):
        staged = _counts(batch)
        writes.append(StagedWrite(staged.get("origin"), WriteCounts(facts_added=staged["facts"],
                                                                    nodes_added=staged["nodes"])))
    return writes


def expected_counts(counts: dict[str, int], batches: list[Path]) -> dict[str, int]:
    """``counts`` (of the database, by table as ``flush.database_counts`` names them) plus the
    rows of each kind that ``batches`` hold."""
    total = dict(counts)
    for batch in batches:
        staged = _counts(batch)
        for name in KEYSETS:
            total[name] += staged[name]
        if (summaries := batch / "HasRel.parquet").exists():
            total["summaries"] += pq.read_metadata(summaries).num_rows
    return total


def read_staged(batches: list[Path], name: str) -> pa.Table | None:
    """The staged rows of one kind over ``batches``, in batch order (None when there are none)."""
    tables = [pq.read_table(path) for batch in batches if (path := batch / f"{name}.parquet").exists()]
    return pa.concat_tables(tables) if tables else None


def _counts(batch: Path) -> dict[str, Any]:
    return json.loads((batch / COUNTS_FILE).read_text())


def stage_batch(kg: "KG", keys: KeySets, batch: FactBatch | ColumnBatch, origin: Any, hubs: pa.Array) -> WriteCounts:
    """Stage what ``batch`` adds to the store (relations excepted: those are written at once) as
    the next numbered batch, then add its keys to ``keys``; return what it added. ``hubs``: the
    stored hubs, whose summaries the batch's new facts add to."""
    columns = batch.columns() if isinstance(batch, FactBatch) else batch
    write_relations(kg, columns)
    staged = kg.path / schema.STAGED_DIR
    staged.mkdir(parents=True, exist_ok=True)
    batches = staged_batches(kg.path)
    number = int(batches[-1].name) + 1 if batches else 0
    target = staged / f"{number:08d}.part"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    pending: dict[str, np.ndarray] = {}  # the hashes each set gains (and the new nodes' numbers)
    counts = WriteCounts()
    counts.nodes_added, counts.nodes_updated = _stage_nodes(keys, columns, pending, target)
    labels, names = _stage_labels(keys, columns, pending, target)
    counts.facts_added, counts.duplicates, new_facts = _stage_facts(keys, columns, pending, target)
    _stage_summaries(new_facts, hubs, target)
    if any(target.iterdir()):
        added = {"nodes": counts.nodes_added, "facts": counts.facts_added, "labels": labels, "names": names,
                 "origin": origin}
        (target / COUNTS_FILE).write_text(json.dumps(added))
        target.rename(staged / f"{number:08d}")
    else:
        target.rmdir()
    crash_point("staged")
    for name in KEYSETS:
        if name in pending:
            keys[name].add(pending[name], pending.get("seq") if name == "nodes" else None)
    return counts


def write_relations(kg: "KG", batch: ColumnBatch) -> None:
    """Add the batch's new relations (``Relation`` has a primary key: ``copying.append_keyed``)
    and set the labels and descriptions it gives known ones."""
    wanted = set(pc.unique(batch.facts.column("rel")).to_pylist()) | set(batch.relation_info)
    if not wanted:
        return
    existing = {row[0] for row in kg.rows(
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
        held = kg.rows("MATCH (r:Relation) RETURN count(*)")[0][0]
        append_keyed(kg, "Relation", pa.Table.from_pylist(new, _RELATION_SCHEMA), held, 0)
    for chunk in _chunks(changed, _UPDATE_BATCH):
        with kg.transaction():
            kg.execute(
                "UNWIND $rows AS row MATCH (r:Relation {id: row.id}) "
                "SET r.label = CASE WHEN row.label = '' THEN r.label ELSE row.label END, "
                "r.description = CASE WHEN row.description = '' THEN r.description ELSE row.description END",
                {"rows": chunk})


def _stage_nodes(keys: KeySets, batch: ColumnBatch, pending: dict[str, np.ndarray], target: Path) -> tuple[int, int]:
    """Stage the batch's new nodes, numbered on from the nodes stored and staged so far, and its
    updates of known nodes; return how many of each."""
    nodes, hashes = batch.distinct_nodes()
    if not nodes.num_rows:
        return 0, 0
    known = keys["nodes"].contains(hashes)
    fresh = nodes.filter(pa.array(~known))
    if fresh.num_rows:
        seq = len(keys["nodes"]) + np.arange(fresh.num_rows, dtype=np.int64)
        write_parquet(fresh.drop_columns(["explicit", "described"])
                      .append_column("hub", pa.array(np.zeros(fresh.num_rows, dtype=bool)))
                      .append_column("seq", pa.array(seq)), target / "Node.parquet")
        pending["nodes"], pending["seq"] = hashes[~known], seq
    explicit = nodes.column("explicit").to_numpy(zero_copy_only=False)
    updated = nodes.filter(pa.array(known & explicit))
    if updated.num_rows:
        write_parquet(updated.select(["id", "name", "kind", "description"]), target / "NodeUpdate.parquet")
        with_lists = (list_lengths(updated.column("aliases")) + list_lengths(updated.column("types"))) > 0
        if with_lists.any():
            write_parquet(updated.filter(pa.array(with_lists)).select(["id", "aliases", "types"]),
                          target / "NodeLists.parquet")
    return fresh.num_rows, updated.num_rows


def _stage_labels(keys: KeySets, batch: ColumnBatch, pending: dict[str, np.ndarray], target: Path) -> tuple[int, int]:
    """Stage new labels and name links; return how many of each."""
    if not batch.names.num_rows:
        return 0, 0
    first = _first_of_each(batch.name_hashes)
    first = first[~keys["names"].contains(batch.name_hashes[first])]
    if not len(first):
        return 0, 0
    label_hashes = batch.label_hashes[first]
    new_labels = _first_of_each(label_hashes)
    new_labels = new_labels[~keys["labels"].contains(label_hashes[new_labels])]
    links = batch.names.take(first)
    if len(new_labels):
        write_parquet(links.select(["from"]).take(new_labels).rename_columns(["id"]), target / "Label.parquet")
        pending["labels"] = label_hashes[new_labels]
    write_parquet(links, target / "Names.parquet")
    pending["names"] = batch.name_hashes[first]
    return len(new_labels), links.num_rows


def _stage_facts(keys: KeySets, batch: ColumnBatch, pending: dict[str, np.ndarray],
                 target: Path) -> tuple[int, int, pa.Table]:
    first = _first_of_each(batch.fact_hashes)
    fresh = first[~keys["facts"].contains(batch.fact_hashes[first])]
    facts = batch.facts.take(fresh)
    if facts.num_rows:
        write_parquet(facts, target / "Fact.parquet")
        pending["facts"] = batch.fact_hashes[fresh]
    return facts.num_rows, len(batch) - facts.num_rows, facts


def _stage_summaries(facts: pa.Table, hubs: pa.Array, target: Path) -> None:
    """Stage one summary row per (hub, relation, direction) of this batch's new facts, and the
    batch's fact count per relation.

    Rows are only ever appended (``KG.relations`` sums them): updating counts in place costs a
    pattern match per row; summary rows for every node outnumbered the facts (schema.py)."""
    if not facts.num_rows:
        return
    if len(hubs):
        per_end = []
        for end, direction in (("from", OUT), ("to", IN)):
            at_hubs = facts.filter(pc.is_in(facts.column(end), value_set=hubs))
            counted = at_hubs.group_by([end, "rel"], use_threads=False).aggregate([([], "count_all")])
            per_end.append(pa.table({"from": counted.column(end), "to": counted.column("rel"),
                                     "dir": pa.array(np.full(counted.num_rows, direction)),
                                     "n": counted.column("count_all")}))
        summary = pa.concat_tables(per_end)
        if summary.num_rows:
            write_parquet(summary, target / "HasRel.parquet")
    per_relation = facts.group_by("rel", use_threads=False).aggregate([([], "count_all")])
    write_parquet(pa.table({"id": per_relation.column("rel"), "n": per_relation.column("count_all")}),
                  target / "RelationCount.parquet")


def _first_of_each(hashes: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct hash, in input order."""
    _, first = np.unique(hashes, return_index=True)
    first.sort()
    return first


def _chunks(rows: list, size: int) -> Iterable[list]:
    for start in range(0, len(rows), size):
        yield rows[start:start + size]
