"""Plan-on-Graph (Chen et al., NeurIPS 2024) as the ``plan`` reasoner.

Decompose the question into sub-objectives; then, depth by depth (``max_depth``), explore
relations from the current entities, follow them and prune the reached entities
(:class:`~localkg.reasoners.exploration.GraphExplorer`); keep a memory per sub-objective; after
each depth ask whether the facts answer the question, and when they do not, *reflect*
(``max_reflections``): maybe go back to entities seen earlier — the method's backtracking.

For a small local model, embeddings rank every list and the model chooses among the top few
(the embedding order is the fallback); the memory is assembled from the gathered facts; answers
are read off the graph, and when no depth is judged sufficient the depth whose path best matches
the question answers. docs/reasoners.md lists every adaptation and its reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localkg import prompts
from localkg.reasoners.base import Answer, Reasoner, Result, register
from localkg.reasoners.common import (ask_yes_no, bulleted, model_choice, model_json, node_of, string_list,
                                     triple_words)
from localkg.reasoners.exploration import Exploration, ExplorationSettings, GraphExplorer, path_match, path_to
from localkg.reasoners.relation_ranking import RelationRanking
from localkg.reasoners.settings import NonNegativeInt, PositiveInt
from localkg.store.model import Node, Step, Triple
from localkg.text import without_mentions

PROMPTS = "plan"

@dataclass
class _Depth:
    """One explored depth: how sufficient the model found it, how well the path to its best
    entity matches the question, and what it reached."""

    depth: int
    p_yes: float
    match: float
    reached: list[Node]
    via: dict[str, Step]


@dataclass(frozen=True)
class PlanReasonerSettings(ExplorationSettings):
    """Settings of ``plan``: the exploration's, and these."""

    max_depth: PositiveInt = 4  # exploration depths (paper: 4)
    max_reflections: NonNegativeInt = 5  # reflections that may add back earlier entities (paper: 5)
    max_objectives: PositiveInt = 3  # sub-objectives in the plan
    memory_facts: PositiveInt = 3  # facts remembered per sub-objective
    max_answers: PositiveInt = 50
    plan_tokens: PositiveInt = 96


@register
class PlanReasoner(Reasoner):
    """Plan-on-Graph: sub-objectives, depth-wise exploration, memory, answer-or-continue, reflection."""

    name = "plan"
    Settings = PlanReasonerSettings

    def __init__(self, context: Any, **overrides: Any):
        super().__init__(context, **overrides)
        self.relations = RelationRanking(context, self.settings.relations)

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        notes = result.notes
        objectives = self.decompose(question, notes)
        notes.append(f"sub-objectives: {' | '.join(objectives)}")
        explorer = GraphExplorer(self.kg, self.llm, self.context.scorer, self.relations, self.settings)
        topic_nodes = [node_of(self.kg, t) for t in topics]
        query = without_mentions(question, [n.display for n in topic_nodes])
        objectives_text = "; ".join(objectives)
        frontier = list(topic_nodes)
        visited = {n.id for n in topic_nodes}
        seen: dict[str, Node] = {}          # every entity reached so far (the pool reflection adds back from)
        via: dict[str, Step] = {}
        facts: list[Triple] = []
        explored: set[tuple[str, str, str]] = set()   # moves already walked are not offered again
        depths: list[_Depth] = []
        reflections = 0
        for depth in range(1, self.settings.max_depth + 1):
            memory = self.memory(objectives, facts)
            found = explorer.explore(question, frontier, query=query, objectives=objectives_text,
                                     memory=_memory_text(memory), visited=visited, via=via, exclude=explored,
                                     notes=notes)
            explored |= found.explored
            notes.append(f"depth {depth}: followed {', '.join(o.render() for o in found.relations) or 'nothing'}; "
                         f"reached {len(found.reached)}, kept {', '.join(n.display for n in found.kept) or 'none'}")
            if found.empty:
                frontier, reflections = self._reflect(question, facts, frontier, seen, visited, reflections, notes,
                                                      force=True)
                if not frontier:
                    break
                continue
            facts.extend(found.triples)
            for node_id, step in found.via.items():
                via.setdefault(node_id, step)
            for node in found.reached:
                seen.setdefault(node.id, node)
                visited.add(node.id)
            sufficient, p_yes = self._sufficient(question, objectives_text, found, notes)
            match = path_match(self.relations, query, path_to(found.reached[0].id, via))
            depths.append(_Depth(depth, p_yes, match, found.reached, dict(via)))
            notes.append(f"depth {depth}: sufficient={sufficient} (P(yes)={p_yes:.2f}); path match {match:.2f}")
            if sufficient:
                self._answer(result, depths[-1])
                return
            frontier = list(found.kept)
            if depth < self.settings.max_depth:
                frontier, reflections = self._reflect(question, facts, frontier, seen, visited, reflections, notes)
        if not depths:
            notes.append("no answer found: the exploration reached no entity")
            return
        best = max(depths, key=lambda d: d.match)
        notes.append(f"no depth was judged sufficient; answered from depth {best.depth}, whose path best matches "
                     f"the question ({best.match:.2f})")
        self._answer(result, best)

    # -------------------------------------------------------------- steps
    def decompose(self, question: str, notes: list[str]) -> list[str]:
        """Sub-objectives from the model; the question itself when its output is unusable."""
        limit = self.settings.max_objectives
        schema = {"type": "object", "properties": {
            "sub_objectives": {"type": "array", "items": {"type": "string", "maxLength": 60},
                               "minItems": 1, "maxItems": limit}}, "required": ["sub_objectives"]}
        value = model_json(self.llm, prompts.render(PROMPTS, "decompose", question=question), schema,
                           step="plan", max_tokens=self.settings.plan_tokens, notes=notes)
        objectives = string_list(value.get("sub_objectives"), limit)
        if not objectives:
            notes.append("plan: unusable sub-objectives; the question is the only objective")
            return [question]
        return objectives

    def memory(self, objectives: list[str], facts: list[Triple]) -> dict[str, list[str]]:
        """What is known per sub-objective: the gathered facts most similar to it."""
        if not facts:
            return {}
        texts = list(dict.fromkeys(triple_words(t) for t in facts))
        memory = {}
        for objective in objectives:
            ranked = self.context.scorer.rank(objective, texts, k=self.settings.memory_facts)
            memory[objective] = [texts[i] for i, _score in ranked]
        return memory

    def _sufficient(self, question: str, objectives: str, found: Exploration, notes: list[str]) -> tuple[bool, float]:
        facts = [triple_words(found.via[n.id].triple) for n in found.reached[:5]]
        candidates = ", ".join(n.display for n in found.reached[:5])
        prompt = prompts.render(PROMPTS, "answer", question=question, objectives=objectives,
                                facts=bulleted(facts), candidates=candidates)
        return ask_yes_no(self.llm, prompt, step="answer", notes=notes)

    def _reflect(self, question: str, facts: list[Triple], frontier: list[Node], seen: dict[str, Node],
                 visited: set[str], reflections: int, notes: list[str], force: bool = False) -> tuple[list[Node], int]:
        """Reflection: may the search go back to entities seen earlier? ``force`` when the frontier led
        nowhere (then going back is the only way on and the model only picks where to)."""
        if reflections >= self.settings.max_reflections:
            return frontier, reflections
        pool = [n for n in seen.values() if n.id not in {f.id for f in frontier}]
        if not pool:
            return frontier, reflections
        reflections += 1
        facts_text = bulleted([triple_words(t) for t in facts[-5:]])
        if not force:
            back, _p_back = ask_yes_no(self.llm, prompts.render(PROMPTS, "reflect", question=question,
                                                                 facts=facts_text), step="reflect", notes=notes)
            if not back:
                return frontier, reflections
        scores = self.context.scorer.score(question, [n.display for n in pool])
        ranked = [pool[i] for i in sorted(range(len(pool)), key=lambda i: -float(scores[i]))]
        shown = ranked[: self.settings.entity_options]
        picks = model_choice(self.llm, prompts.render(PROMPTS, "add_back", question=question, facts=facts_text),
                             [n.display for n in shown], step="add_back", k=self.settings.entity_keep, notes=notes)
        added = [shown[i] for i in picks] if picks else shown[:1]
        notes.append(f"reflection {reflections}: went back to {', '.join(n.display for n in added)}")
        return list({n.id: n for n in frontier + added}.values()), reflections

    def _answer(self, result: Result, depth: _Depth) -> None:
        answers = depth.reached[: self.settings.max_answers]
        count = len(answers)
        result.answers = [Answer(n.id, n.display, round(1.0 - i / max(count, 1), 4)) for i, n in enumerate(answers)]
        result.evidence = [path_to(n.id, depth.via) for n in answers[:5]]


def _memory_text(memory: dict[str, list[str]]) -> str:
    if not memory:
        return ""
    lines = [f"{objective}: {'; '.join(facts)}" for objective, facts in memory.items() if facts]
    return prompts.render(PROMPTS, "memory", known=bulleted(lines))
