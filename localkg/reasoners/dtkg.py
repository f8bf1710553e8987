"""DTKG, the dual-track knowledge-graph reasoner (arXiv 2510.16302), as ``dtkg``.

A few-shot classifier (the paper's rules and examples) routes each question to a branch:

* **chain** (A→B→C): relations of the central entity are scored by cosine similarity (or by the
  trained path scorer, ``relations=trained``) then a re-rank (``alpha·rerank + (1-alpha)·cos``); a depth-first search follows the best first, a
  path scoring the product of its relations' scores, up to ``d_max``, with an LLM sufficiency
  check after each step; the answer is the end entities of the ``top_paths`` best paths.
* **parallel** (independent facts): the LLM drafts an answer and splits it into atomic facts;
  each fact's subject is linked by string similarity and its best triple verifies or rewrites it.

The denoiser drops administrative relations (ID, source, version, metadata) and those the LLM
judges unnecessary. No cross-encoder ships offline, so the re-rank is the LLM's constrained
score over the ``rerank_k`` best candidates. docs/reasoners.md lists every adaptation.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from localkg import prompts
from localkg.errors import PromptTooLongError
from localkg.reasoners.base import Answer, Reasoner, Result, register, skipped_call
from localkg.reasoners.common import (DEFAULT_RELATION_FILTER, AnswerSource, node_of, relation_filter, split_answers,
                                     triple_words)
from localkg.reasoners.relation_ranking import RelationRanking, RelationsMode
from localkg.reasoners.settings import NonNegativeInt, PositiveInt, UnitFloat
from localkg.store.model import OUT, Node, Path, RelationPath, Step, Triple
from localkg.text import readable_relation, without_mentions

PROMPTS = "dtkg"
CHAIN, PARALLEL = "chain", "parallel"

#: The paper's "irrelevant relation keyword library" (administrative relations).
INVALID_RELATION_WORDS = frozenset({"id", "ids", "source", "sources", "version", "versions", "metadata"})


def relation_label_words(label: str) -> list[str]:
    """Words of a relation label: split on punctuation and camelCase, lower-cased
    (``wikidata:ID`` → [wikidata, id]; ``imdbId`` → [imdb, id])."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", label)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def is_administrative(label: str) -> bool:
    """The denoiser's label rule: an ID/source/version/metadata relation carries no reasoning."""
    return any(word in INVALID_RELATION_WORDS for word in relation_label_words(label))


def render_triple(triple: Triple) -> str:
    return f"({triple.head.display}, {triple.relation}, {triple.tail.display})"


@dataclass
class ChainPath:
    """A relation path from the central entity: its steps, score (product), ends and one example walk."""

    steps: tuple[tuple[str, str], ...]
    score: float
    ends: list[Node]
    example: Path

    def text(self) -> str:
        return " → ".join(readable_relation(r) if d == OUT else f"{readable_relation(r)} (reverse)"
                          for r, d in self.steps)


@dataclass
class FactCheck:
    """One atomic fact of the parallel branch and what the graph said about it."""

    fact: str
    subject: Node
    best: Triple | None = None
    score: float = 0.0
    verified: bool = False
    revised: str = ""
    ranked: list[tuple[Triple, float]] = field(default_factory=list)


@dataclass(frozen=True)
class DTKGReasonerSettings:
    """Settings of ``dtkg``."""

    route: Literal["auto", "chain", "parallel"] = "auto"  # auto | chain | parallel (forced, for ablations)
    alpha: UnitFloat = 0.5  # weight of the re-rank score against cosine
    top_n: PositiveInt = 50  # N: cosine-stage candidates
    rerank_k: PositiveInt = 8  # candidates the LLM re-scores (one call)
    theta: UnitFloat = 0.1  # combined-score threshold for a relation
    necessity_theta: UnitFloat = 0.3  # denoiser: P(needed) below this drops a relation
    necessity_k: NonNegativeInt = 2  # relations the necessity score checks per step
    d_max: PositiveInt = 3
    w_max: PositiveInt = 3
    max_expansions: PositiveInt = 6  # DFS steps at most (backtracking included)
    end_nodes: PositiveInt = 20  # end nodes of a path whose relations are read
    top_paths: PositiveInt = 3
    max_facts: PositiveInt = 2
    max_answers: PositiveInt = 5
    answer_from: AnswerSource = "graph"  # "graph": answers in score order; "model": the LLM picks the first (the paper)
    early_stop: bool = True
    sufficient_p: UnitFloat = 0.7  # P(yes) that stops the search (see docs/reasoners.md: measured)
    relation_filter: str = DEFAULT_RELATION_FILTER
    relations: RelationsMode = "auto"  # chain branch's first stage: auto | embed (cosine) | trained


@register
class DTKGReasoner(Reasoner):
    """Dual-track: classify chained vs parallel, then KG path search or KG fact verification."""

    name = "dtkg"
    Settings = DTKGReasonerSettings

    def __init__(self, context: Any, **overrides: Any):
        super().__init__(context, **overrides)
        self.relations = RelationRanking(context, self.settings.relations)

    # ------------------------------------------------------------------ routing
    def classify(self, question: str, result: Result) -> str:
        """``chain`` when the model says the question needs a shared intermediate entity."""
        if self.settings.route in (CHAIN, PARALLEL):
            result.notes.append(f"route: {self.settings.route} (forced)")
            return self.settings.route
        try:
            chained, p_yes = self.llm.yes_no(prompts.render(PROMPTS, "classify", question=question), step="classify")
        except PromptTooLongError as error:
            result.notes.append(skipped_call(error, "routed to chain"))
            return CHAIN
        route = CHAIN if chained else PARALLEL
        result.notes.append(f"route: {route} (P(chained)={p_yes:.2f})")
        return route

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        route = self.classify(question, result)
        if route == CHAIN:
            self.chain(question, topics, result)
        else:
            self.parallel(question, topics, result)

    # ------------------------------------------------------------------ shared scoring
    def hybrid_scores(self, query: str, texts: list[str], rerank_prompt: str, step: str,
                      result: Result, chains: Sequence[RelationPath] | None = None) -> list[tuple[int, float]]:
        """Two-stage scores of ``texts``: cosine top ``top_n`` (for relation ``chains`` with
        ``relations=trained``, the trained scorer's), the LLM re-scores the best ``rerank_k``,
        combined as ``alpha·rerank + (1-alpha)·cos``; (index, score) best first."""
        if not texts:
            return []
        ranked = self.first_stage(query, texts, chains)
        head = ranked[:int(self.settings.rerank_k)]
        rerank = [0.0] * len(ranked)
        if len(head) > 1:
            try:
                probabilities = self.llm.score_options(rerank_prompt, [texts[i] for i, _ in head], step=step)
                rerank[:len(head)] = probabilities
            except PromptTooLongError as error:
                result.notes.append(skipped_call(error, "cosine only"))
        elif head:
            rerank[0] = 1.0
        alpha = float(self.settings.alpha)
        combined = [(index, alpha * r + (1 - alpha) * max(0.0, cos)) for (index, cos), r in zip(ranked, rerank)]
        return sorted(combined, key=lambda pair: -pair[1])

    def first_stage(self, query: str, texts: list[str], chains: Sequence[RelationPath] | None) -> list[tuple[int, float]]:
        """The ``top_n`` best of ``texts`` by cosine, or of ``chains`` by the trained scorer, its
        logits as probabilities over the candidates (so ``theta`` and ``alpha`` keep a [0, 1] scale)."""
        if chains is None or self.relations.mode == "embed":
            return self.context.scorer.rank(query, texts, k=int(self.settings.top_n))
        logits = self.relations.chain_scores(query, chains, [() for _chain in chains])
        scores = np.exp(logits - logits.max())
        scores /= scores.sum()
        order = sorted(range(len(chains)), key=lambda i: -float(scores[i]))[:int(self.settings.top_n)]
        return [(i, float(scores[i])) for i in order]

    def necessary(self, question: str, labels: Sequence[str], result: Result) -> set[str]:
        """The denoiser's model rule: which of ``labels`` the LLM finds needed (P(yes) >= theta)."""
        dropped = set()
        for label in labels:
            try:
                _answer, p_yes = self.llm.yes_no(prompts.render(PROMPTS, "necessity", question=question,
                                                                relation=readable_relation(label)),
                                                 step="necessity")
            except PromptTooLongError as error:
                result.notes.append(skipped_call(error, f"kept {label!r}"))
                continue
            if p_yes < self.settings.necessity_theta:
                dropped.add(label)
        if dropped:
            result.notes.append(f"denoiser: dropped as unnecessary {sorted(dropped)}")
        return set(labels) - dropped

    # ------------------------------------------------------------------ chain branch
    def chain(self, question: str, topics: list[str], result: Result) -> None:
        central = node_of(self.kg, topics[0])
        query = without_mentions(question, [central.display])
        start = ChainPath(steps=(), score=1.0, ends=[central], example=Path(()))
        stack, finished, expansions = [start], [], 0
        while stack and expansions < int(self.settings.max_expansions):
            path = stack.pop()
            if len(path.steps) >= int(self.settings.d_max):
                continue
            expansions += 1
            children = self.extend(question, query, path, result)
            finished.extend(children)
            if not children:
                continue
            best = children[0]
            result.notes.append(f"chain: {best.text()} (score {best.score:.3f}, {len(best.ends)} end(s))")
            if self.settings.early_stop and self.sufficient(question, best, result):
                break
            stack.extend(reversed(children))  # the best child is explored first (depth first)
        if not finished:
            result.notes.append("no answer found: no relation of the central entity passed the scoring")
            return
        top = sorted(finished, key=lambda p: -p.score)[:int(self.settings.top_paths)]
        result.evidence = [p.example for p in top if p.example.steps]
        self.answer_from_paths(question, top, result)

    def extend(self, question: str, query: str, path: ChainPath, result: Result) -> list[ChainPath]:
        """Children of ``path``: its end nodes' relations, denoised and scored, best first."""
        candidates: dict[tuple[str, str], str] = {}
        allowed = relation_filter(self.settings.relation_filter)
        for node in path.ends[:int(self.settings.end_nodes)]:
            for count in self.kg.relations(node.id):
                if allowed(count.relation) and not is_administrative(count.label):
                    candidates.setdefault((count.relation, count.direction), count.label)
        if not candidates:
            return []
        keys = list(candidates)
        prefix = " ".join(readable_relation(r) for r, _d in path.steps)
        texts = [f"{prefix} {readable_relation(candidates[k])}".strip() for k in keys]
        shown = [readable_relation(candidates[k]) + ("" if k[1] == OUT else " (reverse)") for k in keys]
        rerank_prompt = prompts.render(PROMPTS, "rerank_relation", question=question, path=path.text() or "(start)")
        scored = self.hybrid_scores(query, texts, rerank_prompt, "rerank_relation", result,
                                    chains=[tuple(path.steps) + (key,) for key in keys])
        passing = [(keys[i], s) for i, s in scored if s >= self.settings.theta]
        checked = list(dict.fromkeys(k[0] for k, _s in passing[:int(self.settings.necessity_k)]))
        keep = self.necessary(question, checked, result) | ({k[0] for k, _s in passing} - set(checked))
        passing = [(k, s) for k, s in passing if k[0] in keep] or passing[:1]
        width = int(self.settings.w_max)
        if len(passing) > width:
            passing = self.select(question, path, passing, [shown[keys.index(k)] for k, _s in passing], result)
        children = []
        for key, score in passing[:width]:
            child = self._walk(path, key, score)
            if child.ends:
                children.append(child)
        return sorted(children, key=lambda c: -c.score)

    def select(self, question: str, path: ChainPath, passing: list[tuple[tuple[str, str], float]],
               shown: list[str], result: Result) -> list[tuple[tuple[str, str], float]]:
        """More relations pass than ``w_max``: the LLM picks at most three (scores keep the order
        when its output is unusable)."""
        prompt = prompts.render(PROMPTS, "select_relations", question=question, path=path.text() or "(start)")
        try:
            picks = self.llm.choose(prompt, shown, step="select_relations", k=min(3, int(self.settings.w_max)),
                                    allow_none=True)
        except PromptTooLongError as error:
            result.notes.append(skipped_call(error, "kept the score order"))
            return passing
        return [passing[i] for i in picks] or passing

    def _walk(self, path: ChainPath, key: tuple[str, str], score: float) -> ChainPath:
        relation, direction = key
        ends: dict[str, Node] = {}
        example = path.example
        for node in path.ends[:int(self.settings.end_nodes)]:
            for other in self.kg.neighbors(node.id, relation, direction, limit=100):
                if other.id not in ends:
                    ends[other.id] = other
                    if len(ends) == 1:
                        triple = Triple(node, relation, other) if direction == OUT else Triple(other, relation, node)
                        example = Path(path.example.steps + (Step(triple, direction == OUT),))
        return ChainPath(path.steps + (key,), path.score * score, list(ends.values()), example)

    def sufficient(self, question: str, path: ChainPath, result: Result) -> bool:
        """The early-stop judgement: P(yes) of "do these paths answer the question?" at least
        ``sufficient_p``."""
        prompt = prompts.render(PROMPTS, "sufficient", question=question, paths=self._describe([path]))
        try:
            _answer, p_yes = self.llm.yes_no(prompt, step="sufficient")
        except PromptTooLongError as error:
            result.notes.append(skipped_call(error, "the search goes on"))
            return False
        enough = p_yes >= self.settings.sufficient_p
        result.notes.append(f"chain: P(sufficient)={p_yes:.2f}" + ("; search stopped" if enough else ""))
        return enough

    def _describe(self, paths: Sequence[ChainPath], ends_shown: int = 5) -> str:
        lines = []
        for path in paths:
            ends = ", ".join(n.display for n in path.ends[:ends_shown])
            more = f" (+{len(path.ends) - ends_shown} more)" if len(path.ends) > ends_shown else ""
            start = path.example.start.display if path.example.steps else ""
            lines.append(f"{start} → {path.text()} → {ends}{more}")
        return "\n".join(lines)

    def answer_from_paths(self, question: str, top: list[ChainPath], result: Result) -> None:
        """The answer only from the top paths' end entities: the LLM picks, graph order otherwise."""
        candidates: dict[str, tuple[Node, float]] = {}
        for path in top:
            for node in path.ends:
                if node.id not in candidates and node.id != (path.example.start.id if path.example.steps else ""):
                    candidates[node.id] = (node, path.score)
        ranked = list(candidates.values())
        if not ranked:
            return
        options = ranked[:10]
        prompt = prompts.render(PROMPTS, "answer_paths", question=question, paths=self._describe(top))
        first = self._pick(prompt, [n.display for n, _s in options], "answer", result)
        ordered = ([options[first]] if first is not None else []) + [c for i, c in enumerate(ranked) if i != first]
        result.answers = [Answer(n.id, n.display, s) for n, s in ordered[:int(self.settings.max_answers)]]

    def _pick(self, prompt: str, options: list[str], step: str, result: Result) -> int | None:
        """The option the LLM puts first, or ``None`` for the graph's order: always with
        ``answer_from=graph``, and when the call fails."""
        if self.settings.answer_from == "graph":
            result.notes.append(f"{step}: graph order (answer_from=graph; the model is not asked)")
            return None
        if len(options) < 2:
            return 0 if options else None
        try:
            picks = self.llm.choose(prompt, options, step=step, k=1, allow_none=True)
        except PromptTooLongError as error:
            result.notes.append(skipped_call(error, "kept the graph order"))
            return None
        return picks[0] if picks else None

    # ------------------------------------------------------------------ parallel branch
    def parallel(self, question: str, topics: list[str], result: Result) -> None:
        try:
            draft = self.llm.generate(prompts.render(PROMPTS, "draft", question=question), step="draft",
                                      max_tokens=32, stop=["\n"])
        except PromptTooLongError as error:
            result.notes.append(skipped_call(error, "the facts come from the question alone"))
            draft = ""
        result.notes.append(f"draft: {draft.strip()}")
        sources = [node_of(self.kg, t) for t in topics]
        checks = [self.check_fact(question, fact, self.link_subject(subject, sources), result)
                  for subject, fact in self.atomic_facts(question, draft, sources, result)]
        checks = [c for c in checks if c.best is not None]
        if not checks:
            result.notes.append("no answer found: no triple of the linked subjects matched a fact")
            return
        candidates: dict[str, tuple[Node, float]] = {}
        for check in checks:
            for triple, score in check.ranked[:3]:
                other = triple.tail if triple.head.id == check.subject.id else triple.head
                if other.id not in candidates or candidates[other.id][1] < score:
                    candidates[other.id] = (other, score)
        ranked = sorted(candidates.values(), key=lambda c: -c[1])
        facts = "\n".join(f"- {c.revised or c.fact}" for c in checks)
        prompt = prompts.render(PROMPTS, "answer_facts", question=question, facts=facts)
        options = ranked[:10]
        first = self._pick(prompt, [n.display for n, _s in options], "answer", result)
        ordered = ([options[first]] if first is not None else []) + [c for i, c in enumerate(ranked) if i != first]
        result.answers = [Answer(n.id, n.display, s) for n, s in ordered[:int(self.settings.max_answers)]]
        result.evidence = [Path((Step(c.best, c.best.head.id == c.subject.id),)) for c in checks if c.best]

    def atomic_facts(self, question: str, draft: str, sources: list[Node], result: Result) -> list[tuple[str, str]]:
        """(subject, fact) pairs from the draft answer; the question itself when the model gives none."""
        schema = {"type": "object", "required": ["facts"], "properties": {"facts": {
            "type": "array", "maxItems": int(self.settings.max_facts), "items": {
                "type": "object", "required": ["subject", "fact"], "properties": {
                    "subject": {"type": "string", "maxLength": 60}, "fact": {"type": "string", "maxLength": 120}}}}}}
        try:
            output = self.llm.json(prompts.render(PROMPTS, "facts", question=question,
                                                  draft=" ".join(split_answers(draft)) or "unknown"),
                                   schema, step="facts", max_tokens=200)
        except PromptTooLongError as error:
            result.notes.append(skipped_call(error))
            output = {}
        facts = [(str(f.get("subject", "")).strip(), str(f.get("fact", "")).strip())
                 for f in output.get("facts", []) if isinstance(f, dict) and str(f.get("fact", "")).strip()]
        if not facts:
            facts = [(sources[0].display, question)]
        result.notes.append(f"facts: {[f for _s, f in facts]}")
        return facts

    def link_subject(self, subject: str, sources: list[Node]) -> Node:
        """The graph node whose name is most similar to ``subject`` (string similarity) among the
        question's topic entities and the nodes named exactly like it."""
        candidates = list(sources)
        if subject:
            candidates += [n for n in self.kg.find(subject) if n.id not in {c.id for c in candidates}]

        def similarity(node: Node) -> tuple[float, float]:  # case breaks ties ("Mark Sandrich" vs a tag)
            return (difflib.SequenceMatcher(None, subject.lower(), node.display.lower()).ratio(),
                    difflib.SequenceMatcher(None, subject, node.display).ratio())

        return max(candidates, key=similarity)

    def check_fact(self, question: str, fact: str, subject: Node, result: Result) -> FactCheck:
        """Rank the subject's triples against the fact (denoised, two-stage), then verify or rewrite."""
        check = FactCheck(fact=fact, subject=subject)
        allowed = relation_filter(self.settings.relation_filter)
        administrative = {c.relation for c in self.kg.relations(subject.id) if is_administrative(c.label)}
        triples = [t for t in self.kg.triples(subject.id, limit=500)
                   if allowed(t.relation) and t.relation not in administrative]  # by label, as the chain branch
        if not triples:
            return check
        texts = [triple_words(t) for t in triples]
        scored = self.hybrid_scores(fact, texts, prompts.render(PROMPTS, "rerank_triple", fact=fact),
                                    "rerank_triple", result)
        labels = list(dict.fromkeys(triples[i].relation for i, _s in scored[:int(self.settings.necessity_k)]))
        keep = self.necessary(question, labels, result) | {triples[i].relation for i, _s in scored} - set(labels)
        check.ranked = [(triples[i], s) for i, s in scored if triples[i].relation in keep] or \
            [(triples[i], s) for i, s in scored[:1]]
        check.best, check.score = check.ranked[0]
        triple_text = render_triple(check.best)
        try:
            check.verified, _p = self.llm.yes_no(prompts.render(PROMPTS, "verify", fact=fact, triple=triple_text),
                                                 step="verify")
            if not check.verified:
                check.revised = self.llm.generate(prompts.render(PROMPTS, "rewrite", fact=fact, triple=triple_text),
                                                  step="rewrite", max_tokens=32, stop=["\n"]).strip()
        except PromptTooLongError as error:
            result.notes.append(skipped_call(error))
        result.notes.append(f"fact {fact!r}: best triple {triple_text} ({check.score:.2f}), "
                            + ("verified" if check.verified else f"rewritten as {check.revised!r}"))
        return check
