"""What the path scorer reads: the masked question and each path's hops as tensors.

The encoder is frozen, so every question is embedded once and every relation
label once (``RelationVectors`` keeps them); training epochs and the
reasoner's questions then only run the small scorer.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
import torch

from localkg.indexes.stems import content_stems

from localkg.retrieval.walk import RelationPath
from localkg.store.kg import KG
from localkg.store.model import IN
from localkg.text import readable_relation, without_mentions


def question_text(question: str, topic_names: Iterable[str]) -> str:
    """The question as the scorer sees it: without the topics' names, which every path shares."""
    return without_mentions(question, topic_names)


class RelationVectors:
    """The frozen encoder's vector of each relation's readable label, computed on first use."""

    def __init__(self, kg: KG, embedder: Any):
        self.embedder = embedder
        self._labels = {relation: label for relation, label, _description, _facts in kg.relation_catalogue()}
        self._index: dict[str, int] = {}
        self._stems: dict[str, frozenset[str]] = {}
        self._vectors: list[np.ndarray] = []
        self._matrix: torch.Tensor | None = None

    def indices(self, relations: Iterable[str]) -> list[int]:
        """Rows of :attr:`matrix` for ``relations`` (labels not seen before are embedded now)."""
        relations = list(relations)
        missing = list(dict.fromkeys(r for r in relations if r not in self._index))
        if missing:
            texts = [readable_relation(self._labels.get(r, r)) for r in missing]
            for relation, text, vector in zip(missing, texts, self.embedder.encode(texts)):
                self._stems[relation] = content_stems(text)
                self._index[relation] = len(self._vectors)
                self._vectors.append(vector)
            self._matrix = None
        return [self._index[r] for r in relations]

    def said(self, relation: str, question_stems: frozenset[str]) -> float:
        """The share of ``relation``'s label words (stems) that the question says."""
        stems = self._stems[relation]
        return len(stems & question_stems) / len(stems) if stems else 0.0

    @property
    def matrix(self) -> torch.Tensor:
        if self._matrix is None:
            self._matrix = torch.from_numpy(np.stack(self._vectors)) if self._vectors else torch.zeros(0)
        return self._matrix


PathTensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def path_tensors(paths: Sequence[RelationPath], question: str, vectors: RelationVectors,
                 types: dict[RelationPath, int], hops: int | None = None) -> PathTensors:
    """(relation index, walked backwards, share of the label the question says, hop exists)
    tensors of shape (len(paths), hops), and each path's row in ``types`` (0: not in it)."""
    width = hops or max((len(p) for p in paths), default=1)
    relations = torch.zeros((len(paths), width), dtype=torch.long)
    backward = torch.zeros((len(paths), width), dtype=torch.bool)
    said = torch.zeros((len(paths), width), dtype=torch.float32)
    mask = torch.zeros((len(paths), width), dtype=torch.bool)
    rows = vectors.indices(relation for path in paths for relation, _direction in path)
    question_stems = content_stems(question)
    position = 0
    for row, path in enumerate(paths):
        for column, (relation, direction) in enumerate(path):
            relations[row, column] = rows[position]
            backward[row, column] = direction == IN
            said[row, column] = vectors.said(relation, question_stems)
            mask[row, column] = True
            position += 1
    return relations, backward, said, mask, torch.tensor([types.get(path, 0) for path in paths], dtype=torch.long)
