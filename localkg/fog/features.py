"""From graph triples to the scorer's tensors: texts, frozen embeddings, BFS levels.

The same code builds the tensors for training examples and for inference, so the
scorer sees one representation: a node is its display name, a relation is its
readable words (``film.film.directed_by`` → ``film directed by``), and the question
slot holds the question followed by its sub-questions.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Sequence

import numpy as np
import torch

from localkg.fog.model import GraphTensors
from localkg.store.model import Node, Triple
from localkg.text import readable_relation

TripleKey = tuple[str, str, str]


def triple_key(triple: Triple) -> TripleKey:
    """A triple's identity: (head id, relation, tail id)."""
    return triple.head.id, triple.relation, triple.tail.id


@lru_cache(maxsize=100_000)
def relation_words(relation: str) -> str:
    """A relation id as words, the way every reasoner shows it to an embedder."""
    return readable_relation(relation)


@dataclass
class QuestionGraph:
    """One question's subgraph for the scorer: the triples, each node's BFS level from the
    sources, the question texts and (for training) a label per triple: 1 on a gold path, 0 a
    sampled negative, -1 context only (part of the graph, not of the loss), and the answer's
    distance from the sources (the gold relation path's length) with the question text its head
    reads (the topic entities' names taken out)."""

    questions: list[str]
    triples: list[Triple]
    levels: dict[str, int]
    labels: list[float] | None = None
    distance: int | None = None
    distance_question: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def nodes(self) -> list[Node]:
        seen: dict[str, Node] = {}
        for triple in self.triples:
            seen.setdefault(triple.head.id, triple.head)
            seen.setdefault(triple.tail.id, triple.tail)
        return list(seen.values())


def bfs_levels(sources: Iterable[str], triples: Sequence[Triple]) -> dict[str, int]:
    """Undirected BFS distance of every node of ``triples`` from ``sources`` (unreached nodes
    are left out)."""
    adjacent: dict[str, list[str]] = {}
    for triple in triples:
        adjacent.setdefault(triple.head.id, []).append(triple.tail.id)
        adjacent.setdefault(triple.tail.id, []).append(triple.head.id)
    levels = {source: 0 for source in sources}
    frontier = list(levels)
    while frontier:
        following = []
        for node in frontier:
            for other in adjacent.get(node, ()):
                if other not in levels:
                    levels[other] = levels[node] + 1
                    following.append(other)
        frontier = following
    return levels


class TextVectors:
    """Frozen sentence embeddings of texts, cached (least recently used first out)."""

    def __init__(self, embedder: Any, capacity: int = 500_000):
        self.embedder = embedder
        self.capacity = capacity
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def dim(self) -> int:
        return int(self.embedder.dim)

    def warm(self, texts: Iterable[str], batch_size: int = 256, progress: bool = False) -> None:
        """Encode every text not cached yet, in large batches (training precomputes all)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vectors = self.embedder.encode(missing, batch_size=batch_size, progress=progress)
            for text, vector in zip(missing, vectors):
                self._cache[text] = vector
            self._trim()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.warm(texts)
        rows = []
        for text in texts:
            self._cache.move_to_end(text)
            rows.append(self._cache[text])
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)

    def _trim(self) -> None:
        while len(self._cache) > self.capacity:
            self._cache.popitem(last=False)


def graph_texts(graph: QuestionGraph) -> list[str]:
    """Every text the scorer will embed for ``graph`` (for :meth:`TextVectors.warm`)."""
    texts = [*graph.questions, graph.distance_question]
    texts.extend(node.display for node in graph.nodes())
    texts.extend(relation_words(t.relation) for t in graph.triples)
    return texts


def build_tensors(graphs: Sequence[QuestionGraph], vectors: TextVectors) -> GraphTensors:
    """The disjoint union of ``graphs`` as :class:`GraphTensors` (CPU tensors)."""
    node_texts: list[str] = []
    node_level: list[int] = []
    node_graph: list[int] = []
    heads: list[int] = []
    tails: list[int] = []
    relations: list[str] = []
    width = max(len(g.questions) for g in graphs)
    question_vectors = np.zeros((len(graphs), width, vectors.dim), dtype=np.float32)
    padding = np.ones((len(graphs), width), dtype=bool)
    for number, graph in enumerate(graphs):
        question_vectors[number, :len(graph.questions)] = vectors(graph.questions)
        padding[number, :len(graph.questions)] = False
        index: dict[str, int] = {}
        deepest = max(graph.levels.values(), default=0)
        for node in graph.nodes():
            index[node.id] = len(node_texts)
            node_texts.append(node.display)
            node_level.append(graph.levels.get(node.id, deepest + 1))
            node_graph.append(number)
        for triple in graph.triples:
            heads.append(index[triple.head.id])
            tails.append(index[triple.tail.id])
            relations.append(relation_words(triple.relation))
    return GraphTensors(
        node_vectors=torch.from_numpy(vectors(node_texts)),
        node_level=torch.tensor(node_level, dtype=torch.long),
        node_graph=torch.tensor(node_graph, dtype=torch.long),
        head=torch.tensor(heads, dtype=torch.long),
        tail=torch.tensor(tails, dtype=torch.long),
        relation_vectors=torch.from_numpy(vectors(relations)),
        question_vectors=torch.from_numpy(question_vectors),
        question_padding=torch.from_numpy(padding),
    )
