"""Relevance of relations and triples to a question, by embedding similarity.

Reasoners ask this thousands of times per question set ("which of these 100
relations of Top Hat matter for *who directed Top Hat*?"), mostly with the same
question and the same relation labels, so both sides are cached: question
embeddings in a small LRU, text embeddings in a dict. Only texts never seen
before are encoded, in one batch; ranking 100 cached relations is then one
small matrix-vector product.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import numpy as np

from localkg.indexes.embedding import Embedder


class RelevanceScorer:
    """Cosine similarity of a query to texts, with both embeddings cached.

    >>> scorer = RelevanceScorer()                                              # doctest: +SKIP
    >>> scorer.rank("who directed Top Hat", ["starred_actors", "directed_by"])  # doctest: +SKIP
    [(1, 0.43), (0, 0.17)]
    """

    def __init__(self, embedder: Embedder | None = None, query_cache_size: int = 4096,
                 text_cache_size: int = 500_000):
        self._embedder = embedder
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._texts: dict[str, np.ndarray] = {}
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
        vector = self._queries.get(query)
        if vector is not None:
            self._queries.move_to_end(query)
            return vector
        vector = self.embedder.encode([query])[0]
        self._queries[query] = vector
        if len(self._queries) > self.query_cache_size:
            self._queries.popitem(last=False)
        return vector

    def text_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` as an (n, dim) array; unseen texts are encoded in one batch."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._texts))
        if missing:
            if len(self._texts) + len(missing) > self.text_cache_size:
                self._forget_oldest_texts(len(missing))
            for text, vector in zip(missing, self.embedder.encode(missing)):
                self._texts[text] = vector
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.stack([self._texts[t] for t in texts])

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Cosine similarity of ``query`` to each of ``texts`` (same order), float32."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        return self.text_vectors(texts) @ self.query_vector(query)

    def rank(self, query: str, texts: Sequence[str], k: int | None = None) -> list[tuple[int, float]]:
        """``(index into texts, score)`` pairs, best first, at most ``k`` of them."""
        scores = self.score(query, texts)
        order = np.argsort(-scores, kind="stable")
        if k is not None:
            order = order[:k]
        return [(int(i), float(scores[i])) for i in order]

    def _forget_oldest_texts(self, room: int) -> None:
        """Keep memory bounded on long runs: drop the oldest half (or more) of the text cache."""
        keep = max(0, min(len(self._texts) // 2, self.text_cache_size - room))
        for text in list(self._texts)[: len(self._texts) - keep]:
            del self._texts[text]
