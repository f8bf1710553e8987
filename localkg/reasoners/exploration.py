"""Plan-on-Graph's exploration of one depth, shared by ``plan`` and PPoGA's executor.

:class:`GraphExplorer` pools the relations of a frontier, has the model choose among the
best few by the reasoner's relation ranking (``relation_ranking.py``), follows them and prunes the reached entities the same way;
:func:`path_to` and :func:`path_match` rebuild and score the path that reached an entity.
The prompts are ``plan.toml``'s ``relations`` and ``entities`` (PPoGA passes its own file).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import AbstractSet as Set
from typing import Any, Sequence

from localkg import prompts
from localkg.reasoners.common import DEFAULT_RELATION_FILTER, model_choice, relation_filter, triple_words
from localkg.reasoners.relation_ranking import RelationRanking, RelationsMode, path_chain
from localkg.reasoners.settings import PositiveInt
from localkg.store.kg import KG
from localkg.store.model import IN, LITERAL, OUT, Node, Path, Step, Triple
from localkg.text import readable_relation

#: The prompt file that holds the exploration prompts.
EXPLORATION_PROMPTS = "plan"

_NUMBER = re.compile(r"^[\d\s.,:/+-]+$")


@dataclass(frozen=True)
class ExplorationSettings:
    """The settings :class:`GraphExplorer` reads; ``plan``'s and ``ppoga``'s settings extend them."""

    relation_options: PositiveInt = 5     # top relations by embedding the model chooses among
    max_relations: PositiveInt = 3        # the model picks "as few as possible", at most this many
    entity_prefilter: PositiveInt = 70    # embedding pre-filter before the model prunes entities (code: 70)
    entity_options: PositiveInt = 5       # top entities by embedding the model chooses among
    entity_keep: PositiveInt = 3          # entities kept per depth (the next frontier)
    neighbor_limit: PositiveInt = 200     # facts read per (entity, relation)
    relation_filter: str = DEFAULT_RELATION_FILTER  # relations never followed (ToG's abandon_rels)
    relations: RelationsMode = "auto"  # relation ranking: auto | embed | trained (relation_ranking.py)


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


def path_match(ranking: RelationRanking, query: str, path: Path, depth_penalty: float = 0.05) -> float:
    """How well a walked path's relations match the question: embed-path's score (the ranking's
    score of the relation path, minus ``depth_penalty`` per hop beyond the first). The graph side's say
    on which of several explored depths answers, when the model cannot tell them apart."""
    if not path.steps:
        return float("-inf")
    labels = tuple(readable_relation(step.triple.relation) for step in path.steps)
    return float(ranking.chain_scores(query, [path_chain(path)], [labels])[0]) - depth_penalty * (len(labels) - 1)


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

    def __init__(self, kg: KG, llm: Any, scorer: Any, relations: RelationRanking, settings: ExplorationSettings,
                 prompt_file: str = EXPLORATION_PROMPTS):
        self.kg = kg
        self.llm = llm
        self.scorer = scorer
        self.relations = relations
        self.settings = settings
        self.prompt_file = prompt_file
        self.keep = relation_filter(settings.relation_filter)

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
        shown = options[: self.settings.relation_options]
        prompt = prompts.render(self.prompt_file, "relations", question=question, objectives=objectives,
                                memory=memory, entities=", ".join(n.display for n in frontier))
        picks = model_choice(self.llm, prompt, [o.render() for o in shown], step=f"{step_prefix}relations",
                             k=self.settings.max_relations, notes=notes)
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
        scores = self.relations.chain_scores(
            query, [path_chain(path_to(pooled[key][1][0].id, via)) + (key,) for key in keys],
            [(*path_labels(pooled[key][1][0].id, via), readable_relation(pooled[key][0])) for key in keys])
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
                                              limit=self.settings.neighbor_limit):
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
        ranked = [reached[i] for i in order][: self.settings.entity_prefilter]
        exploration.reached = ranked
        if len(ranked) <= 1 or all(_is_number(n) for n in ranked):
            exploration.kept = ranked[: self.settings.entity_keep]  # nothing for the model to choose
            return
        shown = ranked[: self.settings.entity_options]
        relations = ", ".join(o.label for o in exploration.relations)
        prompt = prompts.render(self.prompt_file, "entities", question=question, objectives=objectives,
                                relations=relations)
        picks = model_choice(self.llm, prompt, [triple_words(exploration.via[n.id].triple) for n in shown],
                             step=f"{step_prefix}entities", k=self.settings.entity_keep, notes=notes)
        kept = [shown[i] for i in picks] if picks else shown[: self.settings.entity_keep]
        kept_ids = {n.id for n in kept}
        exploration.kept = kept
        exploration.reached = kept + [n for n in ranked if n.id not in kept_ids]


def _is_number(node: Node) -> bool:
    return node.kind == LITERAL or bool(_NUMBER.match(node.display))
