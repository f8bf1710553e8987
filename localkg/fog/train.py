"""Training the foresight scorer: ``localkg train fog``.

The paper's recipe (binary cross-entropy on triple labels, AdamW, dropout 0.1, five epochs, the
sentence encoder frozen) with one departure: a learning rate of 1e-3 instead of 1e-5, which on a
CPU-sized run leaves every gold triple below ``tau_p`` (docs/reasoners.md). The expansion scores
and the refined scores are trained together, plus the answer-distance head.

Every text is embedded once before the first epoch, so an epoch runs only the small scorer; a
held-out tenth measures the scores at the reasoner's thresholds after every epoch. The seed, the
split, the epochs and their checkpoints (Ctrl-C keeps the last finished one) are
``localkg.training``'s.
"""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import nn
from tqdm import tqdm

from localkg.datasets import TrainingSet, resolve_topics, select_training_questions
from localkg.errors import TrainingDataError
from localkg.fog.checkpoint import save_checkpoint
from localkg.fog.features import QuestionGraph, TextVectors, build_tensors, graph_texts
from localkg.fog.model import ForesightScorer, ScorerConfig
from localkg.fog.supervision import SupervisionLimits, build_example
from localkg.store.kg import KG
from localkg.training.checkpoints import check_writable
from localkg.training.device import pick_device
from localkg.training.loop import EpochReport, RunSettings, run_epochs, seeded, split_held_out


@dataclass
class TrainConfig(RunSettings):
    """Hyperparameters (paper defaults) beside the run settings."""

    epochs: int = 5
    lr: float = 1e-3  # the paper: 1e-5 (see the module docstring)
    weight_decay: float = 1e-3
    dropout: float = 0.1
    batch_size: int = 16
    hidden: int = 128
    feedback_layers: int = 1
    tau_e: float = 0.1
    tau_p: float = 0.7


@dataclass
class HeldOut:
    """What an epoch's scorer does on the held-out examples (:func:`evaluate`)."""

    validation_loss: float
    positive_score: float
    negative_score: float
    recall_at_tau_p: float
    kept_negatives_at_tau_p: float
    recall_at_tau_e: float
    top1_positive: float
    distance_accuracy: float


@dataclass
class TrainReport:
    """What happened: examples used, loss per epoch, and the checkpoint written."""

    examples: int
    validation_examples: int
    skipped: int
    first_batch_loss: float
    epochs: list[EpochReport[HeldOut]] = field(default_factory=list)
    checkpoint: str = ""
    device: str = "cpu"

    def to_json(self) -> dict[str, Any]:
        """The report as plain data, each epoch flat (``train fog --json``)."""
        return {**asdict(self), "epochs": [e.to_json() for e in self.epochs]}


def build_examples(kg: KG, questions: Sequence[tuple[Any, list[str]]], limits: SupervisionLimits,
                   seed: int = 0, progress: bool = False) -> tuple[list[QuestionGraph], int]:
    """Training graphs for ``(question, resolved topic ids)`` pairs, and how many gave none."""
    rng = random.Random(seed)
    examples, skipped = [], 0
    for question, topics in tqdm(questions, desc="supervision", unit="q", disable=not progress):
        example = build_example(kg, question, topics, rng, limits) if topics else None
        if example is None:
            skipped += 1
        else:
            examples.append(example)
    return examples, skipped


@dataclass
class _Batch:
    """One forward pass over a batch: triple logits and labels (-1 = context only), each triple's
    graph, and per graph the answer-distance logits and targets (-1 = unknown)."""

    initial: torch.Tensor
    refined: torch.Tensor
    labels: torch.Tensor
    edge_graph: torch.Tensor
    distance_logits: torch.Tensor | None
    distances: torch.Tensor


def _forward(model: ForesightScorer, graphs: Sequence[QuestionGraph], vectors: TextVectors,
             device: torch.device) -> _Batch:
    tensors = build_tensors(graphs, vectors).to(device)
    labels = torch.tensor([y for g in graphs for y in g.labels or []], dtype=torch.float32, device=device)
    distances = torch.tensor([-1 if g.distance is None else min(g.distance, model.config.max_level) for g in graphs],
                             dtype=torch.long, device=device)
    initial, refined = model(tensors)
    plain = torch.from_numpy(vectors([g.distance_question or g.questions[0] for g in graphs])).to(device)
    return _Batch(initial, refined, labels, tensors.edge_graph, model.distance_logits(plain), distances)


def _loss(batch: _Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Summed BCE of the initial and refined scores over the labelled triples (label -1 = context
    only) plus the cross-entropy of the answer distance, the two score vectors of those
    triples, and their labels."""
    scored = batch.labels >= 0
    initial, refined, labels = batch.initial[scored], batch.refined[scored], batch.labels[scored]
    bce = nn.functional.binary_cross_entropy_with_logits
    loss = bce(initial, labels) + bce(refined, labels)
    known = batch.distances >= 0
    if batch.distance_logits is not None and bool(known.any()):
        loss = loss + nn.functional.cross_entropy(batch.distance_logits[known], batch.distances[known])
    return loss, torch.sigmoid(initial), torch.sigmoid(refined), labels


def _distance_hits(batch: _Batch) -> torch.Tensor:
    """Per graph with a known distance, 1 when the predicted answer distance is right."""
    known = batch.distances >= 0
    if batch.distance_logits is None:
        return torch.zeros(0)
    return (batch.distance_logits[known].argmax(-1) == batch.distances[known]).float().cpu()


def _best_is_positive(refined: torch.Tensor, labels: torch.Tensor, graph: torch.Tensor, graphs: int) -> torch.Tensor:
    """Per graph, 1 when its best-refined triple (context included) is a positive, else 0."""
    best = torch.full((graphs,), float("-inf"), device=refined.device).scatter_reduce(
        0, graph, refined, reduce="amax", include_self=True)
    return torch.zeros(graphs, device=refined.device).scatter_reduce(
        0, graph, ((refined == best[graph]) & (labels > 0.5)).float(), reduce="amax")


def _batches(items: Sequence[QuestionGraph], size: int, rng: random.Random | None) -> list[list[QuestionGraph]]:
    order = list(range(len(items)))
    if rng is not None:
        rng.shuffle(order)
    return [[items[i] for i in order[start:start + size]] for start in range(0, len(order), size)]


@torch.no_grad()
def evaluate(model: ForesightScorer, graphs: Sequence[QuestionGraph], vectors: TextVectors, device: torch.device,
             config: TrainConfig) -> HeldOut:
    """Mean loss and what the thresholds do on ``graphs``: recall of positives above ``tau_p``
    (refined) and ``tau_e`` (initial), share of negatives kept above ``tau_p``, and the share of
    questions whose best-scoring triple lies on a gold path (what a graph-side answer needs), and
    how often the predicted answer distance is right."""
    model.eval()
    losses, positives, negatives, initial_positives, tops, distances = [], [], [], [], [], []
    for batch in _batches(graphs, config.batch_size, None):
        forward = _forward(model, batch, vectors, device)
        tops.append(_best_is_positive(forward.refined, forward.labels, forward.edge_graph, len(batch)))
        distances.append(_distance_hits(forward))
        loss, initial, refined, labels = _loss(forward)
        labels = labels > 0.5
        losses.append(float(loss))
        positives.append(refined[labels])
        negatives.append(refined[~labels])
        initial_positives.append(initial[labels])
    pos, neg, ini = torch.cat(positives), torch.cat(negatives), torch.cat(initial_positives)
    hits = torch.cat(distances)
    return HeldOut(
        validation_loss=sum(losses) / max(1, len(losses)),
        positive_score=float(pos.mean()) if len(pos) else math.nan,
        negative_score=float(neg.mean()) if len(neg) else math.nan,
        recall_at_tau_p=float((pos >= config.tau_p).float().mean()) if len(pos) else math.nan,
        kept_negatives_at_tau_p=float((neg >= config.tau_p).float().mean()) if len(neg) else math.nan,
        recall_at_tau_e=float((ini >= config.tau_e).float().mean()) if len(ini) else math.nan,
        top1_positive=float(torch.cat(tops).mean()),
        distance_accuracy=float(hits.mean()) if len(hits) else math.nan,
    )


def train_scorer(examples: Sequence[QuestionGraph], vectors: TextVectors, config: TrainConfig, out: str | Path,
                 encoder: str, meta: dict[str, Any] | None = None, skipped: int = 0, progress: bool = False,
                 on_epoch: Callable[[EpochReport], None] | None = None) -> TrainReport:
    """Train a fresh scorer on ``examples`` and write a checkpoint to ``out`` after each epoch."""
    if len(examples) < 2:
        raise TrainingDataError(f"{len(examples)} training example(s): too few to train "
                                "(no gold path reached a gold answer in this graph?)")
    rng = seeded(config.seed)
    device = pick_device(config.device)
    validation, training = split_held_out(examples, config.validation, rng)
    texts = [text for graph in examples for text in graph_texts(graph)]
    vectors.warm(texts, progress=progress)
    model = ForesightScorer(ScorerConfig(encoder_dim=vectors.dim, hidden=config.hidden, dropout=config.dropout,
                                         feedback_layers=config.feedback_layers)).to(device)
    report = TrainReport(examples=len(training), validation_examples=len(validation), skipped=skipped,
                         first_batch_loss=math.nan, device=str(device))

    def batch_loss(batch: list[QuestionGraph]) -> torch.Tensor:
        loss, *_scores = _loss(_forward(model, batch, vectors, device))
        if math.isnan(report.first_batch_loss):
            report.first_batch_loss = loss.item()
        return loss

    def save(epoch: EpochReport[HeldOut]) -> None:
        report.epochs.append(epoch)
        training_meta = {**(meta or {}), "train_config": asdict(config), "epochs_done": epoch.epoch,
                         "report": report.to_json()}
        report.checkpoint = str(save_checkpoint(out, model, encoder, training_meta))

    run_epochs(model, config.epochs, config.lr, config.weight_decay,
               batches=lambda: _batches(training, config.batch_size, rng), batch_loss=batch_loss,
               measure=lambda: evaluate(model, validation or training, vectors, device, config),
               save=save, progress=progress, on_epoch=on_epoch)
    return report


def train_from_files(kg: KG, selection: TrainingSet, config: TrainConfig, out: str | Path,
                     embedder: Any = None, limits: SupervisionLimits = SupervisionLimits(),
                     progress: bool = False, on_epoch: Callable[[EpochReport], None] | None = None) -> TrainReport:
    """``localkg train fog``: questions → supervision → a trained scorer checkpoint at ``out``."""
    from localkg.indexes.embedding import Embedder

    check_writable(out)  # before supervision and epochs are spent on a checkpoint that cannot be written
    questions, counts = select_training_questions(selection, config.seed)
    pairs = [(q, resolve_topics(kg, q)) for q in questions]
    examples, skipped = build_examples(kg, pairs, limits, seed=config.seed, progress=progress)
    embedder = embedder or Embedder(device=str(pick_device(config.device)))
    meta = {"trained_on": selection.describe(counts), "questions": len(questions), "db": str(kg.path),
            "kappa": limits.kappa, "far_kappa": limits.far_kappa}
    return train_scorer(examples, TextVectors(embedder), config, out, embedder.model_name, meta=meta,
                        skipped=skipped, progress=progress, on_epoch=on_epoch)
