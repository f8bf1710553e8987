"""Entity linking: which nodes of the graph a question is about.

Three sources of candidates, each scored in [0, 1] and merged per node: **exact** (a mention
is a name or alias of the node, or a marked node id; scored by the mention's prior,
``mentions.py``), **full-text** (BM25 over every name and alias in the label table) and
**vector** (the FAISS entity index, for names written differently from the graph's; asked
only about mentions no name matches exactly, which halves such a link's time). A node found
several ways keeps its best score plus a small bonus per extra source and a reason string;
ties between namesakes go to the exact case, then the higher degree.

Names and full-text hits resolve in memory (``label_table.py``); one primary-key query per
question fetches the rest, and the mention's embedding runs in a worker thread meanwhile.
docs/indexes.md and docs/benchmarks.md ("Entity linking") have the measurements.
"""
from __future__ import annotations

import math
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Sequence

from localkg.errors import IndexMissingError, UnknownEntityError
from localkg.indexes.build import ENTITIES, embedder_for, index_directory, open_index
from localkg.indexes.embedding import Embedder
from localkg.indexes.label_table import LabelTable, label_table_for
from localkg.indexes.mentions import CAPITALISED, FUNCTION_WORDS, MARKED, QUOTED, Mention, detect_mentions
from localkg.indexes.vector_index import VectorIndex
from localkg.store import schema
from localkg.store.kg import KG
from localkg.store.model import Node

FULLTEXT_WEIGHT = 0.8
VECTOR_WEIGHT = 0.9
AGREEMENT_BONUS = 0.03
CASE_BONUS = 0.02
DEGREE_BONUS = 0.01
VECTOR_K = 10
FULLTEXT_K = 20
PRIMARY_KEY_BATCH = 20
_WORDS = re.compile(r"\w+")

Note = Callable[..., None]
VectorHits = list[tuple[tuple[str, float], list[tuple[str, str, float]]]]


@dataclass(frozen=True)
class LinkCandidate:
    """A node the question may be about, how sure, why, and which words of the question named it."""

    id: str
    name: str
    score: float
    reason: str
    mention: str


@dataclass
class _Evidence:
    """What the sources said about one node: the best score per source, and why."""

    name: str
    mention: str
    best: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    degree: int | None = None

    def add(self, source: str, score: float, reason: str, mention: str, name: str, degree: int | None) -> None:
        self.name = self.name or name
        self.degree = degree if self.degree is None else self.degree
        if score > self.best:
            self.best, self.mention = score, mention
        if score > self.scores.get(source, -1.0):
            self.scores[source], self.reasons[source] = score, reason

    @property
    def merged(self) -> float:
        """The best source's score, plus a little for each other source that agrees."""
        return self.best + AGREEMENT_BONUS * (len(self.scores) - 1)


class EntityLinker:
    """Links questions to nodes of ``kg`` by exact names, full-text search and (when built) vectors.

    The FAISS entity index is used when ``localkg index build`` made one; a stale one raises
    :class:`StaleIndexError` rather than silently missing the new entities. Without it the
    linker uses exact names and full-text search only.
    """

    def __init__(self, kg: KG, embedder: Embedder | None = None):
        self.kg = kg
        self._embedder = embedder
        self.vectors: VectorIndex | None = None
        if VectorIndex.exists(index_directory(kg, ENTITIES)):
            self.vectors = open_index(kg, ENTITIES, embedder.model_name if embedder else None)
        self._labels: LabelTable | None = None
        self._worker: ThreadPoolExecutor | None = None

    @property
    def embedder(self) -> Embedder:
        """The encoder questions are embedded with to search the entity index: the one given, else
        the index's own, loaded on first use; :class:`IndexMissingError` without an index."""
        if self._embedder is None:
            if self.vectors is None:
                raise IndexMissingError("no entity index: vector candidates need `localkg index build`")
            self._embedder = embedder_for(self.vectors)
        return self._embedder

    @property
    def labels(self) -> LabelTable:
        """The graph's names and aliases, (re)read when a load changed the graph since."""
        if self._labels is None or self._labels.generation != self.kg.generation:
            self._labels = label_table_for(self.kg)
        return self._labels

    def link(self, question: str, k: int = 5) -> list[LinkCandidate]:
        """Up to ``k`` candidate nodes for ``question``, best first."""
        mentions = detect_mentions(question)
        if not mentions:
            return []
        found: dict[str, _Evidence] = {}

        def note(node_id: str, name: str, source: str, score: float, reason: str, mention: str,
                 degree: int | None = None) -> None:
            found.setdefault(node_id, _Evidence(name, mention)).add(source, score, reason, mention, name, degree)

        marked = mentions[0].how == MARKED
        labels = self.labels  # once per call: checking the generation reads the manifest
        named_exactly = self._exact(mentions, labels, note)
        vector_hits = (self._start_vector_search(question, mentions, named_exactly)
                       if self.vectors is not None else None)
        self._full_text(question, mentions, marked, labels, note)
        if vector_hits is not None:
            self._vector(vector_hits.result(), note)
        ranked = self._rank(found)[:k]
        names = self._display_names([node_id for node_id, evidence, _ in ranked if not evidence.name])
        return [LinkCandidate(node_id, evidence.name or names.get(node_id, node_id), round(score, 4),
                              "; ".join(evidence.reasons.values()), evidence.mention)
                for node_id, evidence, score in ranked]

    # ---------------------------------------------------------------- sources
    def _exact(self, mentions: list[Mention], labels: LabelTable, note: Note) -> set[str]:
        """Note the nodes that mentions name exactly; return the texts of those mentions."""
        by_label: dict[str, Mention] = {}
        for mention in mentions:
            key = schema.normalise_label(mention.text)
            if key not in by_label or by_label[key].weight < mention.weight:
                by_label[key] = mention
        found = labels.nodes_named(by_label)
        for label, nodes in found.items():
            mention = by_label[label]
            for node in nodes:
                score = mention.weight + (CASE_BONUS if node.name == mention.text else 0.0)
                note(node.id, node.name, "exact", score,
                     f"exact name of {mention.how} mention '{mention.text}' (score={score:.3f})", mention.text,
                     node.degree)
        marked_ids = [mention.text for mention in mentions if mention.how == MARKED]
        by_id = self._nodes_by_id(marked_ids)
        for node in by_id.values():
            note(node.id, node.name, "exact", 1.0 + CASE_BONUS,
                 f"node id '{node.id}' (score={1.0 + CASE_BONUS:.3f})", node.id)
        return {m.text for m in mentions if schema.normalise_label(m.text) in found or m.text in by_id}

    def _full_text(self, question: str, mentions: list[Mention], marked: bool, labels: LabelTable,
                   note: Note) -> None:
        queries = [(m.text, m.weight) for m in mentions] if marked else [(_content_words(question), 1.0)]
        for text, weight in queries:
            query_words = set(_WORDS.findall(text.casefold()))
            hits = []
            for offset, bm25 in labels.search(text, FULLTEXT_K):
                label, nodes = labels.label_at(offset) or ("", [])
                hits.extend((node.id, node.name, label, bm25, node.degree) for node in nodes)
            for node_id, name, label, bm25, degree in sorted(hits, key=lambda hit: (-hit[3], hit[0])):
                label_words = _WORDS.findall(label)
                if not label_words:
                    continue
                covered = sum(1 for w in label_words if w in query_words) / len(label_words)
                score = FULLTEXT_WEIGHT * weight * covered * (1.0 if marked else 0.9)
                note(node_id, name, "fulltext", score,
                     f"full-text match of '{label}' (BM25 {bm25:.2f}, covered {covered:.2f}, score={score:.3f})",
                     label, degree)

    def _start_vector_search(self, question: str, mentions: list[Mention], named_exactly: set[str]) -> Future | None:
        """Embed what no name matched and search FAISS in a worker thread, while the rest is scored.

        The named mentions (marked, quoted, capitalised) that no label matches exactly, or the
        question's content words when it names nothing; None when every named mention matched.
        """
        named = [m for m in mentions if m.how in (MARKED, QUOTED, CAPITALISED)]
        unmatched = [m for m in named if m.text not in named_exactly][:3]
        if named and not unmatched:
            return None
        queries = [(m.text, m.weight) for m in unmatched] or [(_content_words(question), 0.7)]
        vectors, embedder = self.vectors, self.embedder
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="localkg-link")

        def search() -> VectorHits:
            encoded = embedder.encode([text for text, _ in queries])
            return list(zip(queries, vectors.search(encoded, VECTOR_K)))

        return self._worker.submit(search)

    def _vector(self, hits: VectorHits, note: Note) -> None:
        for (text, weight), found in hits:
            for node_id, label, cosine in found:
                score = VECTOR_WEIGHT * weight * max(0.0, cosine)
                note(node_id, "", "vector", score,
                     f"vector similarity {cosine:.3f} of '{text}' to '{label}' (score={score:.3f})", text)

    # ---------------------------------------------------------------- ranking
    def _rank(self, found: dict[str, _Evidence]) -> list[tuple[str, _Evidence, float]]:
        ranked = sorted(((i, e, e.merged) for i, e in found.items()), key=lambda t: (-t[2], t[0]))
        tied = [i for i, _, s in ranked if ranked[0][2] - s < DEGREE_BONUS]
        if len(tied) > 1:
            degrees = {i: found[i].degree for i in tied if found[i].degree is not None}
            degrees.update(self._degrees([i for i in tied if i not in degrees]))
            boost = {i: DEGREE_BONUS * math.log10(1 + degrees.get(i, 0)) / 7 for i in tied}
            ranked = sorted(((i, e, s + boost.get(i, 0.0)) for i, e, s in ranked), key=lambda t: (-t[2], t[0]))
        return ranked

    # ---------------------------------------------------------------- primary-key lookups
    def _degrees(self, node_ids: list[str]) -> dict[str, int]:
        """Facts at each node, for nodes the label table did not describe (found by vectors only)."""
        degrees: dict[str, int] = {}
        for node_id in node_ids:
            try:
                degrees[node_id] = sum(relation.count for relation in self.kg.relations(node_id))
            except UnknownEntityError:  # in a stale vector index, no longer in the graph
                continue
        return degrees

    def _nodes_by_id(self, node_ids: list[str]) -> dict[str, Node]:
        """The nodes among ``node_ids`` that exist, with their display names."""
        rows = _by_primary_key(self.kg, "MATCH (n:Node {{id: {key}}}) RETURN n.id AS id, n.name AS name, "
                                        "n.value AS value, n.kind AS kind", node_ids)
        return {node_id: Node(node_id, name or value or "", kind) for node_id, name, value, kind in rows}

    def _display_names(self, node_ids: list[str]) -> dict[str, str]:
        return {node_id: node.display for node_id, node in self._nodes_by_id(node_ids).items()}


def _by_primary_key(kg: KG, template: str, keys: Sequence[str]) -> list[list]:
    """Run ``template`` for each key in one query per :data:`PRIMARY_KEY_BATCH` keys.

    The branches are joined with ``UNION ALL``, each with its key as a parameter (``$k0``,
    ``$k1``, ...; ``{key}`` in the template). Why not ``WHERE n.id IN $keys`` or ``UNWIND``:
    Kùzu 0.11 uses the primary-key index only for a single key, and those forms scan the whole
    table (233 ms for 5 ids among 1.6M nodes, against 1.6 ms for 5 ``UNION ALL`` branches).
    """
    keys = list(dict.fromkeys(keys))
    rows: list[list] = []
    for start in range(0, len(keys), PRIMARY_KEY_BATCH):
        batch = keys[start:start + PRIMARY_KEY_BATCH]
        query = " UNION ALL ".join(template.format(key=f"$k{i}") for i in range(len(batch)))
        rows.extend(kg.execute(query, {f"k{i}": key for i, key in enumerate(batch)}).get_all())
    return rows


def _content_words(question: str) -> str:
    """The question without question and function words: what full-text and vectors should match."""
    words = _WORDS.findall(question)
    return " ".join(w for w in words if w.casefold() not in FUNCTION_WORDS) or question
