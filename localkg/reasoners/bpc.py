"""Bounded Path Context (Shan & Luo, 2025): the controller keeps the paths, the model sees the last K hops.

Each beam is a path from a topic entity, kept whole by the controller. Per depth every
unfinished beam asks the model which relations to follow from its current entity, showing
only the question, the entity, its relations (at most ``relation_cap``) and the last ``K``
hops (``K=0`` none, ``K=-1`` all); the model names up to ``width`` relations or STOP. Picked
relations' first ``width`` ends become child beams (at most ``max_total_beams`` kept); after
``depth`` rounds an answer-extraction prompt over the best ``answer_paths`` paths answers.

For a small local model and a general store, relations are offered in both directions and
through mediators, ranked by embedding relevance, the choice is grammar-constrained, sibling
beams share one call, and with several topic entities only nodes reached from most of them
are candidates; docs/reasoners.md lists each departure and why.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Annotated, Any, Sequence

import numpy as np

from localkg import prompts
from localkg.reasoners.base import Answer, Reasoner, Result, register
from localkg.reasoners.common import (
    DEFAULT_RELATION_FILTER,
    Move,
    ask_choice,
    ask_scores,
    candidate_moves,
    follow,
    move_option,
    node_of,
    relation_filter,
)
from localkg.reasoners.relation_ranking import RelationRanking, RelationsMode
from localkg.reasoners.settings import NonNegativeFloat, PositiveFloat, PositiveInt, Range
from localkg.store.model import Node, Path
from localkg.text import without_mentions

PROMPTS = "bpc"


@dataclass(frozen=True)
class Beam:
    """A path from ``start`` that the controller keeps whole.

    Beams with the same start and relation chain are *siblings*: they share one relation-selection
    call. ``relevance`` is the embedding relevance of the path's relation words to the question.
    """

    start: Node
    path: Path
    moves: tuple[Move, ...]
    relevance: float = 0.0
    finished: bool = False

    @property
    def current(self) -> Node:
        return self.path.end if self.path.steps else self.start

    @property
    def relation_chain(self) -> tuple[str, tuple[tuple[tuple[str, str], ...], ...]]:
        return self.start.id, tuple(move.steps for move in self.moves)


def render_history(path: Path, k: int) -> str:
    """The last ``k`` hops of ``path`` as the paper prints them (``k=-1``: all; ``k=0``: none)."""
    steps = list(path.steps)
    visible = steps if k < 0 else steps[len(steps) - k:] if k > 0 else []
    if not visible:
        return prompts.render(PROMPTS, "no_history")
    first = len(steps) - len(visible) + 1
    return "\n".join(prompts.render(PROMPTS, "hop", number=first + i, head=step.source.display,
                                    relation=step.relation_text, tail=step.target.display)
                     for i, step in enumerate(visible))


@dataclass(frozen=True)
class BoundedPathContextSettings:
    """Settings of ``bpc``."""

    K: Annotated[int, Range(-1)] = 1  # visible hops: 0 none, -1 all (the paper's best small-model setting: 1)
    width: PositiveInt = 3  # relations per pick and ends per relation
    depth: PositiveInt = 3
    relation_cap: PositiveInt = 50  # relations shown per prompt
    max_total_beams: PositiveInt = 12
    answer_paths: PositiveInt = 8  # paths shown to answer extraction
    max_tails: PositiveInt = 100  # ends fetched per relation (the first `width` become beams)
    answer_weight: NonNegativeFloat = 0.5  # exponent of the model's probability against the path relevance
    depth_penalty: NonNegativeFloat = 0.05  # a relation must beat the chain's relevance by this to rank above STOP
    temperature: PositiveFloat = 0.05
    relation_filter: str = DEFAULT_RELATION_FILTER
    relations: RelationsMode = "auto"  # relation ranking: auto | embed | trained (relation_ranking.py)


@register
class BoundedPathContext(Reasoner):
    """BPC: beams of whole paths; relation-selection prompts see only the last ``K`` hops."""

    name = "bpc"
    Settings = BoundedPathContextSettings

    def __init__(self, context: Any, **overrides: Any):
        super().__init__(context, **overrides)
        self.relations = RelationRanking(context, self.settings.relations)

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        starts = [node_of(self.kg, topic) for topic in topics]
        query = without_mentions(question, [node.display for node in starts])
        keep = relation_filter(self.settings.relation_filter)
        beams = [Beam(node, Path(()), ()) for node in starts]
        reached: list[Beam] = []  # every end a picked relation reached, beamed or not (answer siblings)
        for depth in range(1, self.settings.depth + 1):
            active = [b for b in beams if not b.finished]
            if not active:
                break
            next_beams = [b for b in beams if b.finished]
            for siblings in _siblings(active):
                beamed, ends = self._step(question, query, siblings, keep, depth, result.notes)
                reached.extend(ends)
                next_beams.extend(beamed or [replace(b, finished=True) for b in siblings])
            beams = _cap(next_beams, self.settings.max_total_beams)
            finished = sum(b.finished for b in beams)
            result.notes.append(f"depth {depth}: {len(beams)} beams, {finished} finished")
        with_hops = [b for b in beams if b.path.steps]
        if not with_hops:
            result.notes.append("no answer found: no relation was followed from the topic entities")
            return
        self._answer(question, with_hops, reached, result)

    # ------------------------------------------------------------------ relation selection
    def _step(self, question: str, query: str, siblings: list[Beam], keep: Any, depth: int,
              notes: list[str]) -> tuple[list[Beam], list[Beam]]:
        """One relation-selection call for sibling beams. Returns the child beams (the first ``width``
        ends per beam and picked relation) and every end reached; no children means the beams finish."""
        representative = siblings[0]
        moves = candidate_moves(self.kg, representative.current.id, keep=keep)
        if not moves:
            notes.append(f"depth {depth}: {representative.current.display} has no relation to follow; beam finished")
            return [], []
        ranked = self.relations.rank_moves(query, moves, representative.moves)
        shown = ranked[: self.settings.relation_cap]
        hidden = len(ranked) - len(shown)
        choices: list[tuple[Move, float] | None] = list(shown)  # None is STOP
        if representative.path.steps:  # STOP follows the relations whose chain beats this one by depth_penalty
            choices.insert(sum(1 for _, relevance in shown
                               if relevance > representative.relevance + self.settings.depth_penalty), None)
        options = [prompts.render(PROMPTS, "stop", entity=representative.current.display) if choice is None
                   else move_option(representative.current, choice[0]) for choice in choices]
        prompt = prompts.render(PROMPTS, "select", question=question,
                                history=render_history(representative.path, self.settings.K),
                                entity=representative.current.display,
                                more=prompts.render(PROMPTS, "hidden", count=hidden) if hidden else "")
        picks = ask_choice(self.llm, prompt, options, step=f"select-{depth}", k=self.settings.width,
                           allow_none=True, notes=notes)
        if picks is None:  # the call failed: follow the most relevant relation
            picks = [0]
        if not picks or choices[picks[0]] is None:
            notes.append(f"depth {depth}: {'STOP' if picks else 'no relation picked'} at "
                         f"{representative.current.display}; beam finished")
            return [], []
        # Picks are best first: a STOP after some relations drops only the relations ranked below it
        # (a small model lists "1, 2, 3" with STOP among them far more often than it means to stop).
        picks = list(itertools.takewhile(lambda i: choices[i] is not None, picks))
        beamed: list[Beam] = []
        ends: list[Beam] = []
        for index in picks:
            move, relevance = choices[index]  # type: ignore[misc]  (STOP was handled above)
            for beam in siblings:
                on_path = {beam.start.id} | {step.target.id for step in beam.path.steps}
                children = [Beam(beam.start, Path(beam.path.steps + path.steps), beam.moves + (move,), relevance)
                            for path in follow(self.kg, beam.current, move, limit=self.settings.max_tails)
                            if path.end.id not in on_path]
                ends.extend(children)
                beamed.extend(children[: self.settings.width])
        notes.append(f"depth {depth}: from {representative.current.display} follow "
                     + ", ".join(str(choices[i][0]) for i in picks))  # type: ignore[index]
        return beamed, ends

    # ------------------------------------------------------------------ answer extraction
    def _answer(self, question: str, beams: Sequence[Beam], reached: Sequence[Beam], result: Result) -> None:
        """The model scores the ends of the first ``answer_paths`` paths (finished first, then by
        relevance) against their relevance; the winner's relation chain gives the other answers.

        When some node is reached from several topic entities (a conjunctive question: "the
        defender of club X"), the candidates are the nodes reached from the most of them, and of
        those the closest (fewest hops from those topics in all), and all of them are answers:
        beams from different topics never meet otherwise, and one topic's neighbours alone answer
        the wrong question (docs/reasoners.md).
        """
        hops: dict[str, dict[str, int]] = {}  # end -> topic -> fewest hops from it
        for beam in [*beams, *reached]:
            by_topic = hops.setdefault(beam.current.id, {})
            by_topic[beam.start.id] = min(len(beam.path.steps), by_topic.get(beam.start.id, len(beam.path.steps)))
        topics = {beam.start.id for beam in beams}
        meeting = {end: by_topic for end, by_topic in hops.items() if end not in topics}
        most = max((len(by_topic) for by_topic in meeting.values()), default=0)
        pool = list(beams)
        if most > 1:
            distance = {end: sum(by_topic.values()) for end, by_topic in meeting.items() if len(by_topic) == most}
            closest = min(distance.values())
            pool = [b for b in [*beams, *reached] if distance.get(b.current.id) == closest]
        shown = _dedupe_ends(sorted(pool, key=lambda b: (not b.finished, -b.relevance)))[: self.settings.answer_paths]
        relevance = np.array([b.relevance for b in shown])
        combined = (relevance - relevance.max()) / self.settings.temperature
        if len(shown) > 1:
            prompt = prompts.render(PROMPTS, "answer", question=question,
                                    paths="\n".join(str(b.path) for b in shown))
            probabilities = ask_scores(self.llm, prompt, [b.current.display for b in shown], step="answer",
                                       notes=result.notes)
            if probabilities is not None:
                combined = combined + self.settings.answer_weight * np.log(np.maximum(probabilities, 1e-9))
        winner = shown[int(np.argmax(combined))]
        if most > 1:
            siblings = sorted(pool, key=lambda b: -b.relevance)
        else:
            siblings = [b for b in [*beams, *reached] if b.relation_chain == winner.relation_chain]
        seen: set[str] = set()
        for beam in [winner, *siblings]:
            if beam.current.id in seen or beam.current.id == beam.start.id:
                continue
            seen.add(beam.current.id)
            result.answers.append(Answer(beam.current.id, beam.current.display, round(beam.relevance, 6)))
            result.evidence.append(beam.path)
        result.notes.append(f"answer: {winner.path}")


def _siblings(beams: Sequence[Beam]) -> list[list[Beam]]:
    """Beams grouped by start and relation chain, in order of first appearance."""
    groups: dict[Any, list[Beam]] = {}
    for beam in beams:
        groups.setdefault(beam.relation_chain, []).append(beam)
    return list(groups.values())


def _cap(beams: Sequence[Beam], limit: int) -> list[Beam]:
    """At most ``limit`` beams, unfinished first (the paper's order otherwise)."""
    return sorted(beams, key=lambda b: b.finished)[:limit]


def _dedupe_ends(beams: Sequence[Beam]) -> list[Beam]:
    seen: set[str] = set()
    kept = []
    for beam in beams:
        if beam.current.id not in seen:
            seen.add(beam.current.id)
            kept.append(beam)
    return kept
