"""Whether a question is like the question–answer pairs a scorer was trained on.

A scorer trained on one kind of question (WC-C's two-topic questions, MetaQA's 1- and 2-hop
ones) learns their chain lengths with great confidence and answers every other kind with them,
worse than no training at all. So a checkpoint trained on pairs keeps their encoded questions
(topic names taken out, as the scorer sees them) and a threshold: the 1st percentile of each
pair's cosine to its nearest other pair. A question whose nearest pair is less similar than that
is unlike every pair, and the scorer ranks its paths by the untrained label match alone
(``model.PathScorer.prior``). The threshold comes from the pairs themselves, so it is as strict
as the pairs are alike, whatever their wording. A scorer trained on the store's own questions
alone keeps those questions instead: they cover every relation and length, but only in the
generic phrasings they were made with, and a learned part fitted to the labels' own words
misleads on a user's wording that does not say them.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

#: How many pairs' vectors a checkpoint keeps at most (a seeded sample beyond).
KEPT = 4096
#: The share of pairs that are less like the others than the threshold is.
PERCENTILE = 0.01
#: The vectors are kept as float16, about three decimal digits: a question worded as a pair is
#: that pair, though its cosine to the stored vector comes out a little below 1.
ROUNDING = 1e-3


@dataclass(frozen=True)
class Familiarity:
    """The pairs' unit question vectors (n, dim; float32 in memory, float16 in a checkpoint) and the
    cosine a question must reach to one of them."""

    vectors: torch.Tensor
    threshold: float

    @classmethod
    def of_pairs(cls, vectors: torch.Tensor, rng: random.Random) -> "Familiarity | None":
        """From the encoded questions of the training pairs; None for fewer than two."""
        if len(vectors) < 2:
            return None
        if len(vectors) > KEPT:
            vectors = vectors[sorted(rng.sample(range(len(vectors)), KEPT))]
        units = torch.nn.functional.normalize(vectors.float().cpu(), dim=-1)
        similarity = units @ units.T
        similarity.fill_diagonal_(-1.0)
        nearest = similarity.max(dim=1).values
        return cls(units, float(torch.quantile(nearest, PERCENTILE)))

    def nearest(self, question: torch.Tensor) -> float:
        """The cosine of the encoded ``question`` (dim,) to its nearest training pair."""
        unit = torch.nn.functional.normalize(question.float().reshape(-1).cpu(), dim=0)
        return float((self.vectors @ unit).max())

    def knows(self, question: torch.Tensor) -> tuple[bool, float]:
        """Whether the encoded ``question`` is like a training pair, and its cosine to the nearest."""
        nearest = self.nearest(question)
        return nearest >= self.threshold - ROUNDING, nearest

    def to_checkpoint(self) -> dict[str, Any]:
        return {"vectors": self.vectors.half(), "threshold": self.threshold}

    @classmethod
    def from_checkpoint(cls, data: dict[str, Any] | None) -> "Familiarity | None":
        """What :meth:`to_checkpoint` wrote; None for a checkpoint without pairs (or written
        before the gate), whose scorer then ranks every question with all it learned."""
        return cls(data["vectors"].float(), float(data["threshold"])) if data else None
