"""Training the path scorer from question–answer pairs: ``localkg train paths``.

Each question's topics (the dataset's gold ones, else linked) give labelled
paths (``supervision``). The loss is listwise: a softmax over a topic's
candidate paths, maximising the probability of its best paths together (the
marginal likelihood). Ties are common, a film's writer is often its director
or a one-film writer's films' years are the film's year, and most tied chains
are right only by accident; the marginal lets the scorer put its mass on the
chain that is a positive for every question worded alike, where spreading the
target evenly over the ties taught it the accidental ones too. The same loss
over the candidates of each shorter length, with the best paths' prefixes as
positives, teaches the beam search to rank partial paths. The encoder is
frozen, so an epoch runs the small scorer only; the learning rate decays on a
cosine to the last epoch. A tenth of the questions is held out; after each
epoch its accuracy@1 is reported. The seed, the split, the epochs and their
checkpoints (Ctrl-C keeps the last finished one) are ``localkg.training``'s.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch
from tqdm import tqdm

from localkg.datasets import gold_relation_paths, resolve_topics, select_training_questions
from localkg.errors import TrainingDataError
from localkg.path_scorer.checkpoint import save_checkpoint, store_state
from localkg.path_scorer.familiarity import Familiarity
from localkg.path_scorer.features import RelationVectors, mention_distances, path_tensors, question_text
from localkg.path_scorer.model import PathScorer, ScorerConfig
from localkg.path_scorer.supervision import (TIE, Supervision, SupervisionLimits, chosen_walk, label_question,
                                             matches_gold, walk_vote)
from localkg.path_scorer.synthetic import SyntheticLimits, synthetic_walks, write_questions
from localkg.path_scorer.walk import PathWalker, RelationPath
from localkg.store.kg import KG
from localkg.training.checkpoints import check_writable
from localkg.training.device import pick_device
from localkg.training.loop import EpochReport, RunSettings, run_epochs, seeded, split_held_out


PAIR_WEIGHT = 3.0  # a user's question-answer pair weighs as much as this many of the store's own questions


@dataclass
class TrainConfig(RunSettings):
    """Hyperparameters beside the run settings."""

    epochs: int = 20
    lr: float = 2e-3
    weight_decay: float = 1e-4
    dropout: float = 0.1
    hidden: int = 256
    batch_size: int = 32


@dataclass
class Group:
    """One softmax of the loss: candidate paths of one topic and which of them are positives.
    ``full``: all the topic's candidates (accuracy counts these), else those of one length."""

    question: int
    paths: list[RelationPath]
    positive: list[bool]
    full: bool


@dataclass
class SupervisionReport:
    questions: int = 0
    labelled: int = 0
    skipped_no_topic: int = 0
    skipped_no_path: int = 0
    gold_named: int = 0
    gold_found: int = 0
    topic_reached: int = 0
    topic_answered: int = 0
    walk_differs: int = 0
    through_topic_better: int = 0
    seconds: float = 0.0

    @property
    def keep_topic(self) -> bool:
        """Whether the topic counts as an answer on this store: it was a gold answer for most
        questions whose best path reaches it among other nodes."""
        return self.topic_answered * 2 > self.topic_reached

    @property
    def through_topic(self) -> bool:
        """Whether walks may go on from the topic after their first hop on this store: yes unless
        most questions whose best F1 depends on it do better without ("the films of X's writer"
        then means the writer's other films, as in MetaQA)."""
        return self.through_topic_better * 2 >= self.walk_differs

    def vote(self, through: Supervision | None, avoiding: Supervision | None) -> None:
        """Count one question's :func:`~localkg.path_scorer.supervision.walk_vote`."""
        vote = walk_vote(through, avoiding)
        if vote is not None:
            self.walk_differs += 1
            self.through_topic_better += vote

    @property
    def gold_accuracy(self) -> float:
        """How often the best path found is the dataset's own gold path (where it names one)."""
        return self.gold_found / self.gold_named if self.gold_named else math.nan


@dataclass
class HeldOut:
    """What an epoch's scorer does on the held-out questions: the loss, and how often a full
    group's top path is a positive."""

    held_out_loss: float
    held_out_accuracy: float


@dataclass
class TrainReport:
    supervision: SupervisionReport
    training_questions: int
    held_out_questions: int
    store_questions: int = 0
    epochs: list[EpochReport[HeldOut]] = field(default_factory=list)
    checkpoint: str = ""
    device: str = "cpu"
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["epochs"] = [epoch.to_json() for epoch in self.epochs]
        data["supervision"]["gold_accuracy"] = self.supervision.gold_accuracy
        data["supervision"]["keep_topic"] = self.supervision.keep_topic
        data["supervision"]["through_topic"] = self.supervision.through_topic
        return data


def groups_of(question: int, supervision: Supervision) -> list[Group]:
    """The loss's softmaxes for one labelled question: per topic all candidates, and per shorter
    length the candidates of that length with the best paths' prefixes as positives."""
    groups = []
    for topic in supervision.topics:
        top = max(topic.labels)
        positives = {path for path, label in zip(topic.paths, topic.labels) if label >= top - TIE}
        groups.append(Group(question, topic.paths, [path in positives for path in topic.paths], True))
        for length in range(1, max(len(p) for p in positives)):
            prefixes = {p[:length] for p in positives if len(p) > length}
            level = [path for path in dict.fromkeys(p[:length] for p in topic.paths if len(p) >= length)]
            if len(level) > 1 and prefixes & set(level):
                groups.append(Group(question, level, [path in prefixes for path in level], False))
    return groups


def path_types(groups: Iterable[Group]) -> dict[RelationPath, int]:
    """The chains that are a positive of some training question, numbered from 1 (0: unseen)."""
    seen: dict[RelationPath, int] = {}
    for group in groups:
        for path, positive in zip(group.paths, group.positive):
            if positive and group.full:
                seen.setdefault(path, len(seen) + 1)
    return seen


def supervise(kg: KG, questions: Sequence[Any], topics: Sequence[list[str]], limits: SupervisionLimits,
              progress: bool = False) -> tuple[list[tuple[Any, Supervision]], SupervisionReport]:
    """Label every question's paths; count what was skipped and how often the gold path was found."""
    started = time.perf_counter()
    report = SupervisionReport(questions=len(questions))
    walker = PathWalker(kg, max_frontier=limits.max_frontier, relation_sample=limits.relation_sample)
    walks: list[tuple[Any, Supervision | None, Supervision | None]] = []
    for question, question_topics in tqdm(list(zip(questions, topics)), desc="supervision", unit="q",
                                          disable=not progress):
        if not question_topics:
            report.skipped_no_topic += 1
            continue
        walker.forget_paths()
        through, avoiding = (label_question(walker, question_topics, question.answers, limits, through_topic)
                             for through_topic in (True, False))
        report.vote(through, avoiding)
        walks.append((question, through, avoiding))
    labelled = []
    for question, supervision in chosen_walk(walks, report.through_topic):  # the walk the questions favour
        if supervision is None:
            report.skipped_no_path += 1
            continue
        labelled.append((question, supervision))
        if supervision.topic_is_answer is not None:
            report.topic_reached += 1
            report.topic_answered += supervision.topic_is_answer
        gold = gold_relation_paths(question)
        if gold is not None:
            report.gold_named += 1
            report.gold_found += matches_gold(supervision, gold)
    report.labelled = len(labelled)
    report.seconds = time.perf_counter() - started
    return labelled, report


class _Tensors:
    """A group's hop tensors, built once."""

    def __init__(self, group: Group, text: str, vectors: RelationVectors, types: dict[RelationPath, int],
                 hops: int, weight: float = 1.0, distances: np.ndarray | None = None, leg: bool = False):
        self.question = group.question
        self.relations, self.backward, self.said, self.mask, self.words, self.types = path_tensors(
            group.paths, text, vectors, types, hops, distances, leg=leg)
        self.positive = torch.tensor(group.positive, dtype=torch.bool)
        self.full = group.full
        self.weight = weight


def group_loss(model: PathScorer, questions: torch.Tensor, relation_matrix: torch.Tensor,
               batch: Sequence[_Tensors], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean negative log of the probability each group of ``batch`` gives its positives together
    (weighted by each group's question weight), and per full group whether its top path is a positive."""
    owner = torch.cat([torch.full((len(g.positive),), g.question, dtype=torch.long) for g in batch]).to(device)
    group = torch.cat([torch.full((len(g.positive),), i, dtype=torch.long) for i, g in enumerate(batch)]).to(device)
    relations = torch.cat([g.relations for g in batch]).to(device)
    backward = torch.cat([g.backward for g in batch]).to(device)
    said = torch.cat([g.said for g in batch]).to(device)
    mask = torch.cat([g.mask for g in batch]).to(device)
    words = torch.cat([g.words for g in batch]).to(device)
    types = torch.cat([g.types for g in batch]).to(device)
    positives = torch.cat([g.positive for g in batch]).to(device)
    scores = model(questions, owner, relation_matrix, relations, backward, said, mask, words, types)
    count = len(batch)
    top = _group_max(scores, group, count)
    positive_scores = scores.masked_fill(~positives, -math.inf)
    weights = torch.tensor([g.weight for g in batch], device=device)
    losses = _group_logsumexp(scores, group, count) - _group_logsumexp(positive_scores, group, count)
    loss = (losses * weights).sum() / weights.sum()
    hit = torch.zeros(count, device=device).scatter_reduce(
        0, group, ((scores >= top[group]) & positives).float(), "amax", include_self=True)
    full = torch.tensor([g.full for g in batch], device=device)
    return loss, hit[full]


def _group_max(values: torch.Tensor, group: torch.Tensor, count: int) -> torch.Tensor:
    return torch.full((count,), -math.inf, device=values.device).scatter_reduce(0, group, values, "amax",
                                                                               include_self=True)


def _group_logsumexp(values: torch.Tensor, group: torch.Tensor, count: int) -> torch.Tensor:
    """log Σ exp(values) per group, stable (each group has a finite value)."""
    top = _group_max(values, group, count)
    total = torch.zeros(count, device=values.device).scatter_add(0, group, torch.exp(values - top[group]))
    return torch.log(total) + top


def train_scorer(kg: KG, labelled: Sequence[tuple[Any, Supervision]], embedder: Any, config: TrainConfig,
                 out: str | Path, report: SupervisionReport, meta: dict[str, Any] | None = None,
                 progress: bool = False, on_epoch: Callable[[EpochReport], None] | None = None,
                 weights: Sequence[float] | None = None, pairs: Sequence[bool] | None = None) -> TrainReport:
    """Fit a fresh scorer on labelled questions and write a checkpoint to ``out`` after each epoch;
    ``weights`` (one per labelled question, default 1) scale each question's share of the loss;
    ``pairs`` says which are the user's question-answer pairs (default: all), whose questions the
    checkpoint keeps to tell a question unlike all of them (``familiarity``); with none, it keeps
    the store's own questions for that."""
    if len(labelled) < 2:
        raise TrainingDataError(f"{len(labelled)} labelled question(s): too few to train (of {report.questions}: "
                                f"{report.skipped_no_topic} without a topic in the store, "
                                f"{report.skipped_no_path} whose paths reach no answer)")
    started = time.perf_counter()
    rng = seeded(config.seed)
    device = pick_device(config.device)
    held_out = set(split_held_out(range(len(labelled)), config.validation, rng)[0])
    names = [[kg.name(topic.topic) for topic in supervision.topics] for _question, supervision in labelled]
    texts = [question_text(question.text, topic_names) for (question, _s), topic_names in zip(labelled, names)]
    distances = [mention_distances(question.text, topic_names) for (question, _s), topic_names in zip(labelled, names)]
    questions = torch.from_numpy(np.ascontiguousarray(embedder.encode(texts, progress=progress))).to(device)
    # the gate's reference: the user's pairs, or with none the store's own questions
    pair_rows = [index for index in range(len(labelled)) if pairs is None or pairs[index]] or \
        list(range(len(labelled)))
    familiarity = Familiarity.of_pairs(questions[pair_rows], random.Random(config.seed))
    vectors = RelationVectors(kg, embedder)
    vectors.embed_words(texts)
    hops = max(len(path) for _q, s in labelled for topic in s.topics for path in topic.paths)
    groups = [(index, group) for index, (_question, supervision) in enumerate(labelled)
              for group in groups_of(index, supervision)]
    types = path_types(group for index, group in groups if index not in held_out)
    training, validation = [], []
    for index, group in groups:
        weight = 1.0 if weights is None else float(weights[index])
        (validation if index in held_out else training).append(_Tensors(group, texts[index], vectors, types, hops,
                                                                        weight, distances[index],
                                                                        leg=len(names[index]) > 1))
    validation = [g for g in validation if g.full] or [g for g in training if g.full]
    relation_matrix = vectors.matrix.to(device)
    model = PathScorer(ScorerConfig(encoder_dim=questions.shape[1], hidden=config.hidden,
                                    dropout=config.dropout, path_types=len(types))).to(device)
    result = TrainReport(report, training_questions=len(labelled) - len(held_out), held_out_questions=len(held_out),
                         device=str(device))
    store = store_state(kg)

    def batches() -> list[list[_Tensors]]:
        rng.shuffle(training)
        return [training[i:i + config.batch_size] for i in range(0, len(training), config.batch_size)]

    def measure() -> HeldOut:
        loss, hits = group_loss(model, questions, relation_matrix, validation, device)
        return HeldOut(loss.item(), float(hits.mean()) if len(hits) else math.nan)

    def save(epoch: EpochReport[HeldOut]) -> None:
        result.epochs.append(epoch)
        result.seconds = report.seconds + time.perf_counter() - started
        training_meta = {**(meta or {}), "max_hops": hops, "keep_topic": report.keep_topic,
                         "through_topic": report.through_topic,
                         "train_config": asdict(config), "epochs_done": epoch.epoch, "report": result.to_json()}
        result.checkpoint = str(save_checkpoint(out, model, embedder.model_name, store, list(types),
                                                training_meta, familiarity))

    run_epochs(model, config.epochs, config.lr, config.weight_decay, batches,
               lambda batch: group_loss(model, questions, relation_matrix, batch, device)[0], measure, save,
               decay_steps=config.epochs * math.ceil(len(training) / config.batch_size), progress=progress,
               on_epoch=on_epoch)
    return result


def train_from_files(kg: KG, selection: Any, config: TrainConfig, out: str | Path, embedder: Any = None,
                     limits: SupervisionLimits = SupervisionLimits(), progress: bool = False,
                     on_epoch: Callable[[EpochReport], None] | None = None,
                     synthetic: SyntheticLimits | None = None, pair_weight: float = PAIR_WEIGHT,
                     save_synthetic: str | Path | None = None) -> TrainReport:
    """``localkg train paths``: questions → labelled paths → a trained scorer checkpoint at ``out``.

    ``selection`` is a ``localkg.datasets.TrainingSet`` (files, sample, the excluded eval sample),
    or None for none. ``synthetic``: questions made from the store itself are trained on too
    (``localkg.path_scorer.synthetic``), and each of the user's pairs weighs ``pair_weight`` of them;
    ``save_synthetic`` writes them as JSONL.
    """
    from localkg.indexes.embedding import Embedder

    check_writable(out)  # before supervision and epochs are spent on a checkpoint that cannot be written
    if save_synthetic is not None:
        check_writable(save_synthetic, "the store's questions")
    if selection is None and synthetic is None:
        raise TrainingDataError("nothing to train on: give question-answer pairs, or train from the store's own questions")
    labelled, weights, report, meta = [], [], SupervisionReport(), {"db": str(kg.path), "limits": asdict(limits)}
    if selection is not None:
        labelled, report, meta = _labelled_pairs(kg, selection, config, limits, progress)
        weights = [pair_weight if synthetic is not None else 1.0] * len(labelled)
    pairs = [True] * len(labelled)
    if synthetic is not None:
        walks = synthetic_walks(kg, replace(synthetic, max_hops=limits.max_hops, seed=config.seed), progress)
        if not report.walk_differs:  # the user's pairs decide how walks go where they tell; else the store's questions
            for _question, through, avoiding in walks:
                report.vote(through, avoiding)
        made = [(question, supervision) for question, supervision in chosen_walk(walks, report.through_topic)
                if supervision is not None]
        if save_synthetic is not None:
            write_questions(save_synthetic, [question for question, _supervision in made])
        labelled += made
        weights += [1.0] * len(made)
        pairs += [False] * len(made)
        report.labelled += len(made)
        meta["synthetic"] = {"questions": len(made), "limits": asdict(synthetic), "pair_weight": pair_weight}
    embedder = embedder or Embedder(device=str(pick_device(config.device)))
    result = train_scorer(kg, labelled, embedder, config, out, report, meta=meta, progress=progress,
                          on_epoch=on_epoch, weights=weights, pairs=pairs)
    result.store_questions = meta.get("synthetic", {}).get("questions", 0)
    return result


def _labelled_pairs(kg: KG, selection: Any, config: TrainConfig, limits: SupervisionLimits,
                    progress: bool) -> tuple[list[tuple[Any, Supervision]], SupervisionReport, dict[str, Any]]:
    """The selected question-answer pairs with their labelled paths, the report, and what the
    checkpoint records of them."""
    questions, counts = select_training_questions(selection, config.seed)
    linker = None
    topics = []
    for question in questions:
        if question.topic_entities:
            topics.append(resolve_topics(kg, question))
            continue
        if linker is None:
            from localkg.indexes.linking import EntityLinker

            linker = EntityLinker(kg)
        topics.append([candidate.id for candidate in linker.link(question.text, k=1)])
    labelled, report = supervise(kg, questions, topics, limits, progress=progress)
    meta = {"trained_on": selection.describe(counts), "questions": len(questions), "db": str(kg.path),
            "question_ids": [question.id for question in questions], "limits": asdict(limits)}
    return labelled, report, meta
