"""PPoGA, Predictive Plan-on-Graph with Action, as the ``ppoga`` reasoner.

A *planner* (the model) writes a plan of 3–5 steps; an *executor* carries each step out with
Plan-on-Graph's exploration (:class:`~localkg.reasoners.exploration.GraphExplorer`, the step as
the question). Each step cycle: **predict** what the step should find, **act/observe** one depth
(the observation compared with the prediction), **think/evaluate**: PROCEED, CORRECT_PATH (retry,
avoiding failed moves), REPLAN or FINISH. Strategic, step-cycle and knowledge memories hold the
state.

Unlike the public code, re-plans (``max_replans``) and iterations (``max_iterations``) are capped,
every model call is counted, and no (entity, relation, direction) move is walked twice. When the
model's output is unusable, graph-side rules decide (a generic plan, PROCEED or CORRECT_PATH by
what the step found); without an answer from the planner, the observation whose path best
matches the question answers. docs/reasoners.md gives the details.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from localkg import prompts
from localkg.reasoners.base import Answer, Reasoner, Result, register
from localkg.reasoners.common import bulleted, model_json, node_of, string_list, triple_words
from localkg.reasoners.exploration import (EXPLORATION_PROMPTS, Exploration, ExplorationSettings, GraphExplorer,
                                           path_match, path_to)
from localkg.reasoners.relation_ranking import RelationRanking
from localkg.reasoners.settings import NonNegativeInt, PositiveInt, Range
from localkg.store.model import Node, Step, Triple
from localkg.text import without_mentions

PROMPTS = "ppoga"
PROCEED, CORRECT_PATH, REPLAN, FINISH = "PROCEED", "CORRECT_PATH", "REPLAN", "FINISH"
ACTIONS = (PROCEED, CORRECT_PATH, REPLAN, FINISH)
EXECUTOR = "executor "

FALLBACK_PLAN = (
    ("look up the named entities", "find the facts of the named entities that the question asks about",
     "related entities"),
    ("follow the most relevant relation", "reach the entities the question is about", "entities"),
    ("check the answer", "find the answer among the entities reached", "the answer"),
)


@dataclass
class PlanStep:
    description: str
    objective: str
    expected_outcome: str
    status: str = "not started"


@dataclass
class StrategicMemory:
    """The question, the current plan, the re-plan counter and the plans that failed."""

    question: str
    plan: list[PlanStep]
    replans: int = 0
    failed_plans: list[list[PlanStep]] = field(default_factory=list)


@dataclass
class StepCycleMemory:
    """The step being worked on: its prediction, observation, attempts and the moves that failed."""

    index: int = 0
    prediction: dict[str, Any] = field(default_factory=dict)
    observation: Exploration | None = None
    attempts: int = 0
    failed: set[tuple[str, str, str]] = field(default_factory=set)


@dataclass
class KnowledgeMemory:
    """Everything found on the graph: facts, how each entity was reached, the moves walked."""

    facts: list[Triple] = field(default_factory=list)
    via: dict[str, Step] = field(default_factory=dict)
    entities: dict[str, Node] = field(default_factory=dict)
    expanded: set[str] = field(default_factory=set)
    explored: set[tuple[str, str, str]] = field(default_factory=set)
    chain: list[str] = field(default_factory=list)

    def record(self, frontier: list[Node], found: Exploration) -> None:
        self.facts.extend(found.triples)
        self.explored |= found.explored
        self.expanded |= {n.id for n in frontier}
        for node_id, step in found.via.items():
            self.via.setdefault(node_id, step)
        for node in found.reached:
            self.entities.setdefault(node.id, node)


@dataclass(frozen=True)
class PPoGAReasonerSettings(ExplorationSettings):
    """Settings of ``ppoga``: its executor's (Plan-on-Graph's exploration), and these."""

    min_steps: Annotated[int, Range(1, "max_steps")] = 3  # plan length (paper: 3–5 steps)
    max_steps: PositiveInt = 5
    max_replans: NonNegativeInt = 2  # plan corrections (the public code does not cap them)
    max_iterations: PositiveInt = 10  # step cycles in all (code: 10)
    max_path_corrections: NonNegativeInt = 2  # retries of one step before the plan is judged wrong
    max_answers: PositiveInt = 50
    plan_tokens: PositiveInt = 256
    predict_tokens: PositiveInt = 64


@register
class PPoGAReasoner(Reasoner):
    """PPoGA: planner and executor, predict–act–observe–think, path and plan correction."""

    name = "ppoga"
    Settings = PPoGAReasonerSettings

    def __init__(self, context: Any, **overrides: Any):
        super().__init__(context, **overrides)
        self.relations = RelationRanking(context, self.settings.relations)

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        notes = result.notes
        calls_before = len(self.llm.calls)
        topic_nodes = [node_of(self.kg, t) for t in topics]
        query = without_mentions(question, [n.display for n in topic_nodes])
        explorer = GraphExplorer(self.kg, self.llm, self.context.scorer, self.relations, self.settings,
                                 EXPLORATION_PROMPTS)
        knowledge = KnowledgeMemory(entities={n.id: n for n in topic_nodes})
        strategic = StrategicMemory(question, self.make_plan(question, topic_nodes, knowledge, None, notes))
        cycle = StepCycleMemory()
        frontier = list(topic_nodes)
        answer_from: Exploration | None = None     # the observation where the planner found the answer
        observations: list[Exploration] = []      # every step's non-empty observation (knowledge layer)
        for iteration in range(1, self.settings.max_iterations + 1):
            step = strategic.plan[cycle.index]
            step.status = "in progress"
            cycle.prediction = self.predict(question, step, frontier, notes)
            found = explorer.explore(f"{step.objective} (for: {question})", frontier, query=query,
                                     objectives=step.description, memory="",
                                     visited=set(knowledge.entities), via=knowledge.via,
                                     exclude=knowledge.explored | cycle.failed, notes=notes, step_prefix=EXECUTOR)
            cycle.observation, cycle.attempts = found, cycle.attempts + 1
            knowledge.record(frontier, found)
            error = self.prediction_error(cycle.prediction, found)
            last_step = cycle.index == len(strategic.plan) - 1
            found_answer, action = self.think(question, strategic, cycle, last_step, notes)
            notes.append(f"iteration {iteration}, plan {strategic.replans + 1} step {cycle.index + 1} "
                         f"({step.objective}): followed {', '.join(o.render() for o in found.relations) or 'nothing'}; "
                         f"reached {len(found.reached)}; prediction error {error:.2f}; {action}"
                         f"{' (answer found)' if found_answer else ''}")
            if not found.empty:
                knowledge.chain.append(f"{step.objective}: {', '.join(n.display for n in found.kept)}")
                observations.append(found)
                if found_answer:
                    answer_from = found
            if action == CORRECT_PATH and cycle.attempts > self.settings.max_path_corrections:
                notes.append(f"step {cycle.index + 1} failed {cycle.attempts} times; the plan is judged wrong")
                action = REPLAN
            if action == REPLAN and strategic.replans >= self.settings.max_replans:
                notes.append(f"re-plan limit ({self.settings.max_replans}) reached")
                action = PROCEED if not found.empty else FINISH
            if found_answer or action == FINISH:
                break
            if action == PROCEED:
                step.status = "completed"
                if last_step:
                    break
                frontier = list(found.kept)
                cycle = StepCycleMemory(index=cycle.index + 1)
            elif action == CORRECT_PATH:
                cycle.failed |= found.explored
            else:  # REPLAN
                step.status = "failed"
                strategic.failed_plans.append(strategic.plan)
                strategic.replans += 1
                strategic.plan = self.make_plan(question, topic_nodes, knowledge, strategic.plan, notes)
                frontier = self.restart_frontier(query, topic_nodes, knowledge)
                cycle = StepCycleMemory()
                notes.append(f"re-plan {strategic.replans}: restarting from "
                             f"{', '.join(n.display for n in frontier)}")
        else:
            notes.append(f"iteration limit ({self.settings.max_iterations}) reached")
        executor_calls = sum(1 for call in self.llm.calls[calls_before:] if call.step.startswith(EXECUTOR))
        notes.append(f"LLM calls: {len(self.llm.calls) - calls_before - executor_calls} planner, "
                     f"{executor_calls} executor; re-plans: {strategic.replans}")
        if answer_from is None and observations:
            matches = [path_match(self.relations, query, path_to(o.reached[0].id, knowledge.via))
                       for o in observations]
            best = max(range(len(observations)), key=lambda i: matches[i])
            answer_from = observations[best]
            notes.append(f"the planner found no direct answer; answered from observation {best + 1}, whose path "
                         f"best matches the question ({matches[best]:.2f})")
        if answer_from is None:
            notes.append("no answer found: no step reached any entity")
            return
        answers = answer_from.reached[: self.settings.max_answers]
        result.answers = [Answer(n.id, n.display, round(1.0 - i / max(len(answers), 1), 4))
                          for i, n in enumerate(answers)]
        result.evidence = [path_to(n.id, knowledge.via) for n in answers[:5]]

    # -------------------------------------------------------------- planner
    def make_plan(self, question: str, topics: list[Node], knowledge: KnowledgeMemory,
                  failed: list[PlanStep] | None, notes: list[str]) -> list[PlanStep]:
        """A plan of ``min_steps``–``max_steps`` steps; a re-plan sees the failed plan and the known facts."""
        item = {"type": "object", "properties": {
            "description": {"type": "string", "maxLength": 40},
            "objective": {"type": "string", "maxLength": 40},
            "expected_outcome": {"type": "string", "maxLength": 24}},
            "required": ["description", "objective", "expected_outcome"]}
        schema = {"type": "object", "properties": {
            "steps": {"type": "array", "items": item, "minItems": self.settings.min_steps,
                      "maxItems": self.settings.max_steps}}, "required": ["steps"]}
        if failed is None:
            prompt = prompts.render(PROMPTS, "plan", question=question,
                                    entities=", ".join(n.display for n in topics))
        else:
            prompt = prompts.render(PROMPTS, "replan", question=question,
                                    failed=bulleted([s.objective for s in failed]),
                                    facts=bulleted(knowledge.chain[-5:]
                                                   or [triple_words(t) for t in knowledge.facts[-5:]]))
        value = model_json(self.llm, prompt, schema, step="replan" if failed else "plan",
                           max_tokens=self.settings.plan_tokens, notes=notes)
        steps = []
        for raw in value.get("steps") or []:
            if isinstance(raw, dict) and isinstance(raw.get("objective"), str) and raw["objective"].strip():
                steps.append(PlanStep(str(raw.get("description") or raw["objective"]).strip(), raw["objective"].strip(),
                                      str(raw.get("expected_outcome") or "").strip()))
        steps = steps[: self.settings.max_steps]
        if len(steps) < self.settings.min_steps:
            notes.append(f"{'replan' if failed else 'plan'}: unusable plan; using the generic plan")
            steps = [PlanStep(*fields) for fields in FALLBACK_PLAN]
        notes.append(f"{'new plan' if failed else 'plan'}: {' | '.join(s.objective for s in steps)}")
        return steps

    def predict(self, question: str, step: PlanStep, frontier: list[Node], notes: list[str]) -> dict[str, Any]:
        """What the step should find (type of information, likely entities, confidence)."""
        schema = {"type": "object", "properties": {
            "expected_information_type": {"type": "string", "maxLength": 24},
            "predicted_entities": {"type": "array", "items": {"type": "string", "maxLength": 24}, "maxItems": 2},
            "confidence": {"type": "string", "enum": ["low", "medium", "high"]}},
            "required": ["expected_information_type", "predicted_entities", "confidence"]}
        value = model_json(self.llm, prompts.render(PROMPTS, "predict", question=question, objective=step.objective,
                                                    entities=", ".join(n.display for n in frontier[:5])),
                           schema, step="predict", max_tokens=self.settings.predict_tokens, notes=notes)
        expected = value.get("expected_information_type")
        return {"expected_information_type": expected.strip() if isinstance(expected, str) else step.expected_outcome,
                "predicted_entities": string_list(value.get("predicted_entities"), 2)}

    def prediction_error(self, prediction: dict[str, Any], found: Exploration) -> float:
        """1 − cosine similarity of the prediction to the observation (1.0 when nothing was found)."""
        if found.empty:
            return 1.0
        predicted = " ".join([prediction.get("expected_information_type", ""),
                              *prediction.get("predicted_entities", [])])
        observed = " ".join([o.label for o in found.relations] + [n.display for n in found.kept])
        if not predicted.strip():
            return 1.0
        return float(1.0 - self.context.scorer.score(predicted, [observed])[0])

    def think(self, question: str, strategic: StrategicMemory, cycle: StepCycleMemory, last_step: bool,
              notes: list[str]) -> tuple[bool, str]:
        """The planner's evaluation: (answer found, next action), with graph-side guards."""
        found = cycle.observation
        step = strategic.plan[cycle.index]
        schema = {"type": "object", "properties": {
            "direct_answer_found": {"type": "boolean"},
            "next_action": {"type": "string", "enum": list(ACTIONS)}},
            "required": ["direct_answer_found", "next_action"]}
        facts = [triple_words(found.via[n.id].triple) for n in found.reached[:5]] if found and not found.empty else []
        prompt = prompts.render(PROMPTS, "think", question=question,
                                position=f"{cycle.index + 1} of {len(strategic.plan)}", objective=step.objective,
                                expected=cycle.prediction.get("expected_information_type", ""),
                                found=bulleted(facts, empty="nothing"))
        value = model_json(self.llm, prompt, schema, step="think", max_tokens=32, notes=notes)
        action = value.get("next_action")
        answer_found = value.get("direct_answer_found") is True
        if action not in ACTIONS:
            action = CORRECT_PATH if not facts else (FINISH if last_step else PROCEED)
            notes.append(f"think: unusable decision; {action} by the graph-side rule")
        if not facts:
            answer_found = False
            if action in (PROCEED, FINISH):
                action = CORRECT_PATH  # nothing was found: there is nothing to proceed with
        return answer_found, action

    def restart_frontier(self, query: str, topics: list[Node], knowledge: KnowledgeMemory) -> list[Node]:
        """Where a new plan starts: the topic entities (their walked moves stay excluded) and the
        entities the knowledge layer reached but never expanded that best match the question."""
        unexpanded = [n for n in knowledge.entities.values() if n.id not in knowledge.expanded]
        if unexpanded:
            texts = [triple_words(knowledge.via[n.id].triple) if n.id in knowledge.via else n.display for n in unexpanded]
            ranked = self.context.scorer.rank(query, texts, k=self.settings.entity_keep)
            unexpanded = [unexpanded[i] for i, _score in ranked]
        return list({n.id: n for n in topics + unexpanded}.values())

