"""Path labels from question–answer pairs alone: which relation paths lead to the answers.

For each topic entity every relation path of up to ``max_hops`` hops is
executed (``walk``) and labelled by the F1 of its end set against the gold
answers, the better of with and without the topic among the ends (datasets differ:
see ``PathWalker.ends``). Whether walks may go on from the topic after their first
hop differs too (``PathWalker.frontier``): a question is labelled with either walk,
and training keeps the labels of the walk the store's questions favour. With several topics (conjunctive questions: "a
forward who plays for Mexico") the answers are what the topics' paths reach
together, so a path is labelled by the best F1 of an intersection it takes
part in. The best paths are the positives; ties go to the fewest hops, the
others of the same topic are the negatives. A question whose paths reach no
answer is skipped and counted. Question types and gold paths are never read
here; :func:`matches_gold` compares the best path found with the dataset's own
(``localkg.datasets.gold_relation_paths``) only to report the supervision's accuracy.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from localkg.path_scorer.walk import PathWalker, RelationPath
from localkg.store.model import IN, Node
from localkg.text import gold_keys, normalise_answer

TIE = 1e-9


@dataclass(frozen=True)
class SupervisionLimits:
    """How far and how wide the search for a question's paths goes."""

    max_hops: int = 3
    max_paths: int = 400
    max_frontier: int = 5000
    relation_sample: int = 3
    paths_per_topic_in_pairs: int = 20


@dataclass
class TopicPaths:
    """One topic's candidate paths and their labels (F1 in [0, 1]); ``best`` indexes the positives."""

    topic: str
    paths: list[RelationPath]
    labels: list[float]
    best: list[int]


@dataclass
class Supervision:
    """What one question teaches: per topic the labelled paths, and the F1 the best ones reach.

    ``topic_is_answer`` is None unless the best path reaches the topic among other nodes; then
    it says whether the topic is a gold answer (what decides whether a store's reasoner keeps
    the topic among the answers).
    """

    topics: list[TopicPaths]
    best_f1: float
    topic_is_answer: bool | None = None

    def best_paths(self) -> list[RelationPath]:
        """The first positive of each topic (fewest hops, then fewest backward hops)."""
        return [topic.paths[topic.best[0]] for topic in self.topics]


def answer_f1(ends: Iterable[Node], gold: Sequence[frozenset[str]]) -> float:
    """F1 of a set of nodes against the gold answers (``localkg.text.gold_keys``), compared as the
    metric compares them: a node counts by its normalised name or id."""
    ends = list(ends)
    if not ends or not gold:
        return 0.0
    found: set[int] = set()
    correct = 0
    for node in ends:
        keys = {normalise_answer(node.name), normalise_answer(node.id)}
        hits = [index for index, aliases in enumerate(gold) if keys & aliases]
        if hits:
            correct += 1
            found.update(hits)
    if not correct:
        return 0.0
    precision, recall = correct / len(ends), len(found) / len(gold)
    return 2 * precision * recall / (precision + recall)


def label_question(walker: PathWalker, topics: Sequence[str], answers: Sequence[Sequence[str]],
                   limits: SupervisionLimits = SupervisionLimits(), through_topic: bool = True) -> Supervision | None:
    """The labelled paths of one question, walked with or without going on from the topic after
    the first hop (``through_topic``), or None when no path of any topic reaches an answer."""
    gold = gold_keys(answers)
    candidates = [(topic, walker.enumerate(topic, limits.max_hops, limits.max_paths)) for topic in topics]
    candidates = [(topic, paths) for topic, paths in candidates if paths]
    if not candidates:
        return None
    if len(candidates) > 1:
        return labelled_paths(candidates, _conjunctive_labels(walker, candidates, gold, limits, through_topic))
    topic, paths = candidates[0]
    labels = [max(answer_f1(walker.ends(topic, path, keep, through_topic).values(), gold) for keep in (False, True))
              for path in paths]
    supervision = labelled_paths(candidates, [labels])
    if supervision is not None:
        reached = walker.frontier(topic, supervision.best_paths()[0], through_topic).nodes
        if topic in reached and len(reached) > 1:
            supervision.topic_is_answer = answer_f1([reached[topic]], gold) > 0
    return supervision


def _conjunctive_labels(walker: PathWalker, candidates: list[tuple[str, list[RelationPath]]],
                        gold: Sequence[frozenset[str]], limits: SupervisionLimits,
                        through_topic: bool) -> list[list[float]]:
    """Per topic and path, the best F1 of the intersection of one path per topic it is part of.

    Only paths that reach some answer can be in a useful intersection; of those the
    ``paths_per_topic_in_pairs`` with the best F1 of their own are combined.
    """
    useful = []
    for topic, paths in candidates:
        own = [(answer_f1(walker.ends(topic, path, through_topic=through_topic).values(), gold), index)
               for index, path in enumerate(paths)]
        useful.append([index for f1, index in sorted(own, key=lambda item: -item[0]) if f1 > 0]
                      [:limits.paths_per_topic_in_pairs])
    labels = [[0.0] * len(paths) for _topic, paths in candidates]
    for combination in itertools.product(*useful):
        shared: dict[str, Node] | None = None
        for (topic, paths), index in zip(candidates, combination):
            ends = walker.ends(topic, paths[index], through_topic=through_topic)
            shared = ends if shared is None else {k: v for k, v in shared.items() if k in ends}
        f1 = answer_f1((shared or {}).values(), gold)
        for position, index in enumerate(combination):
            labels[position][index] = max(labels[position][index], f1)
    return labels


def walk_vote(through: Supervision | None, avoiding: Supervision | None) -> bool | None:
    """One question's vote on whether walks go on from the topic after their first hop: True when
    its answers are found better walking on (``through``), False when better without, None when the
    two walks label it alike."""
    best = [0.0 if supervision is None else supervision.best_f1 for supervision in (through, avoiding)]
    return None if abs(best[0] - best[1]) <= TIE else best[0] > best[1]


def chosen_walk(walks: Iterable[tuple[Any, Supervision | None, Supervision | None]],
                through_topic: bool) -> list[tuple[Any, Supervision | None]]:
    """Each question of ``walks`` (question, labelled walking on from the topic, labelled without)
    with the labels of the walk chosen for the store."""
    return [(question, through if through_topic else avoiding) for question, through, avoiding in walks]


def labelled_paths(candidates: list[tuple[str, list[RelationPath]]], labels: list[list[float]]) -> Supervision | None:
    """Each topic's candidate paths with their labels as a :class:`Supervision` (its positives: the
    tied best, fewest hops first), or None when no path reaches an answer."""
    best_f1 = min(max(topic_labels) for topic_labels in labels)
    if best_f1 <= 0:
        return None
    topics = []
    for (topic, paths), topic_labels in zip(candidates, labels):
        top = max(topic_labels)
        tied = [i for i, label in enumerate(topic_labels) if label >= top - TIE]
        shortest = min(len(paths[i]) for i in tied)
        best = sorted((i for i in tied if len(paths[i]) == shortest),
                      key=lambda i: sum(direction == IN for _relation, direction in paths[i]))
        topics.append(TopicPaths(topic, paths, topic_labels, best))
    return Supervision(topics, best_f1)


# ---------------------------------------------------------------- the supervision's accuracy
def matches_gold(supervision: Supervision, gold: Sequence[Sequence[tuple[str, str]]]) -> bool:
    """Whether the best path found per topic has the relations of the dataset's gold path
    (``localkg.datasets.gold_relation_paths``), topics in any order.

    Relations only: a store may hold a relation and its materialised inverse (WC2014's
    ``plays_in_club_inverse``), which count as one, so a path may walk a hop either way.
    """
    found = sorted(_relations(path) for path in supervision.best_paths())
    return found == sorted(_relations(path) for path in gold)


def _relations(path: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    return tuple(_base(relation) for relation, _direction in path)


def _base(relation: str) -> str:
    return relation.removesuffix("_inverse")

