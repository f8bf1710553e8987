"""Paths-over-Graph (Tan et al., WWW 2025) as the ``paths`` reasoner: the model is handed
*reasoning paths that contain every topic entity* instead of loose triples.

1. **Question analysis**: simple questions, the predicted depth and, with several topic entities,
   the *indicator* (their order and where the answer sits among them).
2. **Topic-entity paths** from the predicted depth up to ``max_depth``: relation paths from one
   topic, or the paths connecting consecutive topics; paths sharing a relation pattern merge into
   one candidate with an answer set (PoG's supernodes).
3. **Three-step pruning**: embedding similarity (``fuzzy_width``), LLM branch reduction
   (``branch_width``), LLM precise selection (``width``).
4. **Sufficiency check**, else a deeper stage, LLM-supplement paths, node expansion.

Embeddings rank every list and the model chooses among the top ``options``, the embedding order
being the fallback; answers are read off the graph. With ``depth_from=distance`` the depth comes
from the fog checkpoint's answer-distance head. docs/reasoners.md lists every adaptation.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from localkg import prompts
from localkg.reasoners.base import Answer, Reasoner, Result, register
from localkg.reasoners.common import (DEFAULT_RELATION_FILTER, ask_yes_no, bulleted, model_choice, model_json,
                                     node_of, relation_filter, string_list)
from localkg.reasoners.distance import AnswerDistance, DistanceSettings, describe, likely_depth
from localkg.reasoners.relation_paths import rank_relation_paths
from localkg.reasoners.relation_ranking import RelationRanking, RelationsMode, path_chain
from localkg.reasoners.settings import NonNegativeInt, PositiveInt
from localkg.store.model import CVT, IN, OUT, Node, Path, Step, Triple
from localkg.text import readable_relation, without_mentions

PROMPTS = "paths"
EXAMPLES = 5  # example paths kept per candidate (evidence)
ANSWER_MARK = "?"


def step_text(step: Step) -> str:
    """A walked edge as words: ``starred actors⁻¹`` when walked against the fact."""
    return _walked(step.triple.relation, OUT if step.forward else IN)


@dataclass(frozen=True)
class Candidate:
    """A clustered reasoning path: concrete paths with one relation pattern, and the answer set
    at the answer position (index into each example's node sequence)."""

    pattern: tuple[str, ...]
    examples: tuple[Path, ...]
    answers: tuple[Node, ...]
    answer_index: int
    score: float
    origin: str = "topic"

    @property
    def key(self) -> tuple[int, int, frozenset[str]]:
        """Length, answer position and answer set: what makes two candidates the same answer."""
        return len(self.pattern), self.answer_index, frozenset(n.id for n in self.answers)

    def render(self, shown: int = 3) -> str:
        """``Tom Hanks → starred actors⁻¹ → Forrest Gump → directed by → [Robert Zemeckis +2 more]``."""
        example = self.examples[0]
        nodes = [example.start] + [step.target for step in example.steps]
        names = ", ".join(node.display for node in self.answers[:shown])
        more = len(self.answers) - shown
        answer = f"[{names}{f' +{more} more' if more > 0 else ''}]"
        parts = [answer if i == self.answer_index else node.display for i, node in enumerate(nodes)]
        text = parts[0]
        for relation, part in zip(self.pattern, parts[1:]):
            text += f" → {relation} → {part}"
        return text


@dataclass
class Stage:
    """One exploration stage: what was selected and how sufficient the model found it."""

    label: str
    selected: list[Candidate]
    sufficient: bool
    p_yes: float


@dataclass(frozen=True)
class PathsReasonerSettings(DistanceSettings):
    """Settings of ``paths``."""

    max_depth: PositiveInt = 3  # D_max (paper: 3)
    fuzzy_width: PositiveInt = 80  # W1: paths kept by embedding similarity (paper: 80)
    branch_width: PositiveInt = 20  # paths kept by LLM branch reduction (code: 20)
    width: PositiveInt = 3  # W_max: paths kept by LLM precise selection (paper: 3)
    options: PositiveInt = 5  # candidates shown to the model per choice
    max_frontier: PositiveInt = 30  # answer nodes kept per relation pattern
    max_paths: PositiveInt = 500  # connecting paths read per entity pair
    relation_filter: str = DEFAULT_RELATION_FILTER  # graph reduction: relations never in a path
    supplement: bool = True  # LLM-supplement paths when the topic paths are not enough
    expand_total: NonNegativeInt = 10  # node expansion: edges added in all (three per round)
    summary_tokens: NonNegativeInt = 0  # path summarising before the check (0: off, as the default setting)
    analysis_tokens: PositiveInt = 96
    max_answers: PositiveInt = 50
    relations: RelationsMode = "auto"  # relation ranking: auto | embed | trained (relation_ranking.py)


@register
class PathsReasoner(Reasoner):
    """Paths-over-Graph: reasoning paths through all topic entities, pruned in three steps."""

    name = "paths"
    Settings = PathsReasonerSettings

    def __init__(self, context: Any, **overrides: Any):
        super().__init__(context, **overrides)
        self._distance = AnswerDistance(context, self.settings)
        self.relations = RelationRanking(context, self.settings.relations, self.settings.device)

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        notes = result.notes
        nodes = [node_of(self.kg, t) for t in topics]
        topic_ids = frozenset(n.id for n in nodes)
        query = without_mentions(question, [n.display for n in nodes])
        head_depth = None
        if self.settings.depth_from == "distance" and len(nodes) == 1:
            distance = self._distance.predict(query)
            head_depth = likely_depth(distance, self.settings.max_depth)
            notes.append(describe(distance, head_depth))
        trained_depth = head_depth is not None
        split, depth = self.analyse(question, topics, query, notes, head_depth)
        split_text = prompts.render(PROMPTS, "split", questions=" | ".join(split)) if split else ""
        chain, slot = self.indicator(question, nodes, notes) if len(nodes) > 1 else (nodes, 1)
        stages: list[Stage] = []

        checked: set[frozenset] = set()

        def run(label: str, candidates: list[Candidate]) -> Stage | None:
            """Prune and check one stage's candidates; the stage when it is sufficient (always, at
            the trained depth)."""
            keys = frozenset(c.key for c in candidates)
            if not candidates or keys in checked:
                notes.append(f"{label}: no {'new ' if candidates else ''}candidate path")
                return None
            checked.add(keys)
            stages.append(self._stage(question, split_text, label, candidates, chain, notes, check=not trained_depth))
            return stages[-1] if stages[-1].sufficient else None

        done: Stage | None = None
        for current in range(depth, self.settings.max_depth + 1):
            done = run(f"depth {current}", self.topic_paths(chain, slot, current, query, question))
            if done:
                break
        if not done and self.settings.supplement:
            done = run("supplement", self.supplement_paths(question, chain, query, notes))
        expanded, grown_from = 0, set()
        while not done and stages and expanded < self.settings.expand_total:
            pool = stages[-1].selected
            fresh = [c for c in pool if c.key not in grown_from]
            grown = self.expand(fresh, query, self.settings.expand_total - expanded, topic_ids)
            grown_from |= {c.key for c in fresh}
            if not grown:
                break
            expanded += len(grown)
            done = run(f"expansion ({expanded} edges)", merge_parallel(grown + pool))
        if not stages:
            notes.append("no answer found: no path through the topic entities")
            return
        if done is None:
            done = stages[0]
            notes.append(f"no stage was judged sufficient; answered from the first, {done.label}: the topic-entity "
                         "paths at the start depth")
        self._answer(result, done, topic_ids)

    # -------------------------------------------------------------- question analysis
    def analyse(self, question: str, topics: list[str], query: str, notes: list[str],
                head_depth: int | None = None) -> tuple[list[str], int]:
        """Split questions and the depth to start at: the model's prediction, or with one topic entity
        the length of the relation path that best matches the question when that is shorter (the
        search only grows the depth, so a low start costs a stage while a high one skips the
        answer; the small model overestimates). An unusable prediction counts as ``max_depth``.
        With ``head_depth`` (the trained head's) that is the depth, and neither estimate is made:
        the relation-path ranking alone is dozens of graph queries."""
        max_depth = self.settings.max_depth
        schema = {"type": "object", "properties": {
            "split_questions": {"type": "array", "items": {"type": "string", "maxLength": 60}, "maxItems": 3},
            "depth": {"type": "integer", "enum": list(range(1, max_depth + 1))}},
            "required": ["split_questions", "depth"]}
        value = model_json(self.llm, prompts.render(PROMPTS, "analyse", question=question), schema, step="analyse",
                           max_tokens=self.settings.analysis_tokens, notes=notes)
        split = string_list(value.get("split_questions"), 3)
        if head_depth is not None:
            notes.append(f"start depth {head_depth} (trained head); split questions: {' | '.join(split) or '(none)'}")
            return split, head_depth
        predicted = value.get("depth")
        if not isinstance(predicted, int) or isinstance(predicted, bool) or not 1 <= predicted <= max_depth:
            notes.append("analyse: unusable depth from the model")
            predicted = max_depth
        depth = predicted
        if len(topics) == 1:
            ranked = rank_relation_paths(self.kg, self.relations, question, topics[0], max_depth=max_depth,
                                         beam=5, max_frontier=self.settings.max_frontier)
            graph_depth = len(ranked[0].steps) if ranked else predicted
            depth = min(predicted, graph_depth)
            notes.append(f"depth: model {predicted}, best-matching relation path {graph_depth}")
        notes.append(f"start depth {depth}; split questions: {' | '.join(split) or '(none)'}")
        return split, depth

    def indicator(self, question: str, nodes: list[Node], notes: list[str]) -> tuple[list[Node], int]:
        """The entity order and the answer position: ``slot`` i puts the answer before ``chain[i]``
        (0: before the first, len: after the last). The model picks among the positions in the
        given order; "between the first two" leads, as conjunctive questions need."""
        slots = list(range(1, len(nodes))) + [0, len(nodes)]
        options = []
        for slot in slots:
            names = [n.display for n in nodes]
            names.insert(slot, ANSWER_MARK)
            options.append(" → ".join(names))
        prompt = prompts.render(PROMPTS, "indicator", question=question,
                                entities=", ".join(n.display for n in nodes))
        picks = model_choice(self.llm, prompt, options, step="indicator", k=1, notes=notes)
        slot = slots[picks[0]] if picks else slots[0]
        notes.append(f"indicator: {options[slots.index(slot)]}")
        return nodes, slot

    # -------------------------------------------------------------- exploration
    def topic_paths(self, chain: list[Node], slot: int, depth: int, query: str, question: str) -> list[Candidate]:
        """Candidates through the topic entities at ``depth``: relation paths of exactly that length
        from a single entity, or paths of at most that length connecting the two entities the
        answer lies between."""
        topics = frozenset(n.id for n in chain)
        if len(chain) == 1 or slot in (0, len(chain)):
            start = chain[0] if slot == 0 else chain[-1]
            return self._paths_from(start, depth, question, topics)
        return self._connecting(chain[slot - 1], chain[slot], depth, query, topics)

    def _paths_from(self, start: Node, depth: int, question: str, topics: frozenset[str]) -> list[Candidate]:
        ranked = rank_relation_paths(self.kg, self.relations, question, start.id, max_depth=depth,
                                     beam=self.settings.fuzzy_width, max_frontier=self.settings.max_frontier,
                                     depth_penalty=0.0, examples=EXAMPLES)
        candidates = []
        keep = relation_filter(self.settings.relation_filter)
        for path in ranked:
            if not all(keep(relation) for relation, _direction in path.steps):
                continue
            answers = tuple(n for n in path.tails if n.id not in topics)
            examples = tuple(e for e in path.examples if _simple(e))
            if len(path.steps) != depth or not answers or not examples:
                continue
            pattern = tuple(_walked(rel, direction) for rel, direction in path.steps)
            candidates.append(Candidate(pattern, examples, answers, depth, path.similarity))
        return merge_parallel(candidates)

    def _connecting(self, first: Node, second: Node, depth: int, query: str, topics: frozenset[str]) -> list[Candidate]:
        groups: dict[tuple[tuple[str, ...], int], list[Path]] = {}
        keep = relation_filter(self.settings.relation_filter)
        for path in self.kg.paths(first.id, second.id, max_hops=depth, limit=self.settings.max_paths):
            if not _simple(path) or not all(keep(step.triple.relation) for step in path.steps):
                continue
            nodes = [path.start] + [step.target for step in path.steps]
            pattern = tuple(step_text(step) for step in path.steps)
            for index in range(1, len(nodes) - 1):
                if nodes[index].kind != CVT and nodes[index].id not in topics:
                    groups.setdefault((pattern, index), []).append(path)
        return self._candidates(groups, query, origin="topic")

    def _candidates(self, groups: dict[tuple[tuple[str, ...], int], list[Path]], query: str,
                    origin: str) -> list[Candidate]:
        if not groups:
            return []
        keys = list(groups)
        scores = self.relations.chain_scores(query, [path_chain(groups[key][0]) for key in keys],
                                             [_labels(key[0]) for key in keys])
        candidates = []
        for (pattern, index), score in zip(keys, scores):
            paths = groups[(pattern, index)]
            at_answer = [([path.start] + [s.target for s in path.steps])[index] for path in paths]
            answers = tuple(node for node, _n in Counter(at_answer).most_common(self.settings.max_frontier))
            # one example path per answer (parallel edges would otherwise repeat the first answer)
            first_path = {node.id: path for node, path in reversed(list(zip(at_answer, paths)))}
            examples = tuple(first_path[node.id] for node in answers[:EXAMPLES])
            candidates.append(Candidate(pattern, examples, answers, index, float(score), origin))
        return merge_parallel(candidates)

    def supplement_paths(self, question: str, chain: list[Node], query: str, notes: list[str]) -> list[Candidate]:
        """LLM-supplement paths: the model's guessed answers, found in the graph by name and connected
        to the topic entities (at most ``max_depth`` hops)."""
        schema = {"type": "object", "properties": {
            "answers": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 3}},
            "required": ["answers"]}
        value = model_json(self.llm, prompts.render(PROMPTS, "supplement", question=question), schema,
                           step="supplement", max_tokens=64, notes=notes)
        guesses = string_list(value.get("answers"), 3)
        topics = frozenset(n.id for n in chain)
        found: dict[str, Node] = {}
        for guess in guesses:
            for label in dict.fromkeys((guess, guess.replace(" ", "_"))):
                for node in self.kg.find(label):
                    if node.id not in topics:
                        found.setdefault(node.id, node)
        notes.append(f"supplement: the model guessed {', '.join(guesses) or 'nothing'}; "
                     f"{len(found)} found in the graph")
        groups: dict[tuple[tuple[str, ...], int], list[Path]] = {}
        for node in list(found.values())[:3]:
            for topic in chain:
                for path in self.kg.paths(topic.id, node.id, max_hops=self.settings.max_depth, limit=20):
                    groups.setdefault((tuple(step_text(s) for s in path.steps), len(path)), []).append(path)
        return self._candidates(groups, query, origin="supplement")

    def expand(self, selected: Sequence[Candidate], query: str, budget: int,
               topics: frozenset[str]) -> list[Candidate]:
        """Node expansion: each selected path grows by one hop from its answer nodes, along the
        best-matching relation (seen at its example paths' ends) that reaches nodes not yet on
        the path; three edges per round, ``budget`` in all."""
        grown = []
        for candidate in list(selected)[: min(self.settings.width, budget)]:
            labels: dict[tuple[str, str], str] = {}
            for example in candidate.examples:
                for count in self.kg.relations(example.end.id):
                    labels.setdefault((count.relation, count.direction), count.label)
            keys = list(labels)
            scores = self.relations.chain_scores(query, [path_chain(candidate.examples[0]) + (k,) for k in keys],
                                                 [(*_labels(candidate.pattern), readable_relation(labels[k]))
                                                  for k in keys])
            on_path = topics | {n.id for e in candidate.examples for n in [e.start] + [s.target for s in e.steps]}
            for index in sorted(range(len(keys)), key=lambda i: -float(scores[i])):
                extension = self._extend(candidate, keys[index], on_path, float(scores[index]))
                if extension is not None:
                    grown.append(extension)
                    break
        return grown

    def _extend(self, candidate: Candidate, key: tuple[str, str], on_path: set[str] | frozenset[str],
                score: float) -> Candidate | None:
        """``candidate`` one hop longer along ``key``, or None when that reaches nothing new."""
        relation, direction = key
        reached: Counter = Counter()
        steps: dict[str, Step] = {}
        for node in candidate.answers[: self.settings.max_frontier]:
            for target in self.kg.neighbors(node.id, relation, direction, limit=self.settings.max_frontier):
                if target.id not in on_path:
                    triple = Triple(node, relation, target) if direction == OUT else Triple(target, relation, node)
                    reached[target] += 1
                    steps.setdefault(node.id, Step(triple, direction == OUT))
        examples = tuple(Path(e.steps + (steps[e.end.id],)) for e in candidate.examples if e.end.id in steps)
        if not reached or not examples:
            return None
        pattern = candidate.pattern + (_walked(relation, direction),)
        answers = tuple(n for n, _c in reached.most_common(self.settings.max_frontier))
        return Candidate(pattern, examples, answers, len(pattern), score, "expansion")

    # -------------------------------------------------------------- pruning and the check
    def _stage(self, question: str, split: str, label: str, candidates: list[Candidate], chain: list[Node],
               notes: list[str], check: bool = True) -> Stage:
        fuzzy = sorted(candidates, key=lambda c: -c.score)[: self.settings.fuzzy_width]
        reduced = self._branch_reduction(question, fuzzy, chain, notes)
        selected = self._precise_selection(question, split, reduced, notes)
        paths_text = bulleted([c.render() for c in selected])
        if self.settings.summary_tokens > 0:
            schema = {"type": "object", "properties": {"summary": {"type": "string", "maxLength": 160}},
                      "required": ["summary"]}
            value = model_json(self.llm, prompts.render(PROMPTS, "summary", question=question, paths=paths_text),
                               schema, step="summary", max_tokens=self.settings.summary_tokens, notes=notes)
            summary = value.get("summary")
            if isinstance(summary, str) and summary.strip():
                paths_text += f"\nSummary: {' '.join(summary.split())}"
        if check:
            sufficient, p_yes = ask_yes_no(self.llm, prompts.render(PROMPTS, "sufficient", question=question,
                                                                      split=split, paths=paths_text),
                                             step="sufficient", notes=notes)
            verdict = f"sufficient={sufficient} (P(yes)={p_yes:.2f})"
        else:
            sufficient, p_yes, verdict = True, 1.0, "at the trained depth: answers without a check"
        notes.append(f"{label}: {len(candidates)} candidate paths, {len(reduced)} after branch reduction; "
                     f"selected {' ; '.join(c.render(2) for c in selected)}; {verdict}")
        return Stage(label, selected, sufficient, p_yes)

    def _branch_reduction(self, question: str, candidates: list[Candidate], chain: list[Node],
                          notes: list[str]) -> list[Candidate]:
        """Keep the candidates under the first steps the model picks (and the embedding's best one)."""
        limit = self.settings.branch_width
        branches = list(dict.fromkeys(c.pattern[0] for c in candidates))
        if len(candidates) <= limit or len(branches) < 2:
            return candidates[:limit]
        shown = branches[: self.settings.options]
        start = candidates[0].examples[0].start.display
        prompt = prompts.render(PROMPTS, "branch", question=question, topic=start)
        picks = model_choice(self.llm, prompt, [f"{start} → {b} → …" for b in shown], step="branch", k=2,
                             notes=notes)
        kept = {branches[0]} | {shown[i] for i in (picks or [])}
        return [c for c in candidates if c.pattern[0] in kept][:limit]

    def _precise_selection(self, question: str, split: str, candidates: list[Candidate],
                           notes: list[str]) -> list[Candidate]:
        """The model orders the top ``options`` candidates; its picks first, then the embedding order."""
        width = self.settings.width
        if len(candidates) <= 1:
            return candidates[:width]
        shown = candidates[: self.settings.options]
        picks = model_choice(self.llm, prompts.render(PROMPTS, "precise", question=question, split=split),
                             [c.render() for c in shown], step="precise", k=width, notes=notes) or []
        order = list(dict.fromkeys(list(picks) + list(range(len(candidates)))))
        return [candidates[i] for i in order[:width]]

    def _answer(self, result: Result, stage: Stage, topics: frozenset[str]) -> None:
        best = stage.selected[0]
        answers = [n for n in best.answers if n.id not in topics][: self.settings.max_answers]
        count = len(answers)
        result.answers = [Answer(n.id, n.display, round(1.0 - i / max(count, 1), 4)) for i, n in enumerate(answers)]
        result.evidence = list(best.examples) + [path for other in stage.selected[1:] for path in other.examples[:1]]


def _walked(relation: str, direction: str) -> str:
    """A relation as words, marked ``⁻¹`` when walked against the fact."""
    return readable_relation(relation) + ("⁻¹" if direction == IN else "")


def _labels(pattern: tuple[str, ...]) -> tuple[str, ...]:
    """A pattern's relation words without the direction marks, for ``path_similarities``."""
    return tuple(part.removesuffix("⁻¹") for part in pattern)


def _simple(path: Path) -> bool:
    """No node twice: a walk that comes back to where it was is no reasoning path."""
    ids = [path.start.id] + [step.target.id for step in path.steps]
    return len(set(ids)) == len(ids)


def merge_parallel(candidates: list[Candidate]) -> list[Candidate]:
    """Graph reduction: candidates of the same length with the same answer position and answer set
    are one (parallel edges, or two relations that say the same); the best-scoring one stays."""
    best: dict[tuple[int, int, frozenset[str]], Candidate] = {}
    for candidate in sorted(candidates, key=lambda c: -c.score):
        best.setdefault(candidate.key, candidate)
    return list(best.values())
