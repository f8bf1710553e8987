"""Baselines every graph reasoner has to beat: the LLM alone, and embeddings alone.

* ``io`` asks the LLM the question directly (few-shot completion, names only).
* ``cot`` lets the LLM reason first, then asks for the answer.
* ``embed-path`` uses no LLM: from each topic entity it grows relation paths
  (beam search, up to 3 hops) scored by the similarity of the path's relations
  to the question (or by the trained path scorer, ``relations=trained``), and
  answers with the ends of the best path.
  The path search itself is :mod:`localkg.reasoners.relation_paths`.

The LLM-only answers are free text: they carry no node id (``Answer(id="")``)
and are scored by name like any other answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localkg import prompts
from localkg.reasoners.base import Answer, Reasoner, Result, register
from localkg.reasoners.common import split_answers
from localkg.reasoners.relation_paths import RankedPath, rank_relation_paths
from localkg.reasoners.relation_ranking import RelationRanking, RelationsMode
from localkg.reasoners.settings import NonNegativeFloat, PositiveInt
from localkg.store.model import Node

PROMPTS = "baselines"


@dataclass(frozen=True)
class IOReasonerSettings:
    """Settings of ``io``."""

    max_tokens: PositiveInt = 32


@register
class IOReasoner(Reasoner):
    """The LLM alone, answering directly (the "IO prompt" baseline of the KGQA papers)."""

    name = "io"
    uses_graph = False
    Settings = IOReasonerSettings

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        prompt = prompts.render(PROMPTS, "io", question=question)
        output = self.llm.generate(prompt, step="answer", max_tokens=self.settings.max_tokens, stop=["\n"])
        result.answers = [Answer("", name) for name in split_answers(output)]
        result.notes.append("answered by the LLM alone; the graph was not used")


@dataclass(frozen=True)
class CoTReasonerSettings:
    """Settings of ``cot``."""

    reasoning_tokens: PositiveInt = 96
    max_tokens: PositiveInt = 32


@register
class CoTReasoner(Reasoner):
    """The LLM alone, reasoning step by step before it answers (chain of thought)."""

    name = "cot"
    uses_graph = False
    Settings = CoTReasonerSettings

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        reasoning_prompt = prompts.render(PROMPTS, "cot_reason", question=question)
        reasoning = self.llm.generate(reasoning_prompt, step="reason", max_tokens=self.settings.reasoning_tokens,
                                      stop=["\nAnswer:", "\n\n", "\nQuestion:"]).strip()
        answer_prompt = prompts.render(PROMPTS, "cot_answer", reasoning_prompt=reasoning_prompt, reasoning=reasoning)
        output = self.llm.generate(answer_prompt, step="answer", max_tokens=self.settings.max_tokens, stop=["\n"])
        result.answers = [Answer("", name) for name in split_answers(output)]
        result.notes.append(f"reasoning: {reasoning}")
        result.notes.append("answered by the LLM alone; the graph was not used")


@dataclass(frozen=True)
class EmbedPathReasonerSettings:
    """Settings of ``embed-path``."""

    max_depth: PositiveInt = 3
    beam: PositiveInt = 3
    max_frontier: PositiveInt = 50
    relation_sample: PositiveInt = 5
    depth_penalty: NonNegativeFloat = 0.05
    max_answers: PositiveInt = 50
    relations: RelationsMode = "auto"  # relation ranking: auto | embed | trained (relation_ranking.py)


@register
class EmbedPathReasoner(Reasoner):
    """No LLM: answer with the ends of the relation path that best matches the question.

    With several topic entities (conjunctive questions) the best path of each is taken and
    the answer is the nodes all of them reach, when there are any; otherwise the ends of
    the single best path.
    """

    name = "embed-path"
    uses_llm = False
    Settings = EmbedPathReasonerSettings

    def __init__(self, context: Any, **overrides: Any):
        super().__init__(context, **overrides)
        self.relations = RelationRanking(context, self.settings.relations)

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        best: list[RankedPath] = []
        for topic in topics:
            paths = rank_relation_paths(self.kg, self.relations, question, topic,
                                        max_depth=self.settings.max_depth, beam=self.settings.beam,
                                        max_frontier=self.settings.max_frontier,
                                        relation_sample=self.settings.relation_sample,
                                        depth_penalty=self.settings.depth_penalty)
            if paths:
                best.append(paths[0])
        if not best:
            result.notes.append("no answer found: no relation leads anywhere from the topic entities")
            return
        best.sort(key=lambda p: -p.score)
        chosen, tails = best, _common_tails(best)
        if not tails:
            chosen, tails = best[:1], list(best[0].tails)
        result.answers = [Answer(node.id, node.display, chosen[0].score) for node in tails[:self.settings.max_answers]]
        result.evidence = [example for path in chosen for example in path.examples]
        for path in chosen:
            result.notes.append(f"relation path from {path.topic}: {path} (similarity {path.similarity:.3f})")


def _common_tails(paths: list[RankedPath]) -> list[Node]:
    """Nodes at the end of every path, in the order of the best path (empty for one path)."""
    if len(paths) < 2:
        return []
    shared = set.intersection(*({n.id for n in p.tails} for p in paths))
    return [node for node in paths[0].tails if node.id in shared]
