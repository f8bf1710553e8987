"""Triple scores for the ``fog`` reasoner: the trained foresight scorer, or embedding similarity.

Both give ``initial`` scores (one triple at a time, used to expand the subgraph
with ``tau_e``) and ``refined`` scores (over the whole expanded subgraph, used
for the potential subgraph with ``tau_p``), in ``[0, 1]``.

Without a checkpoint FoG still runs: a triple's score is the cosine similarity
of the question (topic names taken out) to the verbalised triple, divided by the
best similarity among the triples scored together, so the thresholds keep the
triples close to the best one; nothing propagates, so ``refined`` equals
``initial``. The reasoner says in its notes which of the two it used.
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np
import torch

from localkg.fog.features import QuestionGraph, TextVectors, build_tensors, relation_words
from localkg.fog.model import ForesightScorer
from localkg.store.model import Triple


class TripleScorer(Protocol):
    description: str

    def initial(self, questions: Sequence[str], triples: Sequence[Triple], levels: dict[str, int]) -> np.ndarray: ...

    def refined(self, questions: Sequence[str], triples: Sequence[Triple], levels: dict[str, int]) -> np.ndarray: ...

    def answer_distance(self, question: str) -> np.ndarray | None:
        """Probabilities of the answer's distance from the sources (``question`` without topic
        names), or ``None`` when the scorer cannot say."""


class TrainedTripleScorer:
    """The foresight scorer from a checkpoint, on frozen embeddings of the same encoder."""

    def __init__(self, model: ForesightScorer, vectors: TextVectors, device: torch.device, description: str):
        self.model = model
        self.vectors = vectors
        self.device = device
        self.description = description

    @classmethod
    def from_checkpoint(cls, path: Any, embedder: Any, device: str = "") -> "TrainedTripleScorer":
        """The scorer saved at ``path``, embedding with ``embedder`` (the checkpoint must have been
        trained on its vectors); ``device`` "" picks one as training does.

        Raises :class:`localkg.errors.CheckpointError` when the file is missing or not a checkpoint.
        """
        from localkg.fog.checkpoint import load_checkpoint
        from localkg.training.device import pick_device

        chosen = pick_device(device or None)
        model, meta = load_checkpoint(path, encoder=embedder.model_name, device=chosen)
        trained_on = meta.get("trained_on", "unknown questions")
        return cls(model, TextVectors(embedder), chosen,
                   f"trained scorer {path} ({trained_on}; {meta.get('epochs_done', '?')} epochs)")

    def _tensors(self, questions: Sequence[str], triples: Sequence[Triple], levels: dict[str, int]) -> Any:
        graph = QuestionGraph(questions=list(questions), triples=list(triples), levels=levels)
        return build_tensors([graph], self.vectors).to(self.device)

    @torch.no_grad()
    def initial(self, questions: Sequence[str], triples: Sequence[Triple], levels: dict[str, int]) -> np.ndarray:
        if not triples:
            return np.zeros(0, dtype=np.float32)
        logits = self.model.initial_logits(self._tensors(questions, triples, levels))
        return torch.sigmoid(logits).cpu().numpy()

    @torch.no_grad()
    def refined(self, questions: Sequence[str], triples: Sequence[Triple], levels: dict[str, int]) -> np.ndarray:
        if not triples:
            return np.zeros(0, dtype=np.float32)
        _initial, refined = self.model(self._tensors(questions, triples, levels))
        return torch.sigmoid(refined).cpu().numpy()

    @torch.no_grad()
    def answer_distance(self, question: str) -> np.ndarray | None:
        """Probabilities of the answer lying 0..max_level hops from the sources, for the question
        with its topic names taken out; ``None`` when the checkpoint has no distance head."""
        logits = self.model.distance_logits(torch.from_numpy(self.vectors([question])).to(self.device))
        return None if logits is None else torch.softmax(logits[0], -1).cpu().numpy()


def verbalise(triple: Triple) -> str:
    """``Top Hat directed by Mark Sandrich``: the words the embedder compares with the question."""
    return f"{triple.head.display} {relation_words(triple.relation)} {triple.tail.display}"


class SimilarityTripleScorer:
    """The fallback: cosine similarity (``RelevanceScorer``) relative to the best triple scored."""

    description = ("no trained scorer: triple scores are MiniLM cosine similarity to the question, relative to "
                   "the best candidate; no feedback propagation")

    def __init__(self, relevance: Any, query: str):
        self.relevance = relevance
        self.query = query

    def initial(self, questions: Sequence[str], triples: Sequence[Triple], levels: dict[str, int]) -> np.ndarray:
        if not triples:
            return np.zeros(0, dtype=np.float32)
        similarity = np.clip(self.relevance.score(self.query, [verbalise(t) for t in triples]), 0.0, None)
        best = float(similarity.max())
        return similarity / best if best > 0 else similarity

    refined = initial

    def answer_distance(self, question: str) -> None:
        """Similarity says nothing about how far the answer lies."""
        return None
