"""Triple-level training labels for the foresight scorer, from questions with gold paths.

Positives are the triples on an answer-supporting path; negatives are ``kappa`` times as many
triples from the 1-hop neighbourhood of those paths (the paper's recipe) and ``far_kappa`` times as
many from farther out (ours: without them the scorer never learns that a gold relation at the
wrong distance is wrong; docs/reasoners.md). The gold relation path comes from the dataset
(PathQuestion and WC2014 name it; MetaQA's question type implies it,
:func:`localkg.datasets.gold_relation_paths`) and is walked from the topic entity, keeping only
walks that end in a gold answer.

Training only: the reasoner never imports this module (a test checks that inference reads no
gold field).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from localkg.datasets import gold_relation_paths
from localkg.errors import TrainingDataError
from localkg.fog.features import QuestionGraph, TripleKey, bfs_levels, triple_key
from localkg.store.kg import KG
from localkg.store.model import OUT, Hop, Node, Triple
from localkg.text import gold_keys, normalise_answer, without_mentions

@dataclass(frozen=True)
class SupervisionLimits:
    """Caps that keep one question's example small on hub-heavy graphs."""

    kappa: int = 10
    far_kappa: int = 10
    neighbors_per_node: int = 200
    nodes_per_layer: int = 500
    max_answers: int = 10
    max_negatives: int = 400  # near and far each take at most half
    hops: int = 3
    context_per_node: int = 30
    context_frontier: int = 3


def gold_walks(question: Any, topics: Sequence[str]) -> list[tuple[str, list[Hop]]]:
    """(topic id, gold relation path) pairs to walk for ``question`` (dataset ``Question``) and its
    resolved topic ids; raises :class:`TrainingDataError` when the dataset gives no gold path."""
    paths = gold_relation_paths(question)
    if paths is None:
        raise TrainingDataError(f"question {question.id} has no gold path: FoG trains on datasets that give one "
                                "(PathQuestion, WC2014: relation_path; MetaQA: question type)")
    return list(zip(topics, paths))


def _step_triples(kg: KG, node: Node, step: Hop, limit: int) -> list[Triple]:
    relation, direction = step
    found = kg.neighbors(node.id, relation, direction, limit=limit)
    if direction == OUT:
        return [Triple(node, relation, other) for other in found]
    return [Triple(other, relation, node) for other in found]


def gold_triples(kg: KG, topic: str, path: Sequence[Hop], answers: set[str],
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
                             if normalise_answer(node.display) in answers or normalise_answer(node_id) in answers)
    alive = set(rng.sample(reached_answers, min(limits.max_answers, len(reached_answers))))
    kept: list[Triple] = []
    for layer in reversed(layers):
        survivors = [(near, triple) for near, far, triple in layer if far.id in alive]
        kept.extend(triple for _near, triple in survivors)
        alive = {near.id for near, _triple in survivors}
    return list({triple_key(t): t for t in kept}.values())


def neighbourhood(kg: KG, sources: Sequence[str], positives: Sequence[Triple], rng: random.Random,
                  limits: SupervisionLimits) -> list[Triple]:
    """The question's surroundings as the reasoner's expansion sees them: layered BFS from the
    sources up to ``hops`` layers, expanding every node of the gold paths and ``context_frontier``
    other nodes per layer (sampled), ``context_per_node`` triples each.

    Training on this graph (not on positives plus isolated negatives) matters for the feedback:
    if only gold-path nodes had onward triples, "has a continuation" would give the label away.
    """
    on_path = {end for t in positives for end in (t.head.id, t.tail.id)}
    found: dict[TripleKey, Triple] = {}
    seen = set(sources)
    frontier = list(dict.fromkeys(sources))
    for _layer in range(limits.hops):
        reached: list[str] = []
        for node_id in frontier:
            for triple in kg.triples(node_id, limit=limits.context_per_node):
                found.setdefault(triple_key(triple), triple)
                for end in (triple.head.id, triple.tail.id):
                    if end not in seen:
                        seen.add(end)
                        reached.append(end)
        gold = [n for n in reached if n in on_path]
        others = [n for n in reached if n not in on_path]
        frontier = gold + rng.sample(others, min(limits.context_frontier, len(others)))
    return list(found.values())


def build_example(kg: KG, question: Any, topics: Sequence[str], rng: random.Random,
                  limits: SupervisionLimits = SupervisionLimits()) -> QuestionGraph | None:
    """One training graph, or ``None`` when no gold walk reaches an answer in this graph.

    The graph is the gold walks plus their neighbourhood (:func:`neighbourhood`), with BFS levels
    from the topics. Labels: 1 on the gold walks, 0 on ``kappa`` times as many triples sampled from
    the 1-hop neighbourhood of the walks (the triples touching a node of a walk), and -1 (no loss,
    structure only) on the rest; the answer's distance is the longest gold path's length.
    """
    answers = {key for keys in gold_keys(question.answers) for key in keys}
    positives: dict[TripleKey, Triple] = {}
    sources = []
    gold_paths = gold_walks(question, topics)
    for topic, path in gold_paths:
        sources.append(topic)
        for triple in gold_triples(kg, topic, path, answers, limits, rng):
            positives.setdefault(triple_key(triple), triple)
    if not positives:
        return None
    context = [t for t in neighbourhood(kg, sources, list(positives.values()), rng, limits)
               if triple_key(t) not in positives]
    on_path = {end for t in positives.values() for end in (t.head.id, t.tail.id)}
    near = [t for t in context if t.head.id in on_path or t.tail.id in on_path]
    far = [t for t in context if t.head.id not in on_path and t.tail.id not in on_path]
    chosen: set[TripleKey] = set()
    for pool, kappa in ((near, limits.kappa), (far, limits.far_kappa)):
        wanted = min(kappa * len(positives), limits.max_negatives // 2, len(pool))
        chosen |= {triple_key(t) for t in rng.sample(pool, wanted)}
    triples = list(positives.values()) + context
    labels = [1.0] * len(positives) + [0.0 if triple_key(t) in chosen else -1.0 for t in context]
    return QuestionGraph(questions=[question.text], triples=triples, levels=bfs_levels(sources, triples),
                         labels=labels, distance=max(len(path) for _topic, path in gold_paths),
                         distance_question=without_mentions(question.text, [kg.name(s) for s in sources]),
                         meta={"id": question.id})
