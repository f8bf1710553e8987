"""The trained scorers' toolkit (localkg.training): device choice, checkpoints written atomically
and read back with one-line errors, the held-out split and the epoch loop.

A small real torch model stands in for a scorer: the toolkit knows nothing of what it scores.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
import torch

from localkg.errors import CheckpointError
from localkg.training.checkpoints import check_writable, load_model, save_model
from localkg.training.device import pick_device
from localkg.training.loop import EpochReport, run_epochs, seeded, split_held_out

WHAT, COMMAND = "tiny scorer", "localkg train tiny"


@dataclass
class TinyConfig:
    inputs: int = 3

    def to_json(self) -> dict[str, int]:
        return asdict(self)


class Tiny(torch.nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.config = config
        self.linear = torch.nn.Linear(config.inputs, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).squeeze(-1)


def build(config: dict) -> Tiny:
    return Tiny(TinyConfig(**config))


def load(path: Path, **options):
    return load_model(path, 1, WHAT, COMMAND, build, **options)


def test_a_checkpoint_round_trips_and_names_its_encoder(tmp_path):
    torch.manual_seed(0)
    model = Tiny(TinyConfig())
    path = save_model(tmp_path / "dir" / "scorer.pt", 1, model, "minilm", {"trained_on": "x"}, extra=[1, 2])
    loaded, payload = load(path, fields=("extra",), encoder="minilm")
    assert not loaded.training
    assert payload["meta"] == {"trained_on": "x"} and payload["extra"] == [1, 2]
    assert torch.equal(loaded.linear.weight, model.linear.weight)
    assert not (tmp_path / "dir" / "scorer.pt.tmp").exists()
    with pytest.raises(CheckpointError) as refused:
        load(path, encoder="another")
    assert str(refused.value) == (f"{path} was trained with the encoder 'minilm', not 'another'; use the same "
                                  "encoder or retrain")


def test_missing_truncated_garbage_and_stale_files_are_one_line_each(tmp_path):
    path = save_model(tmp_path / "scorer.pt", 1, Tiny(TinyConfig()), "minilm", {})
    damaged = f"is damaged or is not a {WHAT} checkpoint; make a new one with `{COMMAND}`"
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(path.read_bytes()[:200])
    garbage = tmp_path / "garbage.pt"
    garbage.write_text("not a checkpoint")
    other_shape = save_model(tmp_path / "other.pt", 1, Tiny(TinyConfig(inputs=5)), "minilm", {})
    payload = torch.load(other_shape, weights_only=True)
    payload["config"] = {"inputs": 3}
    torch.save(payload, other_shape)
    for broken in (truncated, garbage, other_shape):
        with pytest.raises(CheckpointError) as error:
            load(broken)
        assert str(error.value) == f"{broken} {damaged}"
    with pytest.raises(CheckpointError) as error:
        load_model(path, 2, WHAT, COMMAND, build)
    assert str(error.value) == f"{path}: {WHAT} checkpoint format 1, expected 2; retrain with `{COMMAND}`"
    with pytest.raises(CheckpointError) as error:
        load(tmp_path / "missing.pt")
    assert str(error.value) == f"no {WHAT} checkpoint at {tmp_path / 'missing.pt'} (train one with `{COMMAND}`)"


def test_a_write_that_fails_leaves_the_previous_checkpoint(tmp_path):
    path = save_model(tmp_path / "scorer.pt", 1, Tiny(TinyConfig()), "minilm", {"epochs_done": 1})
    (tmp_path / "scorer.pt.tmp").mkdir()  # torch.save cannot write its temporary file
    with pytest.raises(RuntimeError, match="Is a directory"):
        save_model(path, 1, Tiny(TinyConfig()), "minilm", {"epochs_done": 2})
    assert load(path)[1]["meta"] == {"epochs_done": 1}


def test_an_out_that_cannot_be_written_is_refused_up_front(tmp_path):
    assert check_writable(tmp_path / "new" / "scorer.pt") == tmp_path / "new" / "scorer.pt"
    with pytest.raises(CheckpointError, match="it is a folder; name a file"):
        check_writable(tmp_path)


def test_the_device_is_the_named_one_else_a_usable_gpu():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_the_held_out_share_is_seeded_disjoint_and_never_empty_unless_asked():
    held, training = split_held_out(range(25), 0.1, random.Random(0))
    assert len(held) == 2 and sorted(held + training) == list(range(25))
    assert split_held_out(range(25), 0.1, random.Random(0)) == (held, training)
    assert len(split_held_out(range(3), 0.1, random.Random(0))[0]) == 1
    assert split_held_out(range(3), 0.0, random.Random(0))[0] == []


@dataclass
class Measured:
    held_out_loss: float
    grad_enabled: bool
    training_mode: bool


def regression(seed: int = 0) -> tuple[Tiny, torch.Tensor, torch.Tensor]:
    seeded(seed)
    x = torch.randn(64, 3)
    return Tiny(TinyConfig()), x, x @ torch.tensor([1.0, -2.0, 0.5])


def test_the_loop_learns_measures_without_gradients_and_saves_before_it_reports(tmp_path):
    model, x, y = regression()
    events: list[str] = []

    def measure() -> Measured:
        loss = torch.nn.functional.mse_loss(model(x), y).item()
        return Measured(loss, torch.is_grad_enabled(), model.training)

    def save(epoch: EpochReport[Measured]) -> None:
        save_model(tmp_path / "scorer.pt", 1, model, "none", {"epochs_done": epoch.epoch})
        events.append(f"saved {epoch.epoch}")

    reports: list[EpochReport[Measured]] = []
    run_epochs(model, 30, 0.05, 0.0, lambda: [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)],
               lambda batch: torch.nn.functional.mse_loss(model(batch[0]), batch[1]), measure, save,
               on_epoch=lambda epoch: (events.append(f"reported {epoch.epoch}"), reports.append(epoch)))
    assert events[:4] == ["saved 1", "reported 1", "saved 2", "reported 2"] and len(reports) == 30
    assert reports[-1].train_loss < reports[0].train_loss / 10
    assert reports[-1].held_out.held_out_loss < reports[0].held_out.held_out_loss
    assert not reports[-1].held_out.grad_enabled and not reports[-1].held_out.training_mode
    assert list(reports[0].to_json()) == ["epoch", "train_loss", "held_out_loss", "grad_enabled", "training_mode",
                                          "seconds"]


def last_epoch_step(decay_steps: int | None) -> float:
    """How far the weights move in the last of three epochs of two batches each."""
    model, x, y = regression()
    weights: list[torch.Tensor] = []
    run_epochs(model, 3, 0.1, 0.0, lambda: [x, x], lambda batch: torch.nn.functional.mse_loss(model(batch), y),
               lambda: Measured(0.0, False, False), lambda epoch: weights.append(model.linear.weight.detach().clone()),
               decay_steps=decay_steps)
    return float((weights[2] - weights[1]).norm())


def test_the_learning_rate_decays_on_a_cosine_over_the_steps_given():
    assert last_epoch_step(decay_steps=6) < 0.3 * last_epoch_step(decay_steps=None)


def test_ctrl_c_keeps_the_last_finished_epoch(tmp_path):
    model, x, y = regression()
    out = tmp_path / "scorer.pt"
    batches = 0

    def batch_loss(batch):
        nonlocal batches
        batches += 1
        if batches == 5:  # the first batch of epoch 3
            raise KeyboardInterrupt
        return torch.nn.functional.mse_loss(model(batch), y)

    def save(epoch: EpochReport[Measured]) -> None:
        save_model(out, 1, model, "none", {"epochs_done": epoch.epoch})

    with pytest.raises(KeyboardInterrupt):
        run_epochs(model, 5, 0.05, 0.0, lambda: [x, x], batch_loss, lambda: Measured(0.0, False, False), save)
    assert load(out)[1]["meta"] == {"epochs_done": 2}
