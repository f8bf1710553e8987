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
    """P(the answer lies d hops out), d = 0..L, from the checkpoint at ``checkpoint`` ("" → the
    database's ``fog/scorer.pt``), loaded on first use."""

    def __init__(self, context: Any, checkpoint: str, device: str):
        self.context = context
        self.checkpoint = checkpoint
        self.device = device
        self._scorer: TrainedTripleScorer | None = None

    def predict(self, query: str) -> tuple[np.ndarray | None, str]:
        """``(probabilities, "")`` for ``query`` (the question without its topic names), or
        ``(None, reason)`` when there is no usable checkpoint, the reason ready for a "no answer
        found" note."""
        from localkg.fog.scoring import TrainedTripleScorer  # torch and the model code: only for depth_from=distance

        try:
            if self._scorer is None:
                path = checkpoint_location(self.checkpoint, self.context.kg.path)
                self._scorer = TrainedTripleScorer.from_checkpoint(path, self.context.scorer.embedder, self.device)
        except CheckpointError as error:
            return None, f"depth_from=distance needs a trained fog checkpoint: {error}"
        distance = self._scorer.answer_distance(query)
        if distance is None:
            return None, ("depth_from=distance needs a fog checkpoint with an answer-distance head "
                          "(retrain with `localkg train fog`)")
        return distance, ""


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
