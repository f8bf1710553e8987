"""``learned-paths``: answer with the relation path a trained scorer ranks first.

The scorer (``localkg train paths``, ``localkg.path_scorer``) was trained on
question–answer pairs of this store; it ranks the relation paths from the
topic entities (beam search over the relation structure) and the best one is
executed: its end nodes are the answers, each with its evidence path (a
question unlike all the scorer's training pairs is ranked by the paths' label
match alone, and the notes say so). Only
when the two best paths are close (probabilities within ``margin``) and lead
to different answers does the bundled LLM choose among the top
``llm_options`` with one grammar-constrained call, so a question costs at
most one call. ``llm_options=0`` never calls the model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from localkg import prompts
from localkg.reasoners.base import Answer, Reasoner, Result, Uses, register
from localkg.reasoners.common import ask_choice
from localkg.reasoners.settings import NonNegativeInt, PositiveInt, UnitFloat
from localkg.path_scorer.walk import path_text

if TYPE_CHECKING:  # the ranker's features use the reasoners' relation words: imported when first built
    from localkg.path_scorer.ranking import ScoredPath

PROMPTS = "learned_paths"


@dataclass(frozen=True)
class LearnedPathsReasonerSettings:
    """Settings of ``learned-paths``."""

    checkpoint: str = ""
    beam: PositiveInt = 10
    k: PositiveInt = 5
    margin: UnitFloat = 0.2
    llm_options: NonNegativeInt = 3  # routes the model chooses among on a close call (0 or 1: never asked)
    max_answers: PositiveInt = 100
    shown_answers: PositiveInt = 3


@register
class LearnedPathsReasoner(Reasoner):
    """Executes the trained scorer's best relation path; see the module docstring."""

    name = "learned-paths"
    Settings = LearnedPathsReasonerSettings

    def __init__(self, context: Any, **overrides: Any):
        """Loads the scorer now: a checkpoint that is missing, damaged or from another store is a
        :class:`~localkg.errors.CheckpointError` before any question, not one per question."""
        from localkg.path_scorer.ranking import PathRanker

        super().__init__(context, **overrides)
        self.ranker = PathRanker(self.kg, self.settings.checkpoint or None, embedder=self.context.scorer.embedder,
                                 beam=self.settings.beam)

    def uses(self) -> Uses:
        """The path scorer it executes, for the run's record."""
        return super().uses() | Uses({}, (self.ranker.path,))

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        routes = self.ranker.rank_paths(question, topics, k=self.settings.k)
        familiar, nearest = self.ranker.familiar(question, [self.kg.name(topic) for topic in topics])
        if not familiar:
            result.notes.append(f"the question is unlike the scorer's training questions (nearest {nearest:.3f}, "
                                f"below {self.ranker.meta['familiarity'].threshold:.3f}): paths ranked by how "
                                "well their labels match it, not by what the training taught")
        if not routes:
            result.notes.append("no answer found: no relation path from the topic entities reaches another node")
            return
        chosen = self._close_call(question, topics, routes, result) if self._is_close(routes) else routes[0]
        limit = self.settings.max_answers
        result.answers = [Answer(node.id, node.display, chosen.probability) for node in chosen.answers[:limit]]
        result.evidence = [path for walks in chosen.evidence[:limit] for path in walks]
        result.notes.append(f"relation path {chosen} (probability {chosen.probability:.3f}; "
                            f"next: {', '.join(f'{r.probability:.3f}' for r in routes[1:3]) or 'none'})")

    def _is_close(self, routes: list["ScoredPath"]) -> bool:
        return (self.settings.llm_options > 1 and len(routes) > 1
                and routes[0].probability - routes[1].probability < self.settings.margin
                and {n.id for n in routes[0].answers} != {n.id for n in routes[1].answers})

    def _close_call(self, question: str, topics: list[str], routes: list["ScoredPath"], result: Result) -> "ScoredPath":
        """One grammar-constrained choice among the top routes (the scorer's order if it fails)."""
        options = routes[:self.settings.llm_options]
        shown = self.settings.shown_answers
        texts = [" + ".join(path_text(path) for _topic, path in route.legs) + " → "
                 + ", ".join(node.display for node in route.answers[:shown]) for route in options]
        names = ", ".join(self.kg.name(topic) for topic in topics)
        prompt = prompts.render(PROMPTS, "choose_path", question=question, topics=names)
        picked = ask_choice(self.llm, prompt, texts, step="choose path", notes=result.notes)
        if not picked:
            return routes[0]
        result.notes.append(f"close call between the top {len(options)} paths: the model chose option {picked[0] + 1}")
        return options[picked[0]]
