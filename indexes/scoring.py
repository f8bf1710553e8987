"""Relevance of relations and triples to a question: embedding similarity plus shared word stems.

Reasoners ask this thousands of times per question set ("which of these 100
relations of Top Hat matter for *who directed Top Hat*?"), mostly with the same
question and the same relation labels, so both sides are cached: question
embeddings in a small LRU, text embeddings in a dict. Only texts never seen
before are encoded, in one batch; ranking 100 cached relations is then one
small matrix-vector product.

MiniLM alone confuses relations of one domain: for "who directed Top Hat" it
puts ``starred_actors`` above ``directed_by``, because both read as "about
films" (docs/indexes.md has the measurements). So the score is the cosine plus
``lexical_weight`` times the share of the text's content-word stems that the
question contains ("director" and "directed" share the stem "direct"), the
usual dense-plus-lexical hybrid. ``lexical_weight=0`` gives the plain cosine.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import numpy as np

from localkg.indexes.embedding import Embedder
from localkg.indexes.stems import content_stems

LEXICAL_WEIGHT = 0.2


class RelevanceScorer:
    """Cosine similarity of a query to texts, with both embeddings cached.

    >>> scorer = RelevanceScorer()                                              # doctest: +SKIP
    >>> scorer.rank("who directed Top Hat", ["starred_actors", "directed_by"])  # doctest: +SKIP
    [(1, 0.43), (0, 0.17)]
    """

    def __init__(self, embedder: Embedder | None = None, query_cache_size: int = 4096,
                 text_cache_size: int = 500_000, lexical_weight: float = LEXICAL_WEIGHT):
        self._embedder = embedder
        self._queries: OrderedDict[str, tuple[np.ndarray, frozenset[str]]] = OrderedDict()
        self._texts: dict[str, tuple[np.ndarray, frozenset[str]]] = {}
        self.lexical_weight = lexical_weight
        self.query_cache_size = query_cache_size
        self.text_cache_size = text_cache_size

    @property
    def embedder(self) -> Embedder:
        """The model, loaded on first use so that building a scorer costs nothing."""
        if self._embedder is None:
            self._embedder = Embedder()
        return self._embedder

    def query_vector(self, query: str) -> np.ndarray:
        """The embedding of ``query``, from the LRU cache when it was seen recently."""
        return self._query(query)[0]

    def text_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` as an (n, dim) array; unseen texts are encoded in one batch."""
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.stack([vector for vector, _ in self._text_entries(texts)])

    def cosine(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Plain cosine similarity of ``query`` to each of ``texts``."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        return self.text_vectors(texts) @ self.query_vector(query)

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Relevance of each of ``texts`` to ``query`` (same order): cosine + lexical_weight x stem overlap."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        query_vector, query_stems = self._query(query)
        entries = self._text_entries(texts)
        scores = np.stack([vector for vector, _ in entries]) @ query_vector
        if self.lexical_weight:
            overlap = np.fromiter((len(stems & query_stems) / len(stems) if stems else 0.0 for _, stems in entries),
                                  dtype=np.float32, count=len(entries))
            scores = scores + np.float32(self.lexical_weight) * overlap
        return scores

    def rank(self, query: str, texts: Sequence[str], k: int | None = None) -> list[tuple[int, float]]:
        """``(index into texts, score)`` pairs, best first, at most ``k`` of them."""
        scores = self.score(query, texts)
        order = np.argsort(-scores, kind="stable")
        if k is not None:
            order = order[:k]
        return [(int(i), float(scores[i])) for i in order]

    def _query(self, query: str) -> tuple[np.ndarray, frozenset[str]]:
        entry = self._queries.get(query)
        if entry is not None:
            self._queries.move_to_end(query)
            return entry
        entry = self._queries[query] = (self.embedder.encode([query])[0], content_stems(query))
        if len(self._queries) > self.query_cache_size:
            self._queries.popitem(last=False)
        return entry

    def _text_entries(self, texts: Sequence[str]) -> list[tuple[np.ndarray, frozenset[str]]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._texts))
        if missing:
            if len(self._texts) + len(missing) > self.text_cache_size:
                self._forget_oldest_texts(len(missing))
            for text, vector in zip(missing, self.embedder.encode(missing)):
                self._texts[text] = (vector, content_stems(text))
        return [self._texts[t] for t in texts]

    def _forget_oldest_texts(self, room: int) -> None:
        """Keep memory bounded on long runs: drop the oldest half (or more) of the text cache."""
        keep = max(0, min(len(self._texts) // 2, self.text_cache_size - room))
        for text in list(self._texts)[: len(self._texts) - keep]:
            del self._texts[text]
