"""What the path scorer reads: the masked question and each path's hops as tensors.

The encoder is frozen, so every question is embedded once and every relation
label once (``RelationVectors`` keeps them); training epochs and the
reasoner's questions then only run the small scorer.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
import torch

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
        self._vectors: list[np.ndarray] = []
        self._matrix: torch.Tensor | None = None

    def indices(self, relations: Iterable[str]) -> list[int]:
        """Rows of :attr:`matrix` for ``relations`` (labels not seen before are embedded now)."""
        relations = list(relations)
        missing = list(dict.fromkeys(r for r in relations if r not in self._index))
        if missing:
            texts = [readable_relation(self._labels.get(r, r)) for r in missing]
            for relation, vector in zip(missing, self.embedder.encode(texts)):
                self._index[relation] = len(self._vectors)
                self._vectors.append(vector)
            self._matrix = None
        return [self._index[r] for r in relations]

    @property
    def matrix(self) -> torch.Tensor:
        if self._matrix is None:
            self._matrix = torch.from_numpy(np.stack(self._vectors)) if self._vectors else torch.zeros(0)
        return self._matrix


def path_tensors(paths: Sequence[RelationPath], vectors: RelationVectors,
                 hops: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(relation index, walked backwards, hop exists) tensors of shape (len(paths), hops)."""
    width = hops or max((len(p) for p in paths), default=1)
    relations = torch.zeros((len(paths), width), dtype=torch.long)
    backward = torch.zeros((len(paths), width), dtype=torch.bool)
    mask = torch.zeros((len(paths), width), dtype=torch.bool)
    rows = vectors.indices(relation for path in paths for relation, _direction in path)
    position = 0
    for row, path in enumerate(paths):
        for column, (_relation, direction) in enumerate(path):
            relations[row, column] = rows[position]
            backward[row, column] = direction == IN
            mask[row, column] = True
            position += 1
    return relations, backward, mask
