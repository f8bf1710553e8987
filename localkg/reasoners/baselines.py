"""Baselines every graph reasoner has to beat: the LLM alone, and embeddings alone.

* ``io`` asks the LLM the question directly (few-shot completion, names only).
* ``cot`` lets the LLM reason first, then asks for the answer.
* ``embed-path`` uses no LLM: from each topic entity it grows relation paths
  (beam search, up to 3 hops) scored by the similarity of the path's relations
  to the question, and answers with the ends of the best path.
  :func:`rank_relation_paths` is the reusable part: graph reasoners can use it
  to prune relations before the LLM sees them.

The LLM-only answers are free text: they carry no node id (``Answer(id="")``)
and are scored by name like any other answer.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from localkg import prompts
from localkg.indexes.stems import content_stems
from localkg.reasoners.base import Answer, Reasoner, Result, register
from localkg.store.kg import KG
from localkg.store.model import IN, OUT, Node, Path, Step, Triple

PROMPTS = "baselines"


def split_answers(text: str, limit: int = 10) -> list[str]:
    """Names from a free-text answer line: split on ``|`` (the prompts ask for it), trimmed of
    quotes and a trailing full stop, deduplicated, at most ``limit``."""
    names = []
    for part in text.split("\n", 1)[0].split("|"):
        name = part.strip().strip("\"'`").rstrip(".").strip()
        if name and name not in names:
            names.append(name)
    return names[:limit]


@register
class IOReasoner(Reasoner):
    """The LLM alone, answering directly (the "IO prompt" baseline of the KGQA papers)."""

    name = "io"
    defaults: dict[str, Any] = {"max_tokens": 32}

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        prompt = prompts.render(PROMPTS, "io", question=question)
        output = self.llm.generate(prompt, step="answer", max_tokens=self.config["max_tokens"], stop=["\n"])
        result.answers = [Answer("", name) for name in split_answers(output)]
        result.notes.append("answered by the LLM alone; the graph was not used")


@register
class CoTReasoner(Reasoner):
    """The LLM alone, reasoning step by step before it answers (chain of thought)."""

    name = "cot"
    defaults: dict[str, Any] = {"reasoning_tokens": 96, "max_tokens": 32}

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        reasoning_prompt = prompts.render(PROMPTS, "cot_reason", question=question)
        reasoning = self.llm.generate(reasoning_prompt, step="reason", max_tokens=self.config["reasoning_tokens"],
                                      stop=["\nAnswer:", "\n\n", "\nQuestion:"]).strip()
        answer_prompt = prompts.render(PROMPTS, "cot_answer", reasoning_prompt=reasoning_prompt, reasoning=reasoning)
        output = self.llm.generate(answer_prompt, step="answer", max_tokens=self.config["max_tokens"], stop=["\n"])
        result.answers = [Answer("", name) for name in split_answers(output)]
        result.notes.append(f"reasoning: {reasoning}")
        result.notes.append("answered by the LLM alone; the graph was not used")


# ---------------------------------------------------------------- embed-path
def readable_relation(relation: str) -> str:
    """Relation id → words for the embedder: ``film.film.directed_by`` → ``film directed by``,
    ``__film__cinematographer__film`` → ``film cinematographer film``, ``in_language`` →
    ``in language`` (a dotted Freebase id keeps its last two parts: type and property)."""
    if "." in relation and " " not in relation:
        relation = ".".join(relation.split(".")[-2:])
    return " ".join(re.split(r"[._/:#]+|__", relation)).replace("_", " ").strip() or relation


@dataclass(frozen=True)
class RelationPath:
    """A relation path from a topic entity, how well it matches the question, and where it leads.

    ``steps`` are (relation, direction) pairs walked from the topic (``out``: along the fact,
    ``in``: against it); ``tails`` are its end nodes, the most often reached first;
    ``examples`` are a few concrete paths in the graph (evidence).
    """

    topic: str
    steps: tuple[tuple[str, str], ...]
    text: str
    similarity: float
    score: float
    tails: tuple[Node, ...]
    examples: tuple[Path, ...] = ()

    def __str__(self) -> str:
        return " / ".join(rel if direction == OUT else f"{rel}⁻¹" for rel, direction in self.steps)


@dataclass
class _Reach:
    """A node at the end of a partial relation path: how many walks reach it, and one of them."""

    node: Node
    walks: int
    example: Path


@dataclass
class _Beam:
    steps: tuple[tuple[str, str], ...]
    labels: tuple[str, ...]
    frontier: dict[str, _Reach]
    similarity: float = 0.0
    children: list[Any] = field(default_factory=list)


def rank_relation_paths(kg: KG, scorer: Any, question: str, topic: str, *, max_depth: int = 3, beam: int = 5,
                        max_frontier: int = 50, relation_sample: int = 5, depth_penalty: float = 0.05,
                        examples: int = 3) -> list[RelationPath]:
    """Relation paths of 1..``max_depth`` hops from ``topic``, best first.

    Beam search: at each depth every relation at the beam's frontier nodes is a candidate
    extension, scored by :func:`path_similarities` of the question, with the topic's name
    taken out, to the whole path (``starred actors`` + ``in language``); the ``beam`` best
    extensions are walked. A path's score is its similarity minus
    ``depth_penalty`` per hop beyond the first, because a longer path's text matches more
    words of any question. Frontiers keep the ``max_frontier`` most reached nodes, and the
    candidate relations are read from the ``relation_sample`` most reached of them (nodes
    reached the same way mostly share their relations), so hubs cost a bounded number of
    queries.
    """
    record = kg.node(topic)
    start = Node(record.id, record.name or record.value, record.kind)
    query = _without_mention(question, start.display)
    relation_cache: dict[str, list[Any]] = {}
    beams = [_Beam(steps=(), labels=(), frontier={topic: _Reach(start, 1, Path(()))})]
    finished: list[_Beam] = []
    for _depth in range(int(max_depth)):
        candidates: list[tuple[_Beam, tuple[str, str], str]] = []
        for current in beams:
            seen: set[tuple[str, str]] = set()
            for entity in list(current.frontier)[:relation_sample]:
                if entity not in relation_cache:
                    relation_cache[entity] = kg.relations(entity)
                for count in relation_cache[entity]:
                    key = (count.relation, count.direction)
                    if key not in seen:
                        seen.add(key)
                        candidates.append((current, key, readable_relation(count.label)))
        if not candidates:
            break
        similarities = path_similarities(scorer, query, [(*current.labels, label) for current, _key, label in candidates])
        order = sorted(range(len(candidates)), key=lambda i: -float(similarities[i]))
        next_beams = []
        for index in order:
            if len(next_beams) == beam:
                break
            current, key, label = candidates[index]
            frontier = _walk(kg, current.frontier, key, max_frontier)
            if frontier:
                next_beams.append(_Beam(current.steps + (key,), current.labels + (label,), frontier,
                                        float(similarities[index])))
        finished.extend(next_beams)
        beams = next_beams
    ranked = [_relation_path(topic, b, depth_penalty, examples) for b in finished]
    return sorted(ranked, key=lambda p: -p.score)


def path_similarities(scorer: Any, question: str, paths: Sequence[tuple[str, ...]]) -> np.ndarray:
    """How well each relation path (its relations' words) matches the question.

    A path is embedded as the normalised sum of its relations' embeddings, a bag of
    relations, so only relation labels are ever encoded, and the scorer caches them across
    questions (embedding every joined path text instead costs an encoder batch per hop).
    The score is the cosine to the question plus the scorer's lexical share: the fraction
    of the path's content-word stems that the question contains, as in
    ``RelevanceScorer.score``.
    """
    if not paths:
        return np.zeros(0, dtype=np.float32)
    labels = list(dict.fromkeys(label for path in paths for label in path))
    vectors = dict(zip(labels, scorer.text_vectors(labels)))
    query = scorer.query_vector(question)
    question_stems = content_stems(question)
    scores = np.empty(len(paths), dtype=np.float32)
    for position, path in enumerate(paths):
        said = _said_once(path)
        total = np.sum([vectors[label] for label in said], axis=0)
        cosine = float(total @ query) / (float(np.linalg.norm(total)) or 1.0)
        stems = frozenset().union(*(content_stems(label) for label in said))
        lexical = len(stems & question_stems) / len(stems) if stems else 0.0
        scores[position] = cosine + scorer.lexical_weight * lexical
    return scores


def _said_once(labels: tuple[str, ...]) -> tuple[str, ...]:
    """A path's labels with a relation walked there and back (``directed by``, ``directed by``: the
    films of a film's director) said once: the repetition adds no meaning, and the depth
    penalty then prefers the shorter path unless the longer one matches better."""
    return tuple(label for position, label in enumerate(labels) if position == 0 or label != labels[position - 1])


def _without_mention(question: str, name: str) -> str:
    """The question with the topic's name removed: it is in every path's context, so it only adds noise."""
    if not name:
        return question
    stripped = re.sub(re.escape(name), " ", question, flags=re.I)
    return " ".join(stripped.split()) or question


def _walk(kg: KG, frontier: dict[str, _Reach], key: tuple[str, str], max_frontier: int) -> dict[str, _Reach]:
    """One more step along ``key`` from every frontier node, counting walks per reached node."""
    relation, direction = key
    reached: dict[str, _Reach] = {}
    for reach in frontier.values():
        for node in kg.neighbors(reach.node.id, relation, direction, limit=max_frontier):
            triple = Triple(reach.node, relation, node) if direction == OUT else Triple(node, relation, reach.node)
            existing = reached.get(node.id)
            if existing is None:
                reached[node.id] = _Reach(node, reach.walks, Path(reach.example.steps + (Step(triple, direction == OUT),)))
            else:
                existing.walks += reach.walks
    best = sorted(reached.values(), key=lambda r: -r.walks)[:max_frontier]
    return {r.node.id: r for r in best}


def _relation_path(topic: str, beam: _Beam, depth_penalty: float, examples: int) -> RelationPath:
    reaches = sorted(beam.frontier.values(), key=lambda r: -r.walks)
    others = [r for r in reaches if r.node.id != topic]
    reaches = others or reaches
    return RelationPath(
        topic=topic,
        steps=beam.steps,
        text=" ".join(_said_once(beam.labels)),
        similarity=beam.similarity,
        score=beam.similarity - depth_penalty * (len(beam.steps) - 1),
        tails=tuple(r.node for r in reaches),
        examples=tuple(r.example for r in reaches[:examples]),
    )


@register
class EmbedPathReasoner(Reasoner):
    """No LLM: answer with the ends of the relation path that best matches the question.

    With several topic entities (conjunctive questions) the best path of each is taken and
    the answer is the nodes all of them reach, when there are any; otherwise the ends of
    the single best path.
    """

    name = "embed-path"
    uses_llm = False
    defaults: dict[str, Any] = {"max_depth": 3, "beam": 3, "max_frontier": 50, "relation_sample": 5,
                                "depth_penalty": 0.05, "max_answers": 50}

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        best: list[RelationPath] = []
        for topic in topics:
            paths = rank_relation_paths(self.kg, self.context.scorer, question, topic,
                                        max_depth=self.config["max_depth"], beam=self.config["beam"],
                                        max_frontier=self.config["max_frontier"],
                                        relation_sample=self.config["relation_sample"],
                                        depth_penalty=self.config["depth_penalty"])
            if paths:
                best.append(paths[0])
        if not best:
            result.notes.append("no answer found: no relation leads anywhere from the topic entities")
            return
        best.sort(key=lambda p: -p.score)
        chosen, tails = best, _common_tails(best)
        if not tails:
            chosen, tails = best[:1], list(best[0].tails)
        result.answers = [Answer(node.id, node.display, chosen[0].score) for node in tails[:self.config["max_answers"]]]
        result.evidence = [example for path in chosen for example in path.examples]
        for path in chosen:
            result.notes.append(f"relation path from {path.topic}: {path} (similarity {path.similarity:.3f})")


def _common_tails(paths: list[RelationPath]) -> list[Node]:
    """Nodes at the end of every path, in the order of the best path (empty for one path)."""
    if len(paths) < 2:
        return []
    shared = set.intersection(*({n.id for n in p.tails} for p in paths))
    return [node for node in paths[0].tails if node.id in shared]
