"""Relation paths from a topic entity ranked by how well their relations' words match the question.

The embedding half of path search, shared by ``embed-path`` (which answers with the best
path's ends) and ``paths`` (which ranks the relation patterns it shows the model):
:func:`rank_relation_paths` grows paths by beam search, :func:`path_similarities` scores a
path as the normalised sum of its relations' embeddings plus a lexical share.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from localkg.beam import beam_search
from localkg.indexes.stems import content_stems
from localkg.reasoners.common import node_of
from localkg.store.kg import KG
from localkg.store.model import OUT, Hop, Node, Path, RelationPath, Step, Triple
from localkg.text import readable_relation, without_mentions


@dataclass(frozen=True)
class RankedPath:
    """A relation path from a topic entity, how well it matches the question, and where it leads.

    ``steps`` are (relation, direction) pairs walked from the topic (``out``: along the fact,
    ``in``: against it); ``tails`` are its end nodes, the most often reached first;
    ``examples`` are a few concrete paths in the graph (evidence).
    """

    topic: str
    steps: RelationPath
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


@dataclass(frozen=True)
class _Extension:
    """A kept path and one more hop (with its readable label) proposed for it."""

    beam: "_Beam"
    hop: Hop
    label: str


@dataclass
class _Beam:
    """A kept path: its hops, their readable labels, the nodes it reaches and its similarity."""

    steps: RelationPath
    labels: tuple[str, ...]
    frontier: dict[str, _Reach]
    similarity: float = 0.0


def rank_relation_paths(kg: KG, ranking: Any, question: str, topic: str, *, max_depth: int = 3, beam: int = 5,
                        max_frontier: int = 50, relation_sample: int = 5, depth_penalty: float = 0.05,
                        examples: int = 3) -> list[RankedPath]:
    """Relation paths of 1..``max_depth`` hops from ``topic``, best first.

    Beam search: at each depth every relation at the beam's frontier nodes is a candidate
    extension, scored by ``ranking`` (a ``RelationRanking``; with ``embed``, :func:`path_similarities`
    of the question, its topic's name taken out, to the whole path: ``starred actors`` +
    ``in language``); the ``beam`` best extensions are walked. A path's score is its similarity minus
    ``depth_penalty`` per hop beyond the first, because a longer path's text matches more
    words of any question. Frontiers keep the ``max_frontier`` most reached nodes, and the
    candidate relations are read from the ``relation_sample`` most reached of them (nodes
    reached the same way mostly share their relations), so hubs cost a bounded number of
    queries.
    """
    start = node_of(kg, topic)
    query = without_mentions(question, [start.display])
    relation_cache: dict[str, list[Any]] = {}

    def extend(beams: list[_Beam]) -> list[_Extension]:
        candidates: list[_Extension] = []
        for current in beams:
            seen: set[Hop] = set()
            for entity in list(current.frontier)[:relation_sample]:
                if entity not in relation_cache:
                    relation_cache[entity] = kg.relations(entity)
                for count in relation_cache[entity]:
                    hop = (count.relation, count.direction)
                    if hop not in seen:
                        seen.add(hop)
                        candidates.append(_Extension(current, hop, readable_relation(count.label)))
        return candidates

    def score(candidates: list[_Extension]) -> np.ndarray:
        return ranking.chain_scores(query, [c.beam.steps + (c.hop,) for c in candidates],
                                    [(*c.beam.labels, c.label) for c in candidates])

    def advance(candidate: _Extension, similarity: float) -> _Beam | None:
        frontier = _walk(kg, candidate.beam.frontier, candidate.hop, max_frontier)
        if not frontier:
            return None
        return _Beam(candidate.beam.steps + (candidate.hop,), candidate.beam.labels + (candidate.label,), frontier,
                     similarity)

    start_beam = _Beam(steps=(), labels=(), frontier={topic: _Reach(start, 1, Path(()))})
    finished: list[_Beam] = []
    for _candidates, _scores, kept in beam_search(start_beam, extend, score, advance, depth=max_depth, width=beam):
        finished.extend(kept)
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


def _relation_path(topic: str, beam: _Beam, depth_penalty: float, examples: int) -> RankedPath:
    reaches = sorted(beam.frontier.values(), key=lambda r: -r.walks)
    others = [r for r in reaches if r.node.id != topic]
    reaches = others or reaches
    return RankedPath(
        topic=topic,
        steps=beam.steps,
        text=" ".join(_said_once(beam.labels)),
        similarity=beam.similarity,
        score=beam.similarity - depth_penalty * (len(beam.steps) - 1),
        tails=tuple(r.node for r in reaches),
        examples=tuple(r.example for r in reaches[:examples]),
    )
