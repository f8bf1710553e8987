"""Triple-level training labels for the foresight scorer, from questions with gold paths.

FoG trains on triples: those on an answer-supporting path are positives, and
``kappa`` times as many triples sampled from the 1-hop neighbourhood of those
paths are negatives. The gold relation path comes from the dataset:

* PathQuestion and WC2014 name it (``meta["relation_path"]``; WC2014's conjunctive
  questions have one one-hop path per topic entity);
* MetaQA names the question type (``actor_to_movie_to_year``), from which the
  relation path follows: each ``X_to_movie`` step walks the relation of ``X``
  backwards to the film, each ``movie_to_X`` step walks it forwards.

A gold path is walked in the graph from the topic entity, and only walks that
end in a gold answer are kept (layer by layer, then pruned backwards), so
positives are exactly the triples that connect the topic to an answer along the
gold relations. This module is used for training only; the reasoner never
imports it (a test checks that inference reads no gold field).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from localkg.errors import TrainingDataError
from localkg.fog.features import QuestionGraph, TripleKey, bfs_levels, triple_key
from localkg.store.kg import KG
from localkg.store.model import IN, OUT, Node, Triple

#: MetaQA's question-type words → the KB relation that links a film to that kind of thing.
METAQA_RELATIONS = {
    "actor": "starred_actors",
    "director": "directed_by",
    "writer": "written_by",
    "year": "release_year",
    "genre": "has_genre",
    "tag": "has_tags",
    "tags": "has_tags",
    "language": "in_language",
    "imdbrating": "has_imdb_rating",
    "imdbvotes": "has_imdb_votes",
}

RelationStep = tuple[str, str]  # (relation, direction walked: out = head→tail, in = tail→head)


@dataclass(frozen=True)
class SupervisionLimits:
    """Caps that keep one question's example small on hub-heavy graphs."""

    kappa: int = 10
    neighbors_per_node: int = 200
    nodes_per_layer: int = 500
    max_answers: int = 10
    max_negatives: int = 400
    negative_seeds: int = 12


def metaqa_relation_path(qtype: str) -> list[RelationStep]:
    """``actor_to_movie_to_year`` → [(starred_actors, in), (release_year, out)]."""
    kinds = qtype.split("_to_")
    steps = []
    for before, after in zip(kinds, kinds[1:]):
        if after == "movie" and before in METAQA_RELATIONS:
            steps.append((METAQA_RELATIONS[before], IN))
        elif before == "movie" and after in METAQA_RELATIONS:
            steps.append((METAQA_RELATIONS[after], OUT))
        else:
            raise TrainingDataError(f"MetaQA question type {qtype!r} has a step {before}_to_{after} "
                                    "that is not film-centred")
    return steps


def gold_relation_paths(question: Any, topics: Sequence[str]) -> list[tuple[str, list[RelationStep]]]:
    """(topic id, relation path) pairs for ``question`` (dataset ``Question``) and its resolved
    topic ids; raises :class:`TrainingDataError` when the dataset gives no gold path."""
    relations = (question.meta or {}).get("relation_path")
    if relations:
        if question.qtype == "conjunction":  # WC2014: one one-hop path per topic entity
            return [(topic, [(relation, OUT)]) for topic, relation in zip(topics, relations)]
        return [(topics[0], [(relation, OUT) for relation in relations])] if topics else []
    if question.qtype and "_to_" in question.qtype:
        return [(topics[0], metaqa_relation_path(question.qtype))] if topics else []
    raise TrainingDataError(f"question {question.id} has no gold path: FoG trains on datasets that give one "
                            "(PathQuestion, WC2014: relation_path; MetaQA: question type)")


def _normalise(text: str) -> str:
    return " ".join(text.lower().replace("_", " ").split())


def _step_triples(kg: KG, node: Node, step: RelationStep, limit: int) -> list[Triple]:
    relation, direction = step
    found = kg.neighbors(node.id, relation, direction, limit=limit)
    if direction == OUT:
        return [Triple(node, relation, other) for other in found]
    return [Triple(other, relation, node) for other in found]


def gold_triples(kg: KG, topic: str, path: Sequence[RelationStep], answers: set[str],
                 limits: SupervisionLimits, rng: random.Random) -> list[Triple]:
    """Triples on walks from ``topic`` along ``path`` that end in a gold answer.

    Walks forward layer by layer (each layer capped), then keeps, backwards from at most
    ``max_answers`` of the reached answers, only the triples whose far end survives.
    """
    record = kg.node(topic)
    layers: list[list[tuple[Node, Node, Triple]]] = []  # (near, far, triple) per step
    frontier = {topic: Node(record.id, record.name or record.value, record.kind)}
    for step in path:
        layer, reached = [], {}
        for node in frontier.values():
            for triple in _step_triples(kg, node, step, limits.neighbors_per_node):
                far = triple.tail if step[1] == OUT else triple.head
                layer.append((node, far, triple))
                if len(reached) < limits.nodes_per_layer:
                    reached.setdefault(far.id, far)
        layers.append(layer)
        frontier = reached
    reached_answers = sorted(node_id for node_id, node in frontier.items()
                             if _normalise(node.display) in answers or _normalise(node_id) in answers)
    alive = set(rng.sample(reached_answers, min(limits.max_answers, len(reached_answers))))
    kept: list[Triple] = []
    for layer in reversed(layers):
        survivors = [(near, triple) for near, far, triple in layer if far.id in alive]
        kept.extend(triple for _near, triple in survivors)
        alive = {near.id for near, _triple in survivors}
    return list({triple_key(t): t for t in kept}.values())


def sample_negatives(kg: KG, positives: Sequence[Triple], sources: Sequence[str], count: int,
                     rng: random.Random, limits: SupervisionLimits) -> list[Triple]:
    """``count`` triples that are not positives, from the 1-hop neighbourhood of the positive
    paths: around the sources (the distractors the first expansion meets) and around at most
    ``negative_seeds`` other nodes of the paths, sampled."""
    positive_keys = {triple_key(t) for t in positives}
    pool: dict[TripleKey, Triple] = {}
    others = [n for n in dict.fromkeys(end for t in positives for end in (t.head.id, t.tail.id)) if n not in sources]
    for node_id in [*sources, *rng.sample(others, min(limits.negative_seeds, len(others)))]:
        for triple in kg.triples(node_id, limit=limits.neighbors_per_node):
            key = triple_key(triple)
            if key not in positive_keys:
                pool.setdefault(key, triple)
    candidates = sorted(pool)
    chosen = rng.sample(candidates, min(count, len(candidates)))
    return [pool[key] for key in chosen]


def build_example(kg: KG, question: Any, topics: Sequence[str], rng: random.Random,
                  limits: SupervisionLimits = SupervisionLimits()) -> QuestionGraph | None:
    """One training graph (positives + negatives, BFS levels from the topics), or ``None``
    when no gold walk reaches an answer in this graph."""
    answers = {_normalise(alias) for gold in question.answers for alias in gold}
    positives: dict[TripleKey, Triple] = {}
    sources = []
    for topic, path in gold_relation_paths(question, topics):
        sources.append(topic)
        for triple in gold_triples(kg, topic, path, answers, limits, rng):
            positives.setdefault(triple_key(triple), triple)
    if not positives:
        return None
    positive_list = list(positives.values())
    negatives = sample_negatives(kg, positive_list, sources,
                                 min(limits.kappa * len(positive_list), limits.max_negatives), rng, limits)
    triples = positive_list + negatives
    return QuestionGraph(questions=[question.text], triples=triples, levels=bfs_levels(sources, triples),
                         labels=[1.0] * len(positive_list) + [0.0] * len(negatives),
                         meta={"id": question.id})
