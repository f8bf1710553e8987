"""Ranking a question's relation paths with a trained scorer: ``PathRanker.rank_paths``.

Candidates come from the relation structure, not from entity walks: a beam
search from each topic expands the ``beam`` best partial paths by every hop
their frontier has (``walk``; two queries per depth), scores the extensions
with the trained scorer, and keeps going up to the depth the scorer was
trained for. Every path that reaches a node other than the topic is a
candidate; their scores become probabilities by a softmax over the topic's
candidates. With several topics (conjunctive questions) a candidate is one
path per topic, its answers what all of them reach, its probability the
product; combinations that share no node are dropped. Whether the topic is
among the answers, and whether walks may go on from it after their first hop,
were learned in training (``keep_topic``, ``through_topic``). A question unlike
every pair the scorer was trained on (with no pairs: every store question) and
with one topic is ranked by the untrained label match alone (``familiarity``).
Each ranked path carries its answers and, per answer, a real evidence path.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any, Callable, Sequence

import torch

from localkg.beam import beam_search
from localkg.path_scorer.checkpoint import load_checkpoint
from localkg.path_scorer.features import RelationVectors, mention_distances, path_tensors, question_text
from localkg.path_scorer.location import default_checkpoint
from localkg.path_scorer.walk import Hop, PathWalker, RelationPath, path_text
from localkg.store.kg import KG
from localkg.store.model import Node, Path


@dataclass(frozen=True)
class ScoredPath:
    """A ranked answer route: one relation path per topic, its probability, what it reaches and
    why (``evidence[i]`` are the walks that lead to ``answers[i]``, one per topic)."""

    legs: tuple[tuple[str, RelationPath], ...]
    probability: float
    answers: tuple[Node, ...]
    evidence: tuple[tuple[Path, ...], ...]

    def __str__(self) -> str:
        return " + ".join(f"{topic}: {path_text(path)}" for topic, path in self.legs)


class PathRanker:
    """A trained path scorer over one store (see the module docstring)."""

    def __init__(self, kg: KG, checkpoint: str | FsPath | None = None, embedder: Any = None, beam: int = 10,
                 combinations: int = 5, keep: Callable[[str], bool] = lambda relation: True,
                 device: str = "cpu"):
        if embedder is None:
            from localkg.indexes.embedding import Embedder

            embedder = Embedder(device=device)
        self.kg = kg
        self.embedder = embedder
        self.path = FsPath(checkpoint) if checkpoint else default_checkpoint(kg.path)
        self.model, self.meta = load_checkpoint(self.path, kg, embedder.model_name, device)
        self.device = device
        self.max_hops = int(self.meta.get("max_hops", 3))
        self.keep_topic = bool(self.meta.get("keep_topic", False))
        self.through_topic = bool(self.meta.get("through_topic", True))
        self.beam = int(beam)
        self.combinations = int(combinations)
        self.walker = PathWalker(kg, keep=keep)
        self.vectors = RelationVectors(kg, embedder)
        self._questions: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def score(self, question: str, topic_names: Sequence[str], paths: Sequence[RelationPath]) -> list[float]:
        """The scorer's raw score of each path for ``question`` (higher is better): all it learned
        for a question like its training pairs, the untrained label match alone for one unlike
        every pair (:meth:`familiar`)."""
        if not paths:
            return []
        text = question_text(question, topic_names)
        encoded = self._encoded(text)
        familiar = self.familiar(question, topic_names)[0]
        relations, backward, said, mask, words, types = [
            t.to(self.device) for t in path_tensors(paths, text, self.vectors, self.meta["path_types"],
                                                    distances=mention_distances(question, topic_names),
                                                    sharing=not familiar, leg=len(topic_names) > 1)]
        owner = torch.zeros(len(paths), dtype=torch.long, device=self.device)
        matrix = self.vectors.matrix.to(self.device)
        if familiar:
            scores = self.model(encoded, owner, matrix, relations, backward, said, mask, words, types)
        else:
            scores = self.model.prior(encoded[owner], matrix, relations, mask, words)
        return scores.tolist()

    def familiar(self, question: str, topic_names: Sequence[str]) -> tuple[bool, float | None]:
        """Whether ``question`` is like the questions the scorer was trained on, and its cosine to
        the nearest of them (None, and always familiar, for a checkpoint without them, or a
        question with several topics: the label match would score each topic's leg against the
        whole question, whose words name the other legs' relations too)."""
        familiarity = self.meta["familiarity"]
        if familiarity is None or len(topic_names) > 1:
            return True, None
        return familiarity.knows(self._encoded(question_text(question, topic_names))[0])

    def _encoded(self, text: str) -> torch.Tensor:
        if text not in self._questions:
            if len(self._questions) > 4096:
                self._questions.clear()
            self._questions[text] = torch.from_numpy(self.embedder.encode([text])).to(self.device)
        return self._questions[text]

    def score_hops(self, question: str, topic_names: Sequence[str], prefix: RelationPath,
                   hops: Sequence[Hop]) -> list[float]:
        """How well each next hop continues ``prefix`` for ``question``: the score of the path
        ``prefix + hop`` (what a reasoner that ranks relations one step at a time asks)."""
        return self.score(question, topic_names, [tuple(prefix) + (hop,) for hop in hops])

    def topic_paths(self, question: str, topic: str, topic_names: Sequence[str]) -> list[tuple[RelationPath, float]]:
        """The candidate paths of one topic with their probabilities, best first (beam search)."""
        scored: dict[RelationPath, float] = {}
        searched = beam_search((), lambda layer: self.walker.expand(topic, layer),
                               lambda paths: self.score(question, topic_names, paths), lambda path, _score: path,
                               depth=self.max_hops, width=self.beam)
        for extensions, scores, _kept in searched:
            for path, score in zip(extensions, scores):
                if self.walker.ends(topic, path, through_topic=self.through_topic):
                    scored[path] = score
        if not scored:
            return []
        top = max(scored.values())
        total = sum(math.exp(s - top) for s in scored.values())
        return sorted(((path, math.exp(s - top) / total) for path, s in scored.items()), key=lambda item: -item[1])

    def rank_paths(self, question: str, topics: Sequence[str], k: int = 5) -> list[ScoredPath]:
        """The ``k`` most probable answer routes for ``question`` from its topic entities."""
        self.walker.forget_paths()
        names = [self.kg.name(topic) for topic in topics]
        per_topic = [(topic, self.topic_paths(question, topic, names)) for topic in topics]
        per_topic = [(topic, paths) for topic, paths in per_topic if paths]
        if not per_topic:
            return []
        routes: list[ScoredPath] = []
        choices = [[(topic, path, p) for path, p in paths[:self.combinations if len(per_topic) > 1 else k]]
                   for topic, paths in per_topic]
        for combination in itertools.product(*choices):
            route = self._route(combination, {t for t, _paths in per_topic})
            if route is not None:
                routes.append(route)
        routes.sort(key=lambda r: -r.probability)
        return routes[:k]

    def _route(self, legs: Sequence[tuple[str, RelationPath, float]], topics: set[str]) -> ScoredPath | None:
        shared: dict[str, Node] | None = None
        for topic, path, _p in legs:
            ends = self.walker.ends(topic, path, self.keep_topic, self.through_topic)
            shared = dict(ends) if shared is None else {k: v for k, v in shared.items() if k in ends}
        shared = shared or {}
        answers = list(shared.values()) if self.keep_topic else \
            [node for node_id, node in shared.items() if node_id not in topics] or list(shared.values())
        if not answers:
            return None
        evidence = tuple(tuple(self.walker.evidence(topic, path, node.id, self.through_topic)
                               for topic, path, _p in legs) for node in answers)
        return ScoredPath(tuple((topic, path) for topic, path, _p in legs), math.prod(p for _t, _path, p in legs),
                          tuple(answers), evidence)
