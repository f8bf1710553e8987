"""Which relation chains a question asks for: embedding relevance, or the trained path scorer.

Every reasoner that ranks or prunes relations scores its candidate chains through one
:class:`RelationRanking`, chosen by its ``relations`` setting:

* ``embed``: the frozen encoder's relevance of the chain's relation words to the question
  (:func:`rank_moves`' chain words, :func:`path_similarities`' bag of relations);
* ``trained``: the path scorer ``localkg train paths`` wrote beside the store, its logit as is.
  It was trained on the paths of every length from one topic at once, so its scores compare
  across depths, and the right chain leads by several units: the small depth penalties the
  reasoners add for embedding scores (0.05 a hop) no longer decide which depth answers;
* ``auto`` (the default): ``trained`` when the store has that checkpoint, else ``embed``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np

from localkg.reasoners.base import Uses
from localkg.reasoners.common import Move, rank_moves
from localkg.reasoners.relation_paths import path_similarities
from localkg.path_scorer.location import default_checkpoint
from localkg.store.model import IN, OUT, Path, RelationPath

if TYPE_CHECKING:
    from localkg.path_scorer.ranking import PathRanker

RelationsMode = Literal["auto", "embed", "trained"]

def path_chain(path: Path) -> RelationPath:
    """A walked path's relation chain, what :meth:`RelationRanking.chain_scores` scores."""
    return tuple((step.triple.relation, OUT if step.forward else IN) for step in path.steps)


class RelationRanking:
    """Scores relation chains for a reasoner (see the module docstring)."""

    def __init__(self, context: Any, mode: RelationsMode = "auto", device: str = ""):
        self.context = context
        self._path = default_checkpoint(context.kg.path)
        self.mode = ("trained" if self._path.is_file() else "embed") if mode == "auto" else mode
        self._device = device or "cpu"
        self._ranker: PathRanker | None = None
        if self.mode == "trained":
            self._ranker_for()  # a missing or mismatched checkpoint is refused now, not mid-question

    def uses(self) -> Uses:
        """The mode ``auto`` settled on, and the path scorer when it is the one ranking."""
        return Uses({"relations": self.mode}, (self._path,) if self.mode == "trained" else ())

    @property
    def description(self) -> str:
        """What ranks relations, for a result's notes."""
        return f"relations: {'trained path scorer' if self.mode == 'trained' else 'embedding relevance'}"

    def rank_moves(self, query: str, moves: Sequence[Move], taken: Sequence[Move] = ()) -> list[tuple[Move, float]]:
        """``moves`` out of an entity, each scored as the chain ``taken + move``, best first."""
        if self.mode == "embed":
            return rank_moves(self.context.scorer, query, moves, taken)
        before = tuple(step for move in taken for step in move.steps)
        scores = self._trained(query, [before + move.steps for move in moves])
        order = sorted(range(len(moves)), key=lambda i: -float(scores[i]))
        return [(moves[i], float(scores[i])) for i in order]

    def chain_scores(self, query: str, chains: Sequence[RelationPath], labels: Sequence[tuple[str, ...]]) -> np.ndarray:
        """One score per chain; ``labels`` are each chain's relation words (what ``embed`` reads)."""
        if self.mode == "embed":
            return path_similarities(self.context.scorer, query, labels)
        return self._trained(query, chains)

    def _trained(self, query: str, chains: Sequence[RelationPath]) -> np.ndarray:
        if not chains:
            return np.zeros(0, dtype=np.float32)
        ranker = self._ranker_for()
        return np.array(ranker.score(query, (), [tuple(chain) for chain in chains]), dtype=np.float32)

    def _ranker_for(self) -> "PathRanker":
        if self._ranker is None:
            from localkg.path_scorer.ranking import PathRanker

            self._ranker = PathRanker(self.context.kg, self._path, embedder=self.context.scorer.embedder,
                                      device=self._device)
        return self._ranker
