"""Which nodes a name or alias stands for, answered in memory: the linker's label lookups.

Per ``Label`` row (by its Kùzu offset) the label text and its ``(node id, node name, degree)``
rows, the labels' BLAKE2b-64 hashes sorted for lookup by text, and a BM25 inverted index of
their word stems (:meth:`LabelTable.search`). Exact lookups are array lookups and a full-text
query a few array operations, where asking Kùzu cost milliseconds to seconds per lookup at
dump scale (docs/indexes.md and docs/benchmarks.md, "Entity linking").

``localkg index build`` saves the table in ``DB/indexes/labels/`` (Arrow IPC, memory-mapped);
when it is missing or older than the graph, :func:`label_table_for` reads it from Kùzu
instead. A table answers only for the generation and ``Label`` row count it was built at.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from localkg.indexes.stems import stem
from localkg.store import schema
from localkg.store.keyset import find_sorted, hash_keys
from localkg.store.kg import KG

LABELS = "labels"
#: 4: the hashes are ``keyset.hash_keys``' own 64-bit fold, no longer BLAKE2b-64 (a table of an
#: earlier format is not read; `localkg index build` writes it again).
FORMAT_VERSION = 4
META_FILE = "meta.json"
LABELS_FILE = "labels.arrow"
NAMES_FILE = "names.arrow"
WORDS_FILE = "words.arrow"
POSTINGS_FILE = "postings.arrow"
TABLE_FILES = (LABELS_FILE, NAMES_FILE, WORDS_FILE, POSTINGS_FILE)
SCAN_CHUNK = 200_000
BM25_K1 = 1.2   # Kùzu's (and Lucene's) defaults
BM25_B = 0.75
_WORD = re.compile(r"[^\W_]+")
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have in is it its of on or that the this to was were "
    "will with what which who whom whose when where why how did do does".split())


@dataclass(frozen=True)
class LabelledNode:
    """A node that carries a label as its name or alias, with its name (for display and case) and its
    degree (facts at the node, which break ties between namesakes)."""

    id: str
    name: str
    degree: int


def label_words(text: str) -> list[str]:
    """The words full-text search indexes and matches: case-folded stems.

    >>> label_words("The Directors' Cuts")
    ['the', 'direct', 'cut']
    """
    return [stem(word) for word in _WORD.findall(text.casefold())]


class LabelTable:
    """The labels of one graph generation: text, hash, named nodes and words of every ``Label`` row.

    ``labels``: per Label offset, columns ``label``, ``start``, ``stop`` (its rows in ``names``),
    ``words`` (its length in words, for BM25), and, in hash order, ``sorted_hash`` and
    ``by_hash`` (the offset with that hash).
    ``names``: columns ``node``, ``name`` and ``degree``, grouped by label offset.
    ``words``: per distinct word stem, in hash order, ``hash``, and ``first`` and ``stop`` (its
    rows in ``postings``).
    ``postings``: ``label`` (offset) and ``count`` (occurrences in that label), grouped by word.
    """

    def __init__(self, labels: pa.Table, names: pa.Table, words: pa.Table, postings: pa.Table, generation: int):
        self.generation = generation
        self._label = labels.column("label").combine_chunks()
        self._start = labels.column("start").to_numpy()
        self._stop = labels.column("stop").to_numpy()
        self._length = labels.column("words").to_numpy()
        self._sorted_hash = labels.column("sorted_hash").to_numpy()
        self._by_hash = labels.column("by_hash").to_numpy()
        self._node = names.column("node").combine_chunks()
        self._name = names.column("name").combine_chunks()
        self._degree = names.column("degree").to_numpy()
        self._word_hash = words.column("hash").to_numpy()
        self._word_first = words.column("first").to_numpy()
        self._word_stop = words.column("stop").to_numpy()
        self._posting_label = postings.column("label").to_numpy()
        self._posting_count = postings.column("count").to_numpy()
        self._average_length = float(self._length.mean()) if len(self._length) else 1.0
        self._tables = (labels, names, words, postings)

    def __len__(self) -> int:
        """How many labels (``Label`` rows) the table holds."""
        return len(self._label)

    # ---------------------------------------------------------------- lookups
    def nodes_named(self, keys: Iterable[str]) -> dict[str, list[LabelledNode]]:
        """For each normalised name or alias among ``keys`` that is a label, the nodes it names."""
        keys = list(dict.fromkeys(keys))
        if not keys or len(self) == 0:
            return {}
        positions, present = find_sorted(self._sorted_hash, hash_keys(keys))
        found: dict[str, list[LabelledNode]] = {}
        for key, position, there in zip(keys, positions, present):
            if not there:
                continue
            offset = int(self._by_hash[position])
            if self._label[offset].as_py() == key:  # a 64-bit hash collision would fail here
                found[key] = self._nodes_at(offset)
        return found

    def search(self, text: str, k: int = 10) -> list[tuple[int, float]]:
        """Labels that share words with ``text``, as (``Label`` offset, BM25 score), best first.

        BM25 with k1 = 1.2 and b = 0.75 over the labels' word stems, as Kùzu's full-text index
        scores them; stop words are left out of the query unless it has nothing else.
        """
        words = label_words(text)
        words = list(dict.fromkeys([w for w in words if w not in STOPWORDS] or words))
        positions, present = find_sorted(self._word_hash, hash_keys(words))
        found = positions[present].tolist()
        if not found:
            return []
        labels, weights = [], []
        for position in found:
            first, stop = int(self._word_first[position]), int(self._word_stop[position])
            label, count = self._posting_label[first:stop], self._posting_count[first:stop].astype(np.float64)
            idf = math.log(1.0 + (len(self) - (stop - first) + 0.5) / (stop - first + 0.5))
            norm = BM25_K1 * (1.0 - BM25_B + BM25_B * self._length[label] / self._average_length)
            labels.append(label)
            weights.append(idf * count * (BM25_K1 + 1.0) / (count + norm))
        unique, inverse = np.unique(np.concatenate(labels), return_inverse=True)
        scores = np.bincount(inverse, weights=np.concatenate(weights))
        best = np.lexsort((unique, -scores))[:k]
        return [(int(unique[i]), float(scores[i])) for i in best]

    def label_at(self, offset: int) -> tuple[str, list[LabelledNode]] | None:
        """The label stored at a ``Label`` offset (as :meth:`search` returns it) and its nodes."""
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
        degrees = kg.execute("MATCH (n:Node)-[f:Fact]-() RETURN offset(id(n)) AS node_offset, "
                             "CAST(count(f) AS INT64) AS degree").get_as_arrow(SCAN_CHUNK)
        return cls(*_index_labels(labels, links, degrees), generation)

    def save(self, directory: Path) -> None:
        """Write the Arrow files, then ``meta.json`` (a table without current meta is never read)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / META_FILE).unlink(missing_ok=True)
        for file_name, table in zip(TABLE_FILES, self._tables):
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
        tables = [pa.ipc.open_file(pa.memory_map(str(directory / name))).read_all() for name in TABLE_FILES]
        return cls(*tables, int(meta["generation"]))


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


def _index_labels(labels: pa.Table, links: pa.Table, degrees: pa.Table) -> tuple[pa.Table, ...]:
    """Arrange the scanned labels by offset, the name links (with their nodes' degrees) by label,
    and the labels' words into an inverted index."""
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
    texts = label_text.to_pylist()
    hashes = hash_keys(texts)
    hash_order = np.argsort(hashes, kind="stable")
    words, postings, lengths = _inverted_index(texts)
    label_table = pa.table({
        "label": label_text,
        "start": np.searchsorted(grouped, every, side="left"),
        "stop": np.searchsorted(grouped, every, side="right"),
        "words": lengths,
        "sorted_hash": hashes[hash_order],
        "by_hash": hash_order.astype(np.int64),
    })
    take = pa.array(link_order)
    node_offsets = links.column("node_offset").to_numpy().astype(np.int64)[link_order]
    name_table = pa.table({"node": links.column("node").take(take),
                           "name": pc.fill_null(links.column("name").take(take), ""),
                           "degree": _degree_of(node_offsets, degrees)})
    return label_table.combine_chunks(), name_table.combine_chunks(), words, postings


def _inverted_index(texts: list[str]) -> tuple[pa.Table, pa.Table, np.ndarray]:
    """Per distinct word stem, the labels that contain it and how often; and each label's length."""
    word_of: list[str] = []
    label_of: list[int] = []
    count_of: list[int] = []
    lengths = np.zeros(len(texts), dtype=np.int32)
    for offset, text in enumerate(texts):
        words = label_words(text)
        lengths[offset] = len(words)
        for word, count in Counter(words).items():
            word_of.append(word)
            label_of.append(offset)
            count_of.append(count)
    hashes = hash_keys(word_of)
    order = np.lexsort((np.asarray(label_of, dtype=np.int64), hashes))
    hashes = hashes[order]
    distinct, first = np.unique(hashes, return_index=True)
    words = pa.table({"hash": distinct, "first": first.astype(np.int64),
                      "stop": np.r_[first[1:], len(hashes)][:len(first)].astype(np.int64)})  # none: no words
    postings = pa.table({"label": np.asarray(label_of, dtype=np.int32)[order],
                         "count": np.asarray(count_of, dtype=np.int16)[order]})
    return words, postings, lengths


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
