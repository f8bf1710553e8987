"""Foresight-over-Graph (FoG) as the ``fog`` reasoner: a learned graph-side scorer
(``localkg.fog``) leads the search, so the LLM is called about ``R + 1`` times per question.

1. **Decomposition** (one LLM call): sub-questions that guide the scorer.
2. **Foresight expansion**: layered BFS up to ``hops`` layers, keeping triples scored above ``tau_e``.
3. **Far-to-near feedback**: the scorer re-scores the kept triples from the outer frontier back
   to the sources; those above ``tau_p`` form the potential subgraph.
4. **Memory manager** (one LLM call per round): selected triples (copied exactly: the grammar
   enumerates the input), the predicted answer and follow-up sub-questions; selected triples join
   the memory, shown but unselected ones are masked; at most ``rounds`` rounds.

With ``relations=trained`` (``auto``: when the store has the path scorer of ``localkg train
paths`` and no fog checkpoint of its own) the triples score instead as the relation chains that
reach them (:class:`ChainTripleScorer`): fog's own trained scorer leads where there is one.

By default the answer is read off the graph (``answer_from="graph"``: the paths from the sources
through the kept triples, scored by :func:`answer_scores`); ``answer_from="model"`` is the
paper's rule. docs/reasoners.md lists every adaptation to a small local model and its reason.
Inference never reads a gold answer or path (``tests/test_fog_reasoner.py`` checks it).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any, Sequence

import numpy as np

from localkg import prompts
from localkg.errors import PromptTooLongError
from localkg.fog.features import TripleKey, bfs_levels, triple_key
from localkg.fog.location import checkpoint_location
from localkg.fog.scoring import SimilarityTripleScorer, TrainedTripleScorer, TripleScorer
from localkg.reasoners.base import Answer, Reasoner, Result, Uses, register, skipped_call
from localkg.reasoners.common import DEFAULT_RELATION_FILTER, AnswerSource, node_of, relation_filter
from localkg.reasoners.relation_ranking import RelationRanking, RelationsMode
from localkg.reasoners.settings import NonNegativeInt, PositiveInt, UnitFloat
from localkg.store.model import IN, OUT, Node, Path, RelationPath, Step, Triple
from localkg.text import without_mentions

PROMPTS = "fog"


def render_triple(triple: Triple) -> str:
    """``(Top Hat, directed_by, Mark Sandrich)``: the form the paper's prompt uses."""
    return f"({triple.head.display}, {triple.relation}, {triple.tail.display})"


@dataclass
class Expansion:
    """The expanded subgraph of one round: kept triples and node levels."""

    triples: list[Triple] = field(default_factory=list)
    levels: dict[str, int] = field(default_factory=dict)
    scored: int = 0
    dropped: list[Triple] = field(default_factory=list)  # scored and not kept: context for the answer's pass


@dataclass
class MemoryUpdate:
    """What the memory manager returned, after checking it against what it was shown."""

    selected: list[Triple]
    answers: list[Node]
    follow_ups: list[str]
    dropped: list[str]
    shown: list[Triple] = field(default_factory=list)  # what the model saw (empty when the call failed)


@dataclass(frozen=True)
class FoGReasonerSettings:
    """Settings of ``fog``."""

    checkpoint: str = ""  # "" → <db>/fog/scorer.pt when it exists, else similarity scores
    hops: PositiveInt = 3  # L
    tau_e: UnitFloat = 0.1
    tau_p: UnitFloat = 0.7
    min_potential: NonNegativeInt = 10  # while the memory is empty, show at least this many best triples
    rounds: PositiveInt = 1  # R (see the module docstring)
    decompose: bool = True
    triples_per_node: PositiveInt = 100
    frontier: PositiveInt = 30
    layer_triples: PositiveInt = 200
    llm_triples: PositiveInt = 30
    max_selected: PositiveInt = 5
    max_answers: PositiveInt = 5
    answer_from: AnswerSource = "graph"  # "graph": ends of the best-scoring paths; "model": the paper's predicted answer
    device: str = ""
    relation_filter: str = DEFAULT_RELATION_FILTER
    relations: RelationsMode = "auto"  # trained: triples score as the chains that reach them (ChainTripleScorer)


def reaching_chain(triple: Triple, chains: dict[str, RelationPath], levels: dict[str, int]) -> RelationPath:
    """The relation chain from a source through ``triple``: the chain of its nearer reached end
    (the lower level) plus its own hop, read away from that end."""
    head, tail = triple.head.id, triple.tail.id
    from_head = head in chains and (tail not in chains or levels.get(head, 0) <= levels.get(tail, 0))
    if from_head:
        return chains[head] + ((triple.relation, OUT),)
    return chains.get(tail, ()) + ((triple.relation, IN),)


def _best_through(chains: Sequence[RelationPath], scores: np.ndarray) -> np.ndarray:
    """Each chain's score raised to the best of the chains scored with it that go on from it: the
    first hop of "who directed the films X acted in" is as good as the two-hop chain it starts,
    though as a chain of its own (X's films) it answers another question."""
    best: dict[RelationPath, float] = {}
    for chain, score in zip(chains, map(float, scores)):
        for end in range(1, len(chain) + 1):
            best[chain[:end]] = max(best.get(chain[:end], -np.inf), score)
    return np.array([best[chain] for chain in chains], dtype=np.float32)


class ChainTripleScorer:
    """``relations=trained``: a triple scores as the best relation chain through it (the one that
    reaches it, or one scored with it that goes on from there), by the trained
    path scorer, relative to the best triple scored together (``exp(s - max s)``, so ``tau_e``
    keeps chains within ln 10 of the best and ``tau_p`` within 0.36). The path scorer compares
    chains across depths, so ``refined`` is the same pass over the whole subgraph; it says
    nothing about the answer's distance, which the chains' ends already decide."""

    description = "trained path scorer: each triple scores as the relation chain that reaches it"

    def __init__(self, relations: RelationRanking, query: str, chains: dict[str, RelationPath]):
        self.relations = relations
        self.query = query
        self.chains = chains

    def initial(self, questions: Sequence[str], triples: Sequence[Triple], levels: dict[str, int]) -> np.ndarray:
        if not triples:
            return np.zeros(0, dtype=np.float32)
        chains = [reaching_chain(triple, self.chains, levels) for triple in triples]
        scores = self.relations.chain_scores(self.query, chains, [tuple(r for r, _d in c) for c in chains])
        through = _best_through(chains, scores)
        return np.exp(through - through.max()).astype(np.float32)

    refined = initial

    def answer_distance(self, question: str) -> None:
        return None


@register
class FoGReasoner(Reasoner):
    """Foresight-over-Graph: learned triple scores and far-to-near feedback lead, the LLM keeps memory."""

    name = "fog"
    Settings = FoGReasonerSettings

    def __init__(self, context: Any, **overrides: Any):
        super().__init__(context, **overrides)
        self._trained: TrainedTripleScorer | None = None
        self._checked_checkpoint = False
        self._own_checkpoint = self._fog_checkpoint()
        own = self.settings.relations == "auto" and self._own_checkpoint is not None
        self.relations = RelationRanking(context, "embed" if own else self.settings.relations, self.settings.device)

    # ------------------------------------------------------------------ scorer
    def uses(self) -> Uses:
        """Besides the relation ranking: what scores the triples, fog's own checkpoint, the path
        scorer (``relations=trained``) or similarity, and fog's checkpoint when it is that."""
        if self.relations.mode == "trained":
            return super().uses() | Uses({"triple_scores": "path scorer"})
        if self._own_checkpoint is not None:
            return super().uses() | Uses({"triple_scores": "fog checkpoint"}, (self._own_checkpoint,))
        return super().uses() | Uses({"triple_scores": "similarity"})

    def checkpoint_path(self) -> FsPath | None:
        return checkpoint_location(self.settings.checkpoint, None if self.kg is None else self.kg.path)

    def _fog_checkpoint(self) -> FsPath | None:
        """fog's own trained scorer: a named checkpoint (it must load), else one at the default
        location; None when there is neither."""
        path = self.checkpoint_path()
        return path if path is not None and (path.is_file() or self.settings.checkpoint) else None

    def triple_scorer(self, question: str, topics: Sequence[str], chains: dict[str, RelationPath]) -> TripleScorer:
        """With ``relations=trained`` the path scorer over the chains the expansion records
        (``chains``); else the trained foresight scorer when its checkpoint exists (loaded once),
        else the similarity fallback.

        An explicitly named checkpoint must load; the default location may simply be empty.
        """
        names = [self.kg.name(t) for t in topics]
        if self.relations.mode == "trained":
            return ChainTripleScorer(self.relations, without_mentions(question, names), chains)
        if not self._checked_checkpoint:
            self._checked_checkpoint = True
            if self._own_checkpoint is not None:
                self._trained = TrainedTripleScorer.from_checkpoint(self._own_checkpoint, self.context.scorer.embedder,
                                                                   self.settings.device)
        if self._trained is not None:
            return self._trained
        return SimilarityTripleScorer(self.context.scorer, without_mentions(question, names))

    # ------------------------------------------------------------------ the method
    def solve(self, question: str, topics: list[str], result: Result) -> None:
        chains: dict[str, RelationPath] = {t: () for t in topics}  # the chain that first reached each node
        scorer = self.triple_scorer(question, topics, chains)
        result.notes.append(f"scores: {scorer.description}")
        sources = {t: node_of(self.kg, t) for t in topics}
        sub_questions = self.decompose(question, result) if self.settings.decompose else []
        memory: dict[TripleKey, Triple] = {}
        masked: set[TripleKey] = set()
        answers: list[Node] = []
        answered_round: int | None = None
        seen: dict[TripleKey, Triple] = {}      # every triple kept in any round
        dropped: dict[TripleKey, Triple] = {}   # every triple scored and not kept
        for round_number in range(1, int(self.settings.rounds) + 1):
            questions = [question, *sub_questions]
            expansion = self.expand(scorer, questions, sources, list(memory.values()), excluded=set(memory) | masked,
                                    chains=chains)
            scored = list(memory.values()) + expansion.triples
            refined = dict(zip((triple_key(t) for t in scored),
                               map(float, scorer.refined(questions, scored, expansion.levels))))
            seen.update((triple_key(t), t) for t in scored)
            dropped.update((triple_key(t), t) for t in expansion.dropped)
            ranked = sorted(expansion.triples, key=lambda t: -refined[triple_key(t)])
            potential = [t for t in ranked if refined[triple_key(t)] >= self.settings.tau_p]
            result.notes.append(f"round {round_number}: {expansion.scored} triples scored, {len(expansion.triples)} "
                                f"kept (> tau_e), {len(potential)} in the potential subgraph (>= tau_p)")
            if not memory and len(potential) < int(self.settings.min_potential) and len(ranked) > len(potential):
                potential = ranked[:int(self.settings.min_potential)]
                result.notes.append(f"round {round_number}: the memory is empty; the model sees the best "
                                    f"{len(potential)} triples, below tau_p included")
            potential = potential[:int(self.settings.llm_triples)]
            if not potential:
                result.notes.append(f"round {round_number}: nothing new above tau_p; the search stops")
                break
            update = self.update_memory(question, list(memory.values()), potential, set(sources), result)
            for triple in update.selected:
                memory.setdefault(triple_key(triple), triple)
            masked |= {triple_key(t) for t in update.shown} - set(memory)  # seen and not selected
            result.notes.append(f"round {round_number}: the model kept {len(update.selected)} triple(s), answered "
                                f"{[n.display for n in update.answers] or 'none'}")
            if update.dropped:
                result.notes.append(f"round {round_number}: dropped output not copied from the input: "
                                    f"{update.dropped}")
            if update.answers:  # the first round's answer leads; later rounds add to it, never replace it
                answers = list(dict.fromkeys([*answers, *update.answers]))
                if answered_round is None:
                    answered_round = round_number
            if answered_round is not None and round_number > answered_round:
                break
            sub_questions = update.follow_ups or sub_questions
        model_answers = [Answer(n.id, n.display, 1.0) for n in answers[:int(self.settings.max_answers)]]
        graph_answers = ([] if self.settings.answer_from == "model" and model_answers
                         else self.graph_answers(scorer, question, list(seen.values()), sources,
                                                 [t for key, t in dropped.items() if key not in seen]))
        if graph_answers:
            result.answers = graph_answers
            result.notes.append("answers: the ends of the best-scoring paths"
                                + (f" (the model predicted {[a.name for a in model_answers]})" if model_answers
                                   else " (the model predicted none)"))
        else:
            result.answers = model_answers
        support = list(seen.values())
        result.evidence = evidence_paths(list(sources), support, [a.id for a in result.answers])

    def decompose(self, question: str, result: Result) -> list[str]:
        """Sub-questions from the LLM (one call); none when the call fails."""
        schema = {"type": "object", "required": ["sub_questions"], "properties": {
            "sub_questions": {"type": "array", "maxItems": 3,
                              "items": {"type": "string", "maxLength": 100}}}}
        try:
            output = self.llm.json(prompts.render(PROMPTS, "decompose", question=question), schema,
                                   step="decompose", max_tokens=160)
        except PromptTooLongError as error:
            result.notes.append(skipped_call(error, "no sub-questions"))
            return []
        subs = [" ".join(str(s).split()) for s in output.get("sub_questions", []) if str(s).strip()]
        subs = [s for s in dict.fromkeys(subs) if s != question][:3]
        result.notes.append(f"sub-questions: {subs}")
        return subs

    def expand(self, scorer: TripleScorer, questions: list[str], sources: dict[str, Node], memory: list[Triple],
               excluded: set[TripleKey], chains: dict[str, RelationPath]) -> Expansion:
        """Layered BFS from the sources and the memory's nodes (at their distance from the sources):
        keep incident triples whose initial score exceeds ``tau_e``. ``levels`` cover the memory too,
        so the refined pass sees the memory paths the new triples continue; ``chains`` gains the
        relation chain that first reached each new node (:func:`reaching_chain`)."""
        expansion = Expansion(levels=bfs_levels(set(sources), memory))
        kept: set[TripleKey] = set()
        allowed = relation_filter(self.settings.relation_filter)
        frontier = list(sources.values()) + [node for t in memory for node in (t.head, t.tail)
                                              if node.id not in sources]
        frontier = list({node.id: node for node in frontier}.values())
        for layer in range(1, int(self.settings.hops) + 1):
            candidates: dict[TripleKey, Triple] = {}
            for node in frontier:
                for triple in self.kg.triples(node.id, limit=int(self.settings.triples_per_node)):
                    key = triple_key(triple)
                    if key not in excluded and key not in kept and allowed(triple.relation):
                        candidates.setdefault(key, triple)
            if not candidates:
                break
            triples = list(candidates.values())
            levels = dict(expansion.levels)
            for triple in triples:
                near = min(expansion.levels.get(triple.head.id, layer), expansion.levels.get(triple.tail.id, layer))
                for end in (triple.head.id, triple.tail.id):
                    levels.setdefault(end, near + 1)
            scores = scorer.initial(questions, triples, levels)
            expansion.scored += len(triples)
            order = [i for i in np.argsort(-scores, kind="stable") if scores[i] > self.settings.tau_e]
            order = order[:int(self.settings.layer_triples)]
            if len(sources) > 1:  # a triple from a reached node to another topic entity is support, kept
                order += self._bridges(triples, order, sources, expansion.levels)
            taken = set(order)
            expansion.dropped.extend(t for i, t in enumerate(triples) if i not in taken)
            reached: dict[str, Node] = {}
            for index in order:
                triple = triples[index]
                kept.add(triple_key(triple))
                expansion.triples.append(triple)
                chain = reaching_chain(triple, chains, expansion.levels)
                for end in (triple.head, triple.tail):
                    if end.id not in expansion.levels:
                        expansion.levels[end.id] = levels[end.id]
                        reached[end.id] = end
                        chains.setdefault(end.id, chain)
            frontier = list(reached.values())[:int(self.settings.frontier)]  # best incoming score first
            if not frontier:
                break
        return expansion

    @staticmethod
    def _bridges(triples: list[Triple], kept: list[int], sources: dict[str, Node], levels: dict[str, int]) -> list[int]:
        """Indexes of the triples not ``kept`` that join a source to a node the expansion reached."""
        reached = set(levels) | {end for i in kept for end in (triples[i].head.id, triples[i].tail.id)}
        chosen = set(kept)
        return [i for i, t in enumerate(triples) if i not in chosen and t.head.id != t.tail.id
                and (t.head.id in sources or t.tail.id in sources) and t.head.id in reached and t.tail.id in reached]

    def update_memory(self, question: str, memory: list[Triple], potential: list[Triple], sources: set[str],
                      result: Result) -> MemoryUpdate:
        """One LLM call: select triples, predict the answer, ask follow-ups; output checked against input."""
        memory_text = "\n".join(render_triple(t) for t in memory) or prompts.render(PROMPTS, "no_memory")
        rendered = [render_triple(t) for t in potential]

        def render(lines: list[str]) -> str:
            return prompts.render(PROMPTS, "memory_update", question=question, memory=memory_text,
                                  triples="\n".join(lines))

        shown_triples = {render_triple(t): t for t in [*memory, *potential]}
        schema = self._memory_schema(list(shown_triples), potential + memory, sources)
        kept_lines = self.llm.fit_options(render, rendered, reserve=self._json_budget(schema))
        if not kept_lines:
            result.notes.append("memory update: the triples do not fit the context; skipped")
            return MemoryUpdate([], [], [], [])
        shown = [*memory, *potential[:len(kept_lines)]]
        shown_triples = {render_triple(t): t for t in shown}
        schema = self._memory_schema(list(shown_triples), shown, sources)
        try:
            output = self.llm.json(render(kept_lines), schema, step="memory_update", max_tokens=256)
        except PromptTooLongError as error:
            result.notes.append(skipped_call(error))
            return MemoryUpdate([], [], [], [])
        update = check_update(output, shown_triples, _answer_options(shown, sources))
        update.shown = potential[:len(kept_lines)]
        return update

    def _memory_schema(self, triple_texts: list[str], shown: list[Triple], sources: set[str]) -> dict[str, Any]:
        names = list(_answer_options(shown, sources)) or [""]
        return {"type": "object", "required": ["selected_triplets", "predict_answer", "subsequent_question"],
                "properties": {
                    "selected_triplets": {"type": "array", "maxItems": int(self.settings.max_selected),
                                          "items": {"enum": triple_texts}},
                    "predict_answer": {"type": "array", "maxItems": int(self.settings.max_answers),
                                       "items": {"enum": names}},
                    "subsequent_question": {"type": "array", "minItems": 1, "maxItems": 3,
                                            "items": {"type": "string", "maxLength": 80}}}}

    @staticmethod
    def _json_budget(schema: dict[str, Any]) -> int:
        from localkg.llm.grammars import bounded_json_grammar

        return bounded_json_grammar(schema, 256).max_tokens

    def graph_answers(self, scorer: TripleScorer, question: str, kept: list[Triple], sources: dict[str, Node],
                      dropped: list[Triple]) -> list[Answer]:
        """Answers ranked by the scores of the paths that reach them (:func:`answer_scores`) through
        the triples the expansion kept in any round (the memory included), weighted by the scorer's
        answer-distance prediction.

        The scores come from one refined pass against the question alone over every triple the
        expansion scored, the ``dropped`` ones (below ``tau_e``) included. Against the question
        alone: the rounds' own scores were taken against sub-questions and follow-ups the 270M
        model wrote ("Who is the author of CQ?" for "the film CQ starred which actors"), which
        the scorer never saw in training. Over the dropped triples too: the scorer was trained on
        whole BFS neighbourhoods, and its feedback scores the same kept triples differently when
        their surroundings are missing (replaying 200 MetaQA 2-hop questions, distance-weighted:
        0.48 over the kept triples alone, 0.69 with the dropped ones as context). Answers come from
        kept triples only: a path needs its every step, and the last steps are often below
        ``tau_p``, but a triple below ``tau_e`` is not evidence."""
        if not kept:
            return []
        graph = kept + dropped
        final = scorer.refined([question], graph, bfs_levels(sources, graph))
        scores = dict(zip((triple_key(t) for t in graph), map(float, final)))
        plain = without_mentions(question, [node.display for node in sources.values()])
        return answer_scores(kept, scores, list(sources), int(self.settings.max_answers),
                             distance=scorer.answer_distance(plain))


def _answer_options(shown: Sequence[Triple], sources: set[str]) -> dict[str, Node]:
    """Display name → node for every node of ``shown`` but the sources, the ends of the paths (nodes
    that lead nowhere further) first. Not only the ends: "films X directed" must stay answerable
    when a shown triple continues from one of those films."""
    levels = bfs_levels(sources, shown)
    options = {node.display: node for node, _score in path_ends(shown, levels, {}, sources)}
    for triple in shown:
        for node in (triple.head, triple.tail):
            if node.id not in sources:
                options.setdefault(node.display, node)
    return options


def check_update(output: dict[str, Any], shown_triples: dict[str, Triple], names: dict[str, Node]) -> MemoryUpdate:
    """Keep only what was copied exactly from the input: triples and answer names that were shown."""
    selected, answers, dropped = [], [], []
    for text in output.get("selected_triplets") or []:
        if isinstance(text, str) and text in shown_triples:
            if shown_triples[text] not in selected:
                selected.append(shown_triples[text])
        else:
            dropped.append(str(text))
    for name in output.get("predict_answer") or []:
        if isinstance(name, str) and name in names:
            if names[name] not in answers:
                answers.append(names[name])
        elif str(name).strip():
            dropped.append(str(name))
    follow_ups = [" ".join(str(q).split()) for q in output.get("subsequent_question") or [] if str(q).strip()]
    return MemoryUpdate(selected, answers, follow_ups[:3], dropped)


_UNREACHED = 1 << 30  # the level of a node the BFS did not reach


def near_and_far(triple: Triple, levels: dict[str, int]) -> tuple[Node, Node]:
    """The triple's ends ordered by BFS ``levels`` from the sources (a node without a level is
    farther than any with one; on a tie the head is the near end)."""
    head_first = levels.get(triple.head.id, _UNREACHED) <= levels.get(triple.tail.id, _UNREACHED)
    return (triple.head, triple.tail) if head_first else (triple.tail, triple.head)


def answer_scores(triples: Sequence[Triple], scores: dict[TripleKey, float], sources: Sequence[str],
                  limit: int, within: float = 0.5, distance: Sequence[float] | None = None) -> list[Answer]:
    """Nodes ranked as answers by the scores of the paths that reach them, best first, keeping
    those that score at least ``within`` times the best (a list question's answers score alike).

    From each source, a node's path score is the best, over the paths that move one BFS level
    outwards per triple, of the weakest triple on the path; the node's answer score is that path
    score times one minus the best score of a triple that continues outwards from it (a film whose
    writer scores high is a step on the way, not the answer; a triple to another source is no
    continuation but support), times ``distance[level]``, the predicted probability that the
    answer lies as many hops out as the node (when given). With several sources the scores are
    averaged, and the nodes reached from the most sources come first and alone: a question with
    two topic entities asks for what both lead to, however strongly a hub's neighbour scores from
    one of them. Sources are never answers, nor nodes that score 0.

    >>> top_hat, sandrich, ginger = (Node(name, name) for name in ("Top Hat", "Mark Sandrich", "Ginger Rogers"))
    >>> triples = [Triple(top_hat, "starred_actors", ginger), Triple(top_hat, "directed_by", sandrich)]
    >>> scores = {triple_key(triples[0]): 0.9, triple_key(triples[1]): 0.2}
    >>> [(a.name, a.score) for a in answer_scores(triples, scores, ["Ginger Rogers"], 5)]
    [('Top Hat', 0.72)]
    >>> [a.name for a in answer_scores(triples, scores, ["Ginger Rogers"], 5, within=0.0)]
    ['Top Hat', 'Mark Sandrich']

    "Who directed the films Ginger Rogers starred in": the predicted distance moves the answer
    one hop out.

    >>> [a.name for a in answer_scores(triples, scores, ["Ginger Rogers"], 5, distance=[0.0, 0.1, 0.9])]
    ['Mark Sandrich']

    Two topic entities: the node both reach wins over a better-scored neighbour of one.

    >>> astaire, holiday_inn = Node("Fred Astaire", "Fred Astaire"), Node("Holiday Inn", "Holiday Inn")
    >>> triples = [Triple(top_hat, "directed_by", sandrich), Triple(top_hat, "starred_actors", astaire),
    ...            Triple(holiday_inn, "directed_by", sandrich)]
    >>> scores = {triple_key(triples[0]): 0.4, triple_key(triples[1]): 0.4, triple_key(triples[2]): 0.9}
    >>> [a.name for a in answer_scores(triples, scores, ["Mark Sandrich", "Fred Astaire"], 5)]
    ['Top Hat']
    """
    total: dict[str, float] = {}
    support: dict[str, int] = {}
    nodes: dict[str, Node] = {}
    for source in sources:
        levels = bfs_levels([source], triples)
        reach, onward = {source: 1.0}, {}
        crossing = [(t, *near_and_far(t, levels)) for t in triples]
        crossing = [(t, near, far) for t, near, far in crossing
                    if levels.get(far.id) == levels.get(near.id, -2) + 1 and far.id not in sources]
        for triple, near, far in sorted(crossing, key=lambda c: levels[c[1].id]):
            score = scores.get(triple_key(triple), 0.0)
            onward[near.id] = max(onward.get(near.id, 0.0), score)
            if near.id in reach and min(reach[near.id], score) > reach.get(far.id, -1.0):
                reach[far.id], nodes[far.id] = min(reach[near.id], score), far
        for node_id, path_score in reach.items():
            weight = 1.0 if distance is None else _at(distance, levels[node_id])
            total[node_id] = (total.get(node_id, 0.0)
                              + weight * path_score * (1.0 - onward.get(node_id, 0.0)) / len(sources))
            support[node_id] = support.get(node_id, 0) + 1
    ranked = sorted((node_id for node_id in total if node_id not in sources), key=lambda n: (-support[n], -total[n]))
    if not ranked:
        return []
    best, most = total[ranked[0]], support[ranked[0]]
    return [Answer(n, nodes[n].display, round(total[n], 6)) for n in ranked[:limit]
            if support[n] == most and total[n] >= within * best and total[n] > 0]


def _at(probabilities: Sequence[float], index: int) -> float:
    return float(probabilities[index]) if index < len(probabilities) else 0.0


def path_ends(triples: Sequence[Triple], levels: dict[str, int], scores: dict[TripleKey, float],
              sources: set[str]) -> list[tuple[Node, float]]:
    """Far ends of ``triples`` (by BFS ``levels`` from the sources) that are not the near end of
    another one, best triple score first (a triple without a score counts 1)."""
    nears, best = set(), {}
    for triple in triples:
        near, far = near_and_far(triple, levels)
        nears.add(near.id)
        score = scores.get(triple_key(triple), 1.0)
        if far.id not in sources and score > best.get(far.id, (None, -1.0))[1]:
            best[far.id] = (far, score)
    ends = [(node, float(score)) for node_id, (node, score) in best.items() if node_id not in nears]
    ends.sort(key=lambda pair: -pair[1])
    return ends


def evidence_paths(sources: Sequence[str], triples: Sequence[Triple], targets: Sequence[str],
                   limit: int = 5) -> list[Path]:
    """Shortest paths from a source to each target through ``triples`` (BFS, either direction)."""
    adjacent: dict[str, list[Step]] = {}
    for triple in triples:
        adjacent.setdefault(triple.head.id, []).append(Step(triple, True))
        adjacent.setdefault(triple.tail.id, []).append(Step(triple, False))
    parent: dict[str, Step | None] = {s: None for s in sources}
    queue = deque(sources)
    while queue:
        node = queue.popleft()
        for step in adjacent.get(node, ()):
            if step.target.id not in parent:
                parent[step.target.id] = step
                queue.append(step.target.id)
    paths = []
    for target in list(dict.fromkeys(targets))[:limit]:
        if target not in parent or parent[target] is None:
            continue
        steps, node = [], target
        while parent[node] is not None:
            step = parent[node]
            steps.append(step)
            node = step.source.id
        paths.append(Path(tuple(reversed(steps))))
    return paths
