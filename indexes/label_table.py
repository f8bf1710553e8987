"""Which nodes a name or alias stands for, answered in memory: the linker's label lookups.

Kùzu keeps names and aliases in the ``Label`` table and links them to nodes with ``Names``
(docs/architecture.md). Asking Kùzu for every lookup made entity linking slow, and on a
1M-entity ``make_dump.py`` graph these are the costs measured (load average 4-5, 2 cores):

* Kùzu 0.11 uses its primary-key index only for a single key: ``WHERE l.id IN $keys`` and
  ``UNWIND $keys AS k MATCH (l:Label {id: k})`` scan the whole table (a 5-id ``IN`` on ``Node``
  233 ms), so the spans of a question cannot share one indexed query;
* following ``Names`` from one label costs 1-5 ms, a join of the full-text hits with ``Names``
  and ``Node`` 1.9 s;
* a full-text query returning ``node.id`` hash-joins its 20 hits with a scan of ``Label``;
  returning ``offset(id(node))`` does not.

So the linker reads the graph's labels once per graph generation into this table: per
``Label`` row (by its Kùzu offset) the label text and the range of its ``(node id, node name,
degree)`` rows, plus the labels' BLAKE2b-64 hashes sorted for lookup by text. Every exact-name lookup
and every full-text hit is then an array lookup (microseconds), and Kùzu answers only the
full-text query itself.

``localkg index build`` saves the table in ``DB/indexes/labels/`` (Arrow IPC files, memory-mapped
when read, so memory stays with the page cache); when it is missing or was built at an older
generation, :func:`label_table_for` reads it from Kùzu instead (three scans: about 7 s for 1.3M
name links). A table answers only for the generation and ``Label`` row count it was built at.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from localkg.store import schema
from localkg.store.keyset import hash_keys
from localkg.store.kg import KG

LABELS = "labels"
FORMAT_VERSION = 2
META_FILE = "meta.json"
LABELS_FILE = "labels.arrow"
NAMES_FILE = "names.arrow"
SCAN_CHUNK = 200_000


@dataclass(frozen=True)
class LabelledNode:
    """A node that carries a label as its name or alias, with its name (for display and case) and its
    degree (facts at the node, which break ties between namesakes)."""

    id: str
    name: str
    degree: int


class LabelTable:
    """The labels of one graph generation: text, hash and named nodes of every ``Label`` row.

    ``labels``: per Label offset, columns ``label``, ``start``, ``stop`` (its rows in ``names``),
    and, in hash order, ``sorted_hash`` and ``by_hash`` (the offset with that hash).
    ``names``: columns ``node``, ``name`` and ``degree``, grouped by label offset.
    """

    def __init__(self, labels: pa.Table, names: pa.Table, generation: int):
        self.generation = generation
        self._label = labels.column("label").combine_chunks()
        self._start = labels.column("start").to_numpy()
        self._stop = labels.column("stop").to_numpy()
        self._sorted_hash = labels.column("sorted_hash").to_numpy()
        self._by_hash = labels.column("by_hash").to_numpy()
        self._node = names.column("node").combine_chunks()
        self._name = names.column("name").combine_chunks()
        self._degree = names.column("degree").to_numpy()
        self._tables = (labels, names)

    def __len__(self) -> int:
        """How many labels (``Label`` rows) the table holds."""
        return len(self._label)

    # ---------------------------------------------------------------- lookups
    def nodes_named(self, keys: Iterable[str]) -> dict[str, list[LabelledNode]]:
        """For each normalised name or alias among ``keys`` that is a label, the nodes it names."""
        keys = list(dict.fromkeys(keys))
        if not keys or len(self) == 0:
            return {}
        hashes = hash_keys(keys)
        positions = np.minimum(np.searchsorted(self._sorted_hash, hashes), len(self._sorted_hash) - 1)
        found: dict[str, list[LabelledNode]] = {}
        for key, position, wanted in zip(keys, positions, hashes):
            if self._sorted_hash[position] != wanted:
                continue
            offset = int(self._by_hash[position])
            if self._label[offset].as_py() == key:  # a 64-bit hash collision would fail here
                found[key] = self._nodes_at(offset)
        return found

    def label_at(self, offset: int) -> tuple[str, list[LabelledNode]] | None:
        """The label stored at a Kùzu ``Label`` offset (as full-text search returns it) and its nodes."""
        if not 0 <= offset < len(self):
            return None
        return self._label[offset].as_py(), self._nodes_at(offset)

    def _nodes_at(self, offset: int) -> list[LabelledNode]:
        start, stop = int(self._start[offset]), int(self._stop[offset])
        nodes = self._node.slice(start, stop - start).to_pylist()
        names = self._name.slice(start, stop - start).to_pylist()
        degrees = self._degree[start:stop].tolist()
        return [LabelledNode(node, name or "", degree) for node, name, degree in zip(nodes, names, degrees)]

    # ---------------------------------------------------------------- making, saving, loading
    @classmethod
    def from_graph(cls, kg: KG) -> "LabelTable":
        """Read every label, name link and node degree from Kùzu (three scans) and index them."""
        generation = kg.generation
        labels = kg.execute("MATCH (l:Label) RETURN offset(id(l)) AS offset, l.id AS label").get_as_arrow(SCAN_CHUNK)
        links = kg.execute("MATCH (l:Label)-[:Names]->(n:Node) RETURN offset(id(l)) AS offset, n.id AS node, "
                           "n.name AS name, offset(id(n)) AS node_offset").get_as_arrow(SCAN_CHUNK)
        degrees = kg.execute("MATCH (n:Node)-[h:HasRel]->(:Relation) RETURN offset(id(n)) AS node_offset, "
                             "CAST(sum(h.n) AS INT64) AS degree").get_as_arrow(SCAN_CHUNK)
        return cls(*_index_labels(labels, links, degrees), generation)

    def save(self, directory: Path) -> None:
        """Write the Arrow files, then ``meta.json`` (a table without current meta is never read)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / META_FILE).unlink(missing_ok=True)
        for file_name, table in zip((LABELS_FILE, NAMES_FILE), self._tables):
            _atomic_write(directory / file_name, lambda tmp, table=table: _write_ipc(tmp, table))
        meta = {"format": FORMAT_VERSION, "generation": self.generation, "labels": len(self),
                "names": len(self._node)}
        _atomic_write(directory / META_FILE, lambda tmp: tmp.write_text(json.dumps(meta, indent=2, sort_keys=True)))

    @classmethod
    def load(cls, directory: Path) -> "LabelTable | None":
        """The saved table, memory-mapped; None when there is none or it is of another format."""
        directory = Path(directory)
        try:
            meta = json.loads((directory / META_FILE).read_text())
        except (OSError, ValueError):
            return None
        if meta.get("format") != FORMAT_VERSION:
            return None
        labels, names = (pa.ipc.open_file(pa.memory_map(str(directory / name))).read_all()
                         for name in (LABELS_FILE, NAMES_FILE))
        return cls(labels, names, int(meta["generation"]))


def table_directory(kg: KG) -> Path:
    return kg.path / schema.INDEXES_DIR / LABELS


def label_table_for(kg: KG) -> LabelTable:
    """The saved table when it matches the graph, else one read from Kùzu now (not saved)."""
    saved = LabelTable.load(table_directory(kg))
    if saved is not None and serves(saved, kg):
        return saved
    return LabelTable.from_graph(kg)


def serves(table: LabelTable, kg: KG) -> bool:
    """Whether ``table`` describes the graph as it is: same generation and as many labels.

    The count also catches labels written by a load that was killed before it bumped the
    generation (one count query, about 1.5 ms on 900k labels).
    """
    if table.generation != kg.generation:
        return False
    return len(table) == kg.execute("MATCH (l:Label) RETURN count(*)").get_all()[0][0]


def build_label_table(kg: KG, rebuild: bool = False) -> bool:
    """Save the table for the current graph unless a current one is saved; True when it wrote one."""
    directory = table_directory(kg)
    saved = None if rebuild else LabelTable.load(directory)
    if saved is not None and serves(saved, kg):
        return False
    LabelTable.from_graph(kg).save(directory)
    return True


def _index_labels(labels: pa.Table, links: pa.Table, degrees: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Arrange the scanned labels by offset and the name links, with their nodes' degrees, by label."""
    offsets = labels.column("offset").to_numpy().astype(np.int64)
    order = np.argsort(offsets, kind="stable")
    if len(offsets) and not np.array_equal(offsets[order], np.arange(len(offsets))):
        raise RuntimeError("Label offsets are not dense; localkg never deletes labels, so the database "
                           "was changed by another tool")
    label_text = labels.column("label").take(pa.array(order))
    link_offsets = links.column("offset").to_numpy().astype(np.int64)
    link_order = np.argsort(link_offsets, kind="stable")
    grouped = link_offsets[link_order]
    every = np.arange(len(offsets))
    hashes = hash_keys(label_text.to_pylist())
    hash_order = np.argsort(hashes, kind="stable")
    label_table = pa.table({
        "label": label_text,
        "start": np.searchsorted(grouped, every, side="left"),
        "stop": np.searchsorted(grouped, every, side="right"),
        "sorted_hash": hashes[hash_order],
        "by_hash": hash_order.astype(np.int64),
    })
    take = pa.array(link_order)
    node_offsets = links.column("node_offset").to_numpy().astype(np.int64)[link_order]
    name_table = pa.table({"node": links.column("node").take(take),
                           "name": pc.fill_null(links.column("name").take(take), ""),
                           "degree": _degree_of(node_offsets, degrees)})
    return label_table.combine_chunks(), name_table.combine_chunks()


def _degree_of(node_offsets: np.ndarray, degrees: pa.Table) -> np.ndarray:
    """The degree of each node offset (0 for a node without facts)."""
    by_offset = np.zeros(int(max(node_offsets.max(initial=-1), 0)) + 1, dtype=np.int64)
    offsets = degrees.column("node_offset").to_numpy().astype(np.int64)
    wanted = offsets < len(by_offset)
    by_offset[offsets[wanted]] = np.asarray(degrees.column("degree").to_numpy(), dtype=np.int64)[wanted]
    return by_offset[node_offsets]


def _write_ipc(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _atomic_write(target: Path, write) -> None:
    """Write through a temporary file and rename, so a crash never leaves half a file."""
    tmp = target.with_name(target.name + ".tmp")
    write(tmp)
    os.replace(tmp, target)
