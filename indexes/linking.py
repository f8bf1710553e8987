"""Entity linking: which nodes of the graph a question is about.

Three sources of candidates, each scored in [0, 1] and merged per node:

* **exact**: a mention's text is a name or alias of the node (the ``Label`` keys, case and
  spacing ignored; a marked mention may also be a node id). Scored by the mention's prior
  (``mentions.py``), so ``[Ginger Rogers]`` scores 1.0 and a stray n-gram less;
* **full-text**: Kùzu BM25 over every name and alias (``fulltext.py``), scored by how much
  of the label the mention covers;
* **vector**: the FAISS entity index, cosine of the mention's embedding to each name.

A node found several ways keeps its best score plus a small bonus per extra source, and
a reason string that says how it was found. Ties between namesakes are broken by how
exactly the case matches and then by degree (a hub is the likelier referent).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from localkg.errors import IndexMissingError
from localkg.indexes import fulltext
from localkg.indexes.build import ENTITIES, embedder_for, index_directory, open_index
from localkg.indexes.embedding import Embedder
from localkg.indexes.mentions import CAPITALISED, FUNCTION_WORDS, MARKED, QUOTED, Mention, detect_mentions
from localkg.indexes.vector_index import VectorIndex
from localkg.store import schema
from localkg.store.kg import KG

FULLTEXT_WEIGHT = 0.8
VECTOR_WEIGHT = 0.9
AGREEMENT_BONUS = 0.03
CASE_BONUS = 0.02
DEGREE_BONUS = 0.01
VECTOR_K = 10
FULLTEXT_K = 20
_WORDS = re.compile(r"\w+")


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

    def add(self, source: str, score: float, reason: str, mention: str, name: str) -> None:
        self.name = self.name or name
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
        self.fulltext = _fulltext_ready(kg)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            if self.vectors is None:
                raise IndexMissingError("no entity index: vector candidates need `localkg index build`")
            self._embedder = embedder_for(self.vectors)
        return self._embedder

    def link(self, question: str, k: int = 5) -> list[LinkCandidate]:
        """Up to ``k`` candidate nodes for ``question``, best first."""
        mentions = detect_mentions(question)
        if not mentions:
            return []
        found: dict[str, _Evidence] = {}

        def note(node_id: str, name: str, source: str, score: float, reason: str, mention: str) -> None:
            found.setdefault(node_id, _Evidence(name, mention)).add(source, score, reason, mention, name)

        self._exact(mentions, note)
        marked = mentions[0].how == MARKED
        if self.fulltext:
            self._full_text(question, mentions, marked, note)
        if self.vectors is not None:
            self._vector(question, mentions, marked, note)
        ranked = self._rank(found)[:k]
        return [LinkCandidate(node_id, evidence.name or self.kg.name(node_id), round(score, 4),
                              "; ".join(evidence.reasons.values()), evidence.mention)
                for node_id, evidence, score in ranked]

    # ---------------------------------------------------------------- sources
    def _exact(self, mentions: list[Mention], note) -> None:
        by_label: dict[str, Mention] = {}
        for mention in mentions:
            key = schema.normalise_label(mention.text)
            if key not in by_label or by_label[key].weight < mention.weight:
                by_label[key] = mention
        rows = self.kg.execute(
            "MATCH (l:Label)-[:Names]->(n:Node) WHERE l.id IN $keys RETURN l.id, n.id, n.name, n.value",
            {"keys": list(by_label)}).get_all()
        for label, node_id, name, value in rows:
            mention = by_label[label]
            score = mention.weight + (CASE_BONUS if (name or "") == mention.text else 0.0)
            note(node_id, name or value or "", "exact", score,
                 f"exact name of {mention.how} mention '{mention.text}' (score={score:.3f})", mention.text)
        for mention in mentions:
            if mention.how == MARKED and self.kg.has_node(mention.text):
                node = self.kg.node(mention.text)
                note(node.id, node.name or node.value, "exact", 1.0 + CASE_BONUS,
                     f"node id '{mention.text}' (score={1.0 + CASE_BONUS:.3f})", mention.text)

    def _full_text(self, question: str, mentions: list[Mention], marked: bool, note) -> None:
        queries = [(m.text, m.weight) for m in mentions] if marked else [(_content_words(question), 1.0)]
        for text, weight in queries:
            query_words = set(_WORDS.findall(text.casefold()))
            for node_id, name, label, bm25 in fulltext.search(self.kg, text, FULLTEXT_K):
                label_words = _WORDS.findall(label)
                if not label_words:
                    continue
                covered = sum(1 for w in label_words if w in query_words) / len(label_words)
                score = FULLTEXT_WEIGHT * weight * covered * (1.0 if marked else 0.9)
                note(node_id, name, "fulltext", score,
                     f"full-text match of '{label}' (BM25 {bm25:.2f}, covered {covered:.2f}, score={score:.3f})",
                     label)

    def _vector(self, question: str, mentions: list[Mention], marked: bool, note) -> None:
        named = [m for m in mentions if m.how in (MARKED, QUOTED, CAPITALISED)][:3]
        queries = [(m.text, m.weight) for m in named] or [(_content_words(question), 0.7)]
        vectors = self.embedder.encode([text for text, _ in queries])
        for (text, weight), hits in zip(queries, self.vectors.search(vectors, VECTOR_K)):
            for node_id, label, cosine in hits:
                score = VECTOR_WEIGHT * weight * max(0.0, cosine)
                note(node_id, "", "vector", score,
                     f"vector similarity {cosine:.3f} of '{text}' to '{label}' (score={score:.3f})", text)

    # ---------------------------------------------------------------- ranking
    def _rank(self, found: dict[str, _Evidence]) -> list[tuple[str, _Evidence, float]]:
        ranked = sorted(((i, e, e.merged) for i, e in found.items()), key=lambda t: (-t[2], t[0]))
        tied = [i for i, _, s in ranked if ranked[0][2] - s < DEGREE_BONUS]
        if len(tied) > 1:
            degrees = self._degrees(tied)
            boost = {i: DEGREE_BONUS * math.log10(1 + degrees.get(i, 0)) / 7 for i in tied}
            ranked = sorted(((i, e, s + boost.get(i, 0.0)) for i, e, s in ranked), key=lambda t: (-t[2], t[0]))
        return ranked

    def _degrees(self, node_ids: list[str]) -> dict[str, int]:
        rows = self.kg.execute("MATCH (n:Node)-[h:HasRel]->(:Relation) WHERE n.id IN $ids RETURN n.id, sum(h.n)",
                               {"ids": node_ids}).get_all()
        return {node_id: int(total) for node_id, total in rows}


def _fulltext_ready(kg: KG) -> bool:
    """Load Kùzu's bundled FTS extension and say whether the label index exists."""
    try:
        fulltext.load_extension(kg)
        return fulltext.has_index(kg)
    except RuntimeError:
        return False


def _content_words(question: str) -> str:
    """The question without question and function words: what full-text and vectors should match."""
    words = _WORDS.findall(question)
    return " ".join(w for w in words if w.casefold() not in FUNCTION_WORDS) or question
