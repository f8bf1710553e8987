"""Think-on-Graph (Sun et al., ICLR 2024): beam search over the graph with the LLM in the loop.

Per depth: *relation exploration* (both directions, filtered relations left out), *relation
pruning* (the ``width`` best per entity), *entity exploration*, *entity pruning* (a chain scores
relation x entity; the ``width`` best chains are kept), then a *sufficiency check*; on "yes" the
answer is read from the paths, else the next depth starts.

For a small local model: relations are pruned by embedding relevance (``prune=embed``), by the
LLM over an embedding shortlist as in the paper (``llm``) or both (``hybrid``); the answer is a
graph node the model picks among the chains' ends, weighted by their scores; the search also stops
when a depth matches no better than the last (``stop_without_gain``); ``skip_reverse`` is the
paper's no-reverse rule; literals can be answers and mediators are hopped through. With
``depth_from=distance`` the depth comes from the fog checkpoint's answer-distance head.
docs/reasoners.md lists every adaptation and its reason.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np

from localkg import prompts
from localkg.reasoners.base import Answer, Reasoner, Result, register
from localkg.reasoners.common import (
    DEFAULT_RELATION_FILTER,
    Move,
    ask_scores,
    ask_yes_no,
    candidate_moves,
    follow,
    move_option,
    node_of,
    path_words,
    relation_filter,
)
from localkg.reasoners.distance import AnswerDistance, DistanceSettings, describe, likely_depth
from localkg.reasoners.relation_ranking import RelationRanking, RelationsMode
from localkg.reasoners.settings import NonNegativeFloat, PositiveFloat, PositiveInt
from localkg.store.model import Node, Path
from localkg.text import without_mentions

PROMPTS = "tog"


@dataclass(frozen=True)
class Chain:
    """A path from a topic entity kept in (or considered for) the beam.

    ``moves`` are the relation moves it took (its *relation chain*; paths with the same
    topic and moves answer the same way), ``score`` the
    ToG score of its last expansion (relation score x entity score), ``relevance`` the
    embedding relevance of the whole relation chain to the question (comparable across
    depths, unlike ``score``).
    """

    topic: str
    path: Path
    moves: tuple[Move, ...]
    score: float
    relevance: float = 0.0

    @property
    def end(self) -> Node:
        return self.path.end

    @property
    def relation_chain(self) -> tuple[str, tuple[tuple[tuple[str, str], ...], ...]]:
        return self.topic, tuple(move.steps for move in self.moves)

    def nodes(self) -> set[str]:
        return {self.topic} | {step.target.id for step in self.path.steps}


@dataclass(frozen=True)
class ThinkOnGraphSettings(DistanceSettings):
    """Settings of ``tog``."""

    width: PositiveInt = 3  # the paper's beam width (relations per entity and chains kept)
    depth: PositiveInt = 3  # the paper's maximum depth
    prune: Literal["embed", "llm", "hybrid"] = "embed"  # relation pruning: embed | llm (the paper's) | hybrid
    relation_options: PositiveInt = 5  # relations shown to the model per entity (prune=llm/hybrid)
    max_tails: PositiveInt = 100  # ends fetched per kept relation (the paper samples when there are many)
    temperature: PositiveFloat = 0.05  # turns embedding relevance into ToG-style scores (softmax)
    answer_options: PositiveInt = 6  # chain ends the model chooses among
    answer_weight: NonNegativeFloat = 0.5  # exponent of the model's probability against the graph score
    relation_filter: str = DEFAULT_RELATION_FILTER
    depth_penalty: NonNegativeFloat = 0.05  # relevance lost per extra hop when answers of several depths compete
    stop_without_gain: bool = True  # stop when a depth's best chain matches no better than the last depth's
    skip_reverse: bool = False  # the paper's rule: never offer the reverse of the relation just taken
    relations: RelationsMode = "auto"  # relation ranking: auto | embed | trained (relation_ranking.py)


@register
class ThinkOnGraph(Reasoner):
    """Think-on-Graph: width-``width`` beam over relation chains up to ``depth`` hops, LLM checks sufficiency."""

    name = "tog"
    Settings = ThinkOnGraphSettings

    def __init__(self, context: Any, **overrides: Any):
        super().__init__(context, **overrides)
        self._distance = AnswerDistance(context, self.settings)
        self.relations = RelationRanking(context, self.settings.relations, self.settings.device)

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        starts = [node_of(self.kg, topic) for topic in topics]
        query = without_mentions(question, [node.display for node in starts])
        distance = None
        if self.settings.depth_from == "distance":
            distance = self._distance.predict(query)
        max_depth = self.settings.depth if distance is None else likely_depth(distance, self.settings.depth)
        if distance is not None:
            result.notes.append(describe(distance, max_depth))
        keep = relation_filter(self.settings.relation_filter)
        beam = [Chain(node.id, Path(()), (), 1.0) for node in starts]
        start_nodes = {node.id: node for node in starts}
        gathered: list[Chain] = []   # every chain that was in the beam
        explored: list[Chain] = []   # every chain scored, in or out of the beam (siblings of the answer)
        best_so_far = -math.inf
        for depth in range(1, max_depth + 1):
            candidates = self._expand(question, query, beam, start_nodes, keep, depth, result.notes)
            if not candidates:
                result.notes.append(f"depth {depth}: no relation left to explore; answering from the paths found")
                break
            explored.extend(candidates)
            beam = candidates[: self.settings.width]
            gathered.extend(beam)
            result.notes.append(f"depth {depth}: beam " + "; ".join(f"{c.path} ({c.score:.3f})" for c in beam))
            if distance is not None:
                continue  # the distance head chose the depth
            best_here = max(c.relevance for c in candidates) - self.settings.depth_penalty * (depth - 1)
            if self.settings.stop_without_gain and best_here <= best_so_far:
                result.notes.append(f"depth {depth}: no relation chain matches the question better than at depth "
                                    f"{depth - 1}; exploration stops (graph side)")
                break
            best_so_far = max(best_so_far, best_here)
            if self._sufficient(question, gathered, depth, result.notes):
                break
        else:
            if distance is None:
                result.notes.append(f"maximum depth {self.settings.depth} reached without a 'yes'; "
                                    "answered from the paths gathered")
        if gathered:  # as in the paper, the answer step sees the chains of every depth
            self._answer(question, gathered, explored, distance, result)

    # ------------------------------------------------------------------ one depth
    def _expand(self, question: str, query: str, beam: Sequence[Chain], starts: dict[str, Node], keep: Any,
                depth: int, notes: list[str]) -> list[Chain]:
        """Relation exploration and pruning, entity exploration and pruning: the next candidates, best first."""
        candidates: list[Chain] = []
        for chain in beam:
            source = chain.end if chain.path.steps else starts[chain.topic]
            came_by = [chain.moves[-1].reverse()] if chain.moves and self.settings.skip_reverse else []
            moves = candidate_moves(self.kg, source.id, keep=keep, exclude=came_by)
            for move, relation_score, relevance in self._prune_relations(question, query, chain, source, moves,
                                                                          depth, notes):
                on_chain = chain.nodes()
                paths = [p for p in follow(self.kg, source, move, limit=self.settings.max_tails)
                         if p.end.id not in on_chain]
                if not paths:
                    continue
                entity_scores = self._entity_scores(query, paths)
                for path, entity_score in zip(paths, entity_scores):
                    candidates.append(Chain(chain.topic, Path(chain.path.steps + path.steps), chain.moves + (move,),
                                            relation_score * entity_score, relevance))
        candidates.sort(key=lambda c: -c.score)
        return candidates

    def _prune_relations(self, question: str, query: str, chain: Chain, source: Node, moves: list[Move],
                         depth: int, notes: list[str]) -> list[tuple[Move, float, float]]:
        """The ``width`` best moves from ``source``: (move, ToG score summing to 1 over the kept ones,
        embedding relevance of the relation chain it extends)."""
        if not moves:
            return []
        ranked = self.relations.rank_moves(query, moves, chain.moves)
        relevance = _softmax([score for _, score in ranked], self.settings.temperature)
        mode = self.settings.prune
        if mode != "embed" and len(ranked) > 1:
            shown = ranked[: self.settings.relation_options]
            prompt = prompts.render(PROMPTS, "relations", question=question, entity=source.display)
            probabilities = ask_scores(self.llm, prompt, [move_option(source, move) for move, _ in shown],
                                       step=f"relations-{depth}", notes=notes)
            if probabilities is not None:
                model = np.zeros(len(ranked))
                model[: len(shown)] = probabilities
                relevance = model if mode == "llm" else relevance * model
        order = sorted(range(len(ranked)), key=lambda i: -relevance[i])[: self.settings.width]
        total = float(sum(relevance[i] for i in order)) or 1.0
        return [(ranked[i][0], float(relevance[i]) / total, ranked[i][1]) for i in order if relevance[i] > 0]

    def _entity_scores(self, query: str, paths: list[Path]) -> list[float]:
        """Each end's relevance (its last fact in words against the question), 1 for the best."""
        if len(paths) == 1:
            return [1.0]
        similarity = self.context.scorer.score(query, [path_words(Path(p.steps[-1:])) for p in paths])
        best = float(np.max(similarity))
        return [math.exp((float(s) - best) / self.settings.temperature) for s in similarity]

    def _graph_score(self, chain: Chain, distance: np.ndarray | None) -> float:
        """How well a chain's end fits as the answer, before the model's say: the chain's relevance
        less ``depth_penalty`` per hop beyond the first, or, with an answer-distance prediction,
        plus ``temperature`` x log P(the chain's length in facts), so that one nat of the
        prediction weighs as much as a relevance gap of one ``temperature``."""
        if distance is None:
            return chain.relevance - self.settings.depth_penalty * (len(chain.moves) - 1)
        hops = len(chain.path.steps)
        probability = float(distance[hops]) if hops < len(distance) else 0.0
        return chain.relevance + self.settings.temperature * math.log(max(probability, 1e-9))

    def _sufficient(self, question: str, gathered: Sequence[Chain], depth: int, notes: list[str]) -> bool:
        facts = _facts(gathered)
        prompt = prompts.render(PROMPTS, "sufficient", question=question, facts="\n".join(facts))
        answer, p_yes = ask_yes_no(self.llm, prompt, step=f"sufficient-{depth}", notes=notes)
        notes.append(f"depth {depth}: sufficient? {'yes' if answer else 'no'} (p_yes {p_yes:.2f})")
        return answer

    # ------------------------------------------------------------------ answer
    def _answer(self, question: str, gathered: Sequence[Chain], explored: Sequence[Chain],
                distance: np.ndarray | None, result: Result) -> None:
        """The model chooses among the relation chains of the ``gathered`` chains, each weighted by
        its relevance (minus ``depth_penalty`` per hop beyond the first, as embed-path does, since a
        longer chain's words match more of any question; with an answer-distance prediction, plus
        ``temperature`` x log P(its length) instead). Every end the winning relation chain reached
        is an answer, in the order of the graph's entity scores.

        One option per relation chain, shown by its best end: the ends of one chain share their
        relevance, so only the model's scores could order them, and the 270M model's are near
        uniform there (0.28-0.48 on three options); ToG's entity scores order them instead, and
        the model's few options are all different readings of the question.

        When some node is reached from several topic entities (a conjunctive question: "players of
        club X at position Y"), only such nodes are candidates, and all of them are answers.
        """
        support: dict[str, set[str]] = {}
        for chain in explored:
            support.setdefault(chain.end.id, set()).add(chain.topic)
        most = max(len(topics) for topics in support.values())
        pool = [c for c in explored if len(support[c.end.id]) == most] if most > 1 else list(gathered)
        best_by_end: dict[str, Chain] = {}
        for chain in pool:
            if chain.end.id not in best_by_end or chain.score > best_by_end[chain.end.id].score:
                best_by_end[chain.end.id] = chain
        by_relation_chain: dict[Any, list[Chain]] = {}
        for chain in sorted(best_by_end.values(), key=lambda c: -c.score):
            by_relation_chain.setdefault(chain.relation_chain, []).append(chain)
        shown = {key: ends[0] for key, ends in by_relation_chain.items()}
        graph = {key: self._graph_score(chain, distance) for key, chain in shown.items()}
        options = sorted(shown, key=lambda key: (-graph[key], -shown[key].score))[: self.settings.answer_options]
        best = graph[options[0]]
        combined = np.array([(graph[key] - best) / self.settings.temperature for key in options])
        if len(options) > 1:
            prompt = prompts.render(PROMPTS, "answer", question=question)
            probabilities = ask_scores(self.llm, prompt, [str(shown[key].path) for key in options], step="answer",
                                       notes=result.notes)
            if probabilities is not None:
                combined = combined + self.settings.answer_weight * np.log(np.maximum(probabilities, 1e-9))
        winner = options[int(np.argmax(combined))]
        if most > 1:
            others = [c for key, ends in by_relation_chain.items() if key != winner for c in ends]
            ranked = by_relation_chain[winner] + sorted(others, key=lambda c: -c.score)
        else:
            ranked = sorted((c for c in explored if c.relation_chain == winner), key=lambda c: -c.score)
        seen: set[str] = set()
        for chain in ranked:
            if chain.end.id in seen or chain.end.id == chain.topic:
                continue
            seen.add(chain.end.id)
            result.answers.append(Answer(chain.end.id, chain.end.display, round(chain.score, 6)))
            result.evidence.append(chain.path)
        shown_winner = shown[winner]
        result.notes.append(f"answer: {shown_winner.path} (relation chain "
                            f"{' / '.join(str(m) for m in shown_winner.moves)})")


def _facts(chains: Sequence[Chain], limit: int = 12) -> list[str]:
    """The distinct facts of ``chains`` in words, at most ``limit`` (the best chains' first)."""
    facts: list[str] = []
    for chain in sorted(chains, key=lambda c: -c.score):
        for step in chain.path.steps:
            text = path_words(Path((step,)))
            if text not in facts:
                facts.append(text)
    return facts[:limit]


def _softmax(scores: Sequence[float], temperature: float) -> np.ndarray:
    values = np.array(scores, dtype=np.float64) / max(temperature, 1e-6)
    values = np.exp(values - values.max())
    return values / values.sum()
