"""Saving and loading a trained foresight scorer.

A checkpoint is one ``torch.save`` file holding plain data only (weights, the
scorer's sizes, the frozen encoder's name and dimension, and what it was trained
on), read back with ``weights_only=True`` so loading never runs pickled code.
Writes are atomic (``localkg.training.checkpoints``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from localkg.fog.model import ForesightScorer, ScorerConfig
from localkg.training.checkpoints import load_model, save_model

FORMAT = 1


def save_checkpoint(path: str | Path, model: ForesightScorer, encoder: str, meta: dict[str, Any]) -> Path:
    """Write ``model`` with its config, encoder name and training ``meta`` to ``path``."""
    return save_model(path, FORMAT, model, encoder, meta)


def load_checkpoint(path: str | Path, encoder: str | None = None,
                    device: str | torch.device = "cpu") -> tuple[ForesightScorer, dict[str, Any]]:
    """The scorer (in eval mode, on ``device``) and the checkpoint's training ``meta``.

    ``encoder`` is the name of the frozen encoder the caller will embed with; a checkpoint
    trained on another encoder's vectors would score noise, so that is refused.
    """
    model, payload = load_model(path, FORMAT, "FoG scorer", "localkg train fog",
                                lambda config: ForesightScorer(ScorerConfig(**{"answer_distance": False, **config})),
                                encoder=encoder, device=device)
    return model, {**payload["meta"], "encoder": payload["encoder"]}
