"""The answer distance from a trained fog checkpoint, for reasoners whose depth it may decide.

Why a shared piece: with the 270M model, tog's sufficiency check and paths's are noise
(P(yes) barely moves between a sufficient and an insufficient stage), so the depth they stop
at is what fails most (docs/results.md). The fog checkpoint's answer-distance head reads the
question without its topic names and predicts how many hops out the answer lies; a reasoner
with ``depth_from=distance`` explores that depth and asks no sufficiency question.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from localkg.errors import CheckpointError
from localkg.fog.location import checkpoint_location
from localkg.reasoners.base import Uses

if TYPE_CHECKING:
    from localkg.fog.scoring import TrainedTripleScorer

#: Where tog and paths take the search depth from: ``model``, the papers' sufficiency check, or
#: ``distance``, a trained answer-distance head.
DepthSource = Literal["model", "distance"]


@dataclass(frozen=True)
class DistanceSettings:
    """The settings of a reasoner that can take its depth from the answer-distance head."""

    depth_from: DepthSource = "model"  # model: the paper's sufficiency check; distance: a trained answer-distance head
    checkpoint: str = ""  # depth_from=distance: the fog checkpoint ("" → <db>/fog/scorer.pt)
    device: str = ""


class AnswerDistance:
    """P(the answer lies d hops out), d = 0..L, from the fog checkpoint of a reasoner's
    :class:`DistanceSettings` (``checkpoint`` "" → the database's ``fog/scorer.pt``).

    With ``depth_from=distance`` the checkpoint is loaded when the reasoner is built: one that is
    missing, damaged or has no answer-distance head is a :class:`CheckpointError` then, since
    every question would fail the same way (an evaluation must stop, not score them unanswered).
    """

    def __init__(self, context: Any, settings: DistanceSettings):
        self._path = checkpoint_location(settings.checkpoint, context.kg.path)
        self._scorer: TrainedTripleScorer | None = None
        if settings.depth_from == "distance":
            self._scorer = self._load(self._path, context.scorer.embedder, settings.device)

    @staticmethod
    def _load(path: Any, embedder: Any, device: str) -> "TrainedTripleScorer":
        from localkg.fog.scoring import TrainedTripleScorer  # torch and the model code: only for depth_from=distance

        try:
            scorer = TrainedTripleScorer.from_checkpoint(path, embedder, device)
        except CheckpointError as error:
            raise CheckpointError(f"depth_from=distance needs a trained fog checkpoint: {error}") from None
        if scorer.model.distance_head is None:
            raise CheckpointError(f"depth_from=distance needs a fog checkpoint with an answer-distance head; {path} "
                                  "has none (retrain with `localkg train fog`)")
        return scorer

    def uses(self) -> Uses:
        """The fog checkpoint, when the depth comes from it."""
        return Uses({}, (self._path,)) if self._scorer is not None else Uses()

    def predict(self, query: str) -> np.ndarray:
        """The distance probabilities for ``query`` (the question without its topic names); only
        for a reasoner built with ``depth_from=distance``."""
        return self._scorer.answer_distance(query)  # type: ignore[union-attr,return-value]


def likely_depth(distance: np.ndarray, cap: int) -> int:
    """The most likely answer distance beyond 0 hops, at most ``cap``.

    >>> likely_depth(np.array([0.0, 0.9, 0.08, 0.02]), 3)
    1
    >>> likely_depth(np.array([0.0, 0.37, 0.63, 0.0]), 3)
    2
    >>> likely_depth(np.array([0.0, 0.0, 0.0, 0.1, 0.9]), 3)
    3
    """
    return min(cap, int(np.argmax(np.asarray(distance[1:]))) + 1)


def describe(distance: np.ndarray, depth: int) -> str:
    """The note a reasoner keeps: ``answer distance 0: 0.00, 1: 0.97, ...; exploring 1 hops``."""
    return "answer distance " + ", ".join(f"{d}: {p:.2f}" for d, p in enumerate(distance)) + f"; exploring {depth} hops"
