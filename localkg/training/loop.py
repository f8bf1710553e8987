"""The epoch loop both trained scorers run (``localkg train fog``, ``localkg train paths``).

A run is seeded, holds out a share of its examples, fits the model with AdamW and, after every
epoch, measures the held-out examples and writes a checkpoint. The checkpoint is written
atomically (``checkpoints.save_model``), so Ctrl-C keeps the last finished epoch. A scorer brings
what differs: its batches, its loss, what it measures on the held-out examples and what its
checkpoint records.
"""
from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Generic, Sequence, TypeVar

import torch
from tqdm import tqdm

Item = TypeVar("Item")
Batch = TypeVar("Batch")
Measured = TypeVar("Measured")


@dataclass
class RunSettings:
    """What both scorers' ``TrainConfig`` tell a run beside their hyperparameters: the share of
    examples held out (:func:`split_held_out`), the seed (:func:`seeded`) and the torch device
    (``device.pick_device``: None picks a usable GPU, else the CPU)."""

    validation: float = 0.1
    seed: int = 0
    device: str | None = None


def seeded(seed: int) -> random.Random:
    """A Python generator for ``seed``, with torch's seeded too, so the same seed trains the same scorer."""
    torch.manual_seed(seed)
    return random.Random(seed)


def split_held_out(items: Sequence[Item], fraction: float, rng: random.Random) -> tuple[list[Item], list[Item]]:
    """``items`` shuffled, then cut into (held out, training): ``fraction`` of them held out, at
    least one unless ``fraction`` is 0."""
    shuffled = list(items)
    rng.shuffle(shuffled)
    held = max(1, int(len(shuffled) * fraction)) if fraction > 0 else 0
    return shuffled[:held], shuffled[held:]


@dataclass
class EpochReport(Generic[Measured]):
    """One finished epoch: its mean training loss, what the scorer measured on the held-out
    examples (a dataclass of its own), and how long it took."""

    epoch: int
    train_loss: float
    held_out: Measured
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """The held-out measurements beside the epoch's own fields, in one flat record."""
        return {"epoch": self.epoch, "train_loss": self.train_loss, **asdict(self.held_out),
                "seconds": self.seconds}


def run_epochs(model: torch.nn.Module, epochs: int, lr: float, weight_decay: float,
               batches: Callable[[], Sequence[Batch]], batch_loss: Callable[[Batch], torch.Tensor],
               measure: Callable[[], Measured], save: Callable[[EpochReport[Measured]], None],
               decay_steps: int | None = None, progress: bool = False,
               on_epoch: Callable[[EpochReport[Measured]], None] | None = None) -> None:
    """Fit ``model`` for ``epochs`` epochs with AdamW.

    Each epoch trains on ``batches()`` (called once per epoch, so it may shuffle) by
    ``batch_loss``, then ``measure()`` runs in eval mode without gradients; ``save`` records the
    finished epoch and writes the checkpoint, and only then ``on_epoch`` hears of it.
    ``decay_steps``: the learning rate decays on a cosine to 0 over that many batches (None:
    it stays at ``lr``).
    """
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = (torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=decay_steps)
                if decay_steps is not None else None)
    for epoch in range(1, epochs + 1):
        started = time.perf_counter()
        model.train()
        losses = []
        for batch in tqdm(batches(), desc=f"epoch {epoch}/{epochs}", unit="batch", disable=not progress):
            loss = batch_loss(batch)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            if schedule is not None:
                schedule.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            held_out = measure()
        report = EpochReport(epoch, sum(losses) / max(1, len(losses)), held_out, time.perf_counter() - started)
        save(report)
        if on_epoch is not None:
            on_epoch(report)
