"""Plan-on-Graph (Chen et al., NeurIPS 2024) as the ``plan`` reasoner.

The method: decompose the question into sub-objectives; then, depth by depth
(at most 4), explore relations from the current entities (the model picks "as
few as possible"), follow them to entities and prune those; keep a memory of
what is known per sub-objective; after each depth decide whether the facts
answer the question; when they do not, *reflect* (at most 5 times): decide
whether a wrong turn was taken and, if so, add back entities seen earlier —
this backtracking is the method's point. When no depth is judged sufficient,
the answer comes from the gathered facts.

Adaptations for a small local model (docs/reasoners.md lists them):

* embeddings rank every candidate list first and the model chooses among the
  top few (``relation_options`` / ``entity_options``), with the embedding order
  as the fallback when its output is unusable;
* one relation choice and one entity choice per depth over the whole frontier
  (the public code asks once per entity and once per (entity, relation));
* the memory is assembled from the gathered facts (the facts most similar to
  each sub-objective) instead of being rewritten by the model each depth;
* answers are read off the graph: the entities the sufficient depth reached,
  those reached from more frontier entities and those the model kept first.
  When no depth is judged sufficient, the depth whose path best matches the
  question (embed-path's score) answers: the small model's P(yes) hardly
  differs between depths (0.39–0.43 for a right and a wrong depth alike).

:class:`GraphExplorer` is one depth of this exploration; PPoGA's executor uses it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import AbstractSet as Set
from typing import Any, Sequence

from localkg import prompts
from localkg.errors import LocalKGError
from localkg.reasoners.base import Answer, Reasoner, Result, register
from localkg.reasoners.baselines import path_similarities, readable_relation
from localkg.reasoners.common import (
    DEFAULT_RELATION_FILTER,
    ask_yes_no,
    relation_filter,
    triple_words,
    without_mentions,
)
from localkg.store.kg import KG
from localkg.store.model import IN, LITERAL, OUT, Node, Path, Step, Triple

PROMPTS = "plan"

_NUMBER = re.compile(r"^[\d\s.,:/+-]+$")


# ------------------------------------------------------------------ small shared pieces
def model_choice(llm: Any, prompt: str, options: list[str], *, step: str, k: int,
                 notes: list[str]) -> list[int] | None:
    """The model's picks among ``options`` (ranked best first by the graph side), or None when its
    output is unusable: it picked nothing, or the call failed (a prompt that cannot fit). The caller
    then keeps the graph-side order; a reasoner never stops on the model's output.

    Unlike ``common.ask_choice`` the model may answer "none": these methods ask it to choose as
    few as possible, and "none" is then a usable way of saying the embedding order should stand."""
    try:
        picks = llm.choose(prompt, options, step=step, k=k, allow_none=True)
    except LocalKGError as error:
        notes.append(f"{step}: model call failed ({error}); kept the embedding order")
        return None
    if not picks:
        notes.append(f"{step}: the model picked nothing; kept the embedding order")
        return None
    return picks


def model_json(llm: Any, prompt: str, schema: dict[str, Any], *, step: str, max_tokens: int,
               notes: list[str]) -> dict[str, Any]:
    """``llm.json`` that reads a failed call as ``{}`` (every caller has a fallback for missing keys)."""
    try:
        value = llm.json(prompt, schema, step=step, max_tokens=max_tokens)
    except LocalKGError as error:
        notes.append(f"{step}: model call failed ({error})")
        return {}
    return value if isinstance(value, dict) else {}


def string_list(value: Any, limit: int) -> list[str]:
    """Non-empty stripped strings from a model's JSON list (anything else is dropped)."""
    if not isinstance(value, list):
        return []
    items = [" ".join(item.split()) for item in value if isinstance(item, str)]
    return [item for item in dict.fromkeys(items) if item][:limit]


def path_to(node_id: str, via: dict[str, Step], limit: int = 8) -> Path:
    """The path that reached ``node_id``, rebuilt backwards along ``via`` (node → the step into it)."""
    steps: list[Step] = []
    current = node_id
    while current in via and len(steps) < limit:
        step = via[current]
        steps.append(step)
        current = step.source.id
    return Path(tuple(reversed(steps)))


def path_labels(node_id: str, via: dict[str, Step]) -> tuple[str, ...]:
    """The relation words of the path that reached ``node_id`` (none for a topic entity)."""
    return tuple(readable_relation(step.triple.relation) for step in path_to(node_id, via).steps)


def path_match(scorer: Any, query: str, path: Path, depth_penalty: float = 0.05) -> float:
    """How well a walked path's relations match the question: embed-path's score (the similarity of
    the relation path, minus ``depth_penalty`` per hop beyond the first). The graph side's say
    on which of several explored depths answers, when the model cannot tell them apart."""
    if not path.steps:
        return float("-inf")
    labels = tuple(readable_relation(step.triple.relation) for step in path.steps)
    return float(path_similarities(scorer, query, [labels])[0]) - depth_penalty * (len(labels) - 1)


def bulleted(lines: Sequence[str], empty: str = "(none yet)") -> str:
    return "\n".join(f"- {line}" for line in lines) if lines else f"- {empty}"


# ------------------------------------------------------------------ one depth of exploration
@dataclass(frozen=True)
class RelationOption:
    """A relation seen from the frontier, with the frontier entities that have it."""

    relation: str
    direction: str
    label: str
    sources: tuple[Node, ...]

    @property
    def key(self) -> tuple[str, str]:
        return self.relation, self.direction

    def render(self) -> str:
        """``Top Hat → directed_by → ?`` or ``? → starred_actors → Ginger Rogers`` (+ how many more)."""
        first = self.sources[0].display
        text = f"{first} → {self.label} → ?" if self.direction == OUT else f"? → {self.label} → {first}"
        more = len(self.sources) - 1
        return f"{text} (and {more} more)" if more else text


@dataclass
class Exploration:
    """What one depth found: the relations followed, the facts, the entities reached and kept."""

    relations: list[RelationOption] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)
    reached: list[Node] = field(default_factory=list)
    kept: list[Node] = field(default_factory=list)
    via: dict[str, Step] = field(default_factory=dict)
    support: dict[str, int] = field(default_factory=dict)
    explored: set[tuple[str, str, str]] = field(default_factory=set)

    @property
    def empty(self) -> bool:
        return not self.reached


class GraphExplorer:
    """Plan-on-Graph's relation and entity exploration for one depth.

    Relations of every frontier entity (both directions) are pooled, ranked by the embedding
    similarity of their words to the question, and the model chooses as few as possible among
    the top ``relation_options``. Following them gives the reached entities; more than
    ``entity_prefilter`` (70, as in the public code) are cut by similarity first; then the
    model keeps up to ``entity_keep`` among the top ``entity_options`` — unless there is at
    most one, or all are numbers (nothing to choose), as in the public code.
    """

    def __init__(self, kg: KG, llm: Any, scorer: Any, config: dict[str, Any], prompt_file: str = PROMPTS):
        self.kg = kg
        self.llm = llm
        self.scorer = scorer
        self.config = config
        self.prompt_file = prompt_file
        self.keep = relation_filter(config["relation_filter"])

    def explore(self, question: str, frontier: Sequence[Node], *, query: str, objectives: str, memory: str,
                visited: set[str], via: dict[str, Step], exclude: Set[tuple[str, str, str]] = frozenset(),
                notes: list[str], step_prefix: str = "") -> Exploration:
        """One depth from ``frontier``. ``query`` is what candidates are ranked against;
        ``visited`` nodes are not reached again; ``via`` says how earlier entities were reached
        (a relation is ranked with the relations of the path that led to it, by embed-path's
        ``path_similarities``: "directed by" + "in language" matches "languages of the films
        directed by" where "in language" alone does not); ``exclude`` holds the (entity, relation,
        direction) moves that must not be offered (walked ones, PPoGA's failed ones)."""
        exploration = Exploration()
        options = self._relation_options(frontier, query, exclude, via)
        if not options:
            notes.append(f"{step_prefix}relations: no relation left to follow from "
                         f"{', '.join(n.display for n in frontier) or 'nothing'}")
            return exploration
        shown = options[: self.config["relation_options"]]
        prompt = prompts.render(self.prompt_file, "relations", question=question, objectives=objectives,
                                memory=memory, entities=", ".join(n.display for n in frontier))
        picks = model_choice(self.llm, prompt, [o.render() for o in shown], step=f"{step_prefix}relations",
                             k=self.config["max_relations"], notes=notes)
        exploration.relations = [shown[i] for i in picks] if picks else shown[:1]
        self._follow(exploration, visited)
        if exploration.empty:
            notes.append(f"{step_prefix}entities: the chosen relations lead only to entities already seen")
            return exploration
        self._prune(exploration, question, query, objectives, notes, step_prefix)
        return exploration

    # -------------------------------------------------------------- relations
    def _relation_options(self, frontier: Sequence[Node], query: str, exclude: Set[tuple[str, str, str]],
                          via: dict[str, Step]) -> list[RelationOption]:
        pooled: dict[tuple[str, str], tuple[str, list[Node]]] = {}
        for node in frontier:
            arrival = via.get(node.id)
            back = (arrival.triple.relation, IN if arrival.forward else OUT) if arrival else None
            for count in self.kg.relations(node.id):
                if (node.id, count.relation, count.direction) in exclude or not self.keep(count.relation):
                    continue
                if (count.relation, count.direction) == back and count.count == 1:
                    continue  # the one fact it was reached by: it leads only back
                label, sources = pooled.setdefault((count.relation, count.direction), (count.label, []))
                sources.append(node)
        if not pooled:
            return []
        keys = list(pooled)
        scores = path_similarities(self.scorer, query, [(*path_labels(pooled[key][1][0].id, via),
                                                         readable_relation(pooled[key][0])) for key in keys])
        order = sorted(range(len(keys)), key=lambda i: (-float(scores[i]), keys[i]))
        return [RelationOption(keys[i][0], keys[i][1], pooled[keys[i]][0], tuple(pooled[keys[i]][1])) for i in order]

    # -------------------------------------------------------------- entities
    def _follow(self, exploration: Exploration, visited: set[str]) -> None:
        sources_of: dict[str, set[str]] = {}
        nodes: dict[str, Node] = {}
        for option in exploration.relations:
            for source in option.sources:
                exploration.explored.add((source.id, option.relation, option.direction))
                for node in self.kg.neighbors(source.id, option.relation, option.direction,
                                              limit=self.config["neighbor_limit"]):
                    if node.id in visited:
                        continue
                    forward = option.direction == OUT
                    triple = Triple(source, option.relation, node) if forward else Triple(node, option.relation, source)
                    exploration.triples.append(triple)
                    exploration.via.setdefault(node.id, Step(triple, forward))
                    nodes.setdefault(node.id, node)
                    sources_of.setdefault(node.id, set()).add(source.id)
        exploration.reached = list(nodes.values())
        exploration.support = {node_id: len(sources) for node_id, sources in sources_of.items()}

    def _prune(self, exploration: Exploration, question: str, query: str, objectives: str, notes: list[str],
               step_prefix: str) -> None:
        reached = exploration.reached
        texts = [triple_words(exploration.via[n.id].triple) for n in reached]
        similarity = self.scorer.score(query, texts)
        # Entities reached from more frontier entities first (a conjunctive question's answer is
        # reached from every topic), then by similarity.
        order = sorted(range(len(reached)),
                       key=lambda i: (-exploration.support[reached[i].id], -float(similarity[i])))
        ranked = [reached[i] for i in order][: self.config["entity_prefilter"]]
        exploration.reached = ranked
        if len(ranked) <= 1 or all(_is_number(n) for n in ranked):
            exploration.kept = ranked[: self.config["entity_keep"]]  # nothing for the model to choose
            return
        shown = ranked[: self.config["entity_options"]]
        relations = ", ".join(o.label for o in exploration.relations)
        prompt = prompts.render(self.prompt_file, "entities", question=question, objectives=objectives,
                                relations=relations)
        picks = model_choice(self.llm, prompt, [triple_words(exploration.via[n.id].triple) for n in shown],
                             step=f"{step_prefix}entities", k=self.config["entity_keep"], notes=notes)
        kept = [shown[i] for i in picks] if picks else shown[: self.config["entity_keep"]]
        kept_ids = {n.id for n in kept}
        exploration.kept = kept
        exploration.reached = kept + [n for n in ranked if n.id not in kept_ids]


def _is_number(node: Node) -> bool:
    return node.kind == LITERAL or bool(_NUMBER.match(node.display))


# ------------------------------------------------------------------ the reasoner
@dataclass
class _Depth:
    """One explored depth: how sufficient the model found it, how well the path to its best
    entity matches the question, and what it reached."""

    depth: int
    p_yes: float
    match: float
    reached: list[Node]
    via: dict[str, Step]


@register
class PlanReasoner(Reasoner):
    """Plan-on-Graph: sub-objectives, depth-wise exploration, memory, answer-or-continue, reflection."""

    name = "plan"
    defaults: dict[str, Any] = {
        "max_depth": 4,           # exploration depths (paper: 4)
        "max_reflections": 5,     # reflections that may add back earlier entities (paper: 5)
        "entity_prefilter": 70,   # embedding pre-filter before the model prunes entities (code: 70)
        "relation_options": 5,    # top relations by embedding the model chooses among
        "max_relations": 3,       # the model picks "as few as possible", at most this many
        "entity_options": 5,      # top entities by embedding the model chooses among
        "entity_keep": 3,         # entities kept per depth (the next frontier)
        "max_objectives": 3,      # sub-objectives in the plan
        "memory_facts": 3,        # facts remembered per sub-objective
        "neighbor_limit": 200,    # facts read per (entity, relation)
        "relation_filter": DEFAULT_RELATION_FILTER,  # relations never followed (ToG's abandon_rels)
        "max_answers": 50,
        "plan_tokens": 96,
    }

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        notes = result.notes
        objectives = self.decompose(question, notes)
        notes.append(f"sub-objectives: {' | '.join(objectives)}")
        explorer = GraphExplorer(self.kg, self.llm, self.context.scorer, self.config)
        topic_nodes = [self._node(t) for t in topics]
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
        for depth in range(1, self.config["max_depth"] + 1):
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
            match = path_match(self.context.scorer, query, path_to(found.reached[0].id, via))
            depths.append(_Depth(depth, p_yes, match, found.reached, dict(via)))
            notes.append(f"depth {depth}: sufficient={sufficient} (P(yes)={p_yes:.2f}); path match {match:.2f}")
            if sufficient:
                self._answer(result, depths[-1])
                return
            frontier = list(found.kept)
            if depth < self.config["max_depth"]:
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
        limit = self.config["max_objectives"]
        schema = {"type": "object", "properties": {
            "sub_objectives": {"type": "array", "items": {"type": "string", "maxLength": 60},
                               "minItems": 1, "maxItems": limit}}, "required": ["sub_objectives"]}
        value = model_json(self.llm, prompts.render(PROMPTS, "decompose", question=question), schema,
                           step="plan", max_tokens=self.config["plan_tokens"], notes=notes)
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
            ranked = self.context.scorer.rank(objective, texts, k=self.config["memory_facts"])
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
        if reflections >= self.config["max_reflections"]:
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
        shown = ranked[: self.config["entity_options"]]
        picks = model_choice(self.llm, prompts.render(PROMPTS, "add_back", question=question, facts=facts_text),
                             [n.display for n in shown], step="add_back", k=self.config["entity_keep"], notes=notes)
        added = [shown[i] for i in picks] if picks else shown[:1]
        notes.append(f"reflection {reflections}: went back to {', '.join(n.display for n in added)}")
        return list({n.id: n for n in frontier + added}.values()), reflections

    def _answer(self, result: Result, depth: _Depth) -> None:
        answers = depth.reached[: self.config["max_answers"]]
        count = len(answers)
        result.answers = [Answer(n.id, n.display, round(1.0 - i / max(count, 1), 4)) for i, n in enumerate(answers)]
        result.evidence = [path_to(n.id, depth.via) for n in answers[:5]]

    def _node(self, entity: str) -> Node:
        record = self.kg.node(entity)
        return Node(record.id, record.name or record.value, record.kind)


def _memory_text(memory: dict[str, list[str]]) -> str:
    if not memory:
        return ""
    lines = [f"{objective}: {'; '.join(facts)}" for objective, facts in memory.items() if facts]
    return prompts.render(PROMPTS, "memory", known=bulleted(lines))
