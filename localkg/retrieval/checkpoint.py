"""Saving and loading a trained path scorer, tied to its store and its encoder.

A checkpoint is one ``torch.save`` file of plain data (weights, the scorer's
sizes, the encoder's name, the store's fingerprint and what it was trained
on), read back with ``weights_only=True`` so loading never runs pickled code.
The fingerprint is a hash of the store's relation catalogue: a scorer has
learned what *these* relations mean, so a checkpoint from a store with other
relations is refused, while loading more facts over the same relations keeps
it valid. Writes are atomic (``localkg.torch_checkpoint``).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from localkg.errors import CheckpointError
from localkg.retrieval.model import PathScorer, ScorerConfig
from localkg.store.kg import KG
from localkg.torch_checkpoint import save_model

FORMAT = 1


def store_fingerprint(kg: KG) -> str:
    """A hash of the relation ids the store holds (what a trained scorer depends on)."""
    relations = sorted(relation for relation, _label, _description, _facts in kg.relation_catalogue())
    return hashlib.sha256("\n".join(relations).encode("utf-8")).hexdigest()[:16]


def save_checkpoint(path: str | Path, model: PathScorer, encoder: str, fingerprint: str,
                    path_types: list[tuple[tuple[str, str], ...]], meta: dict[str, Any]) -> Path:
    """Write ``model`` with its config, encoder name, store fingerprint, the chains it has a
    vector of (``path_types``, in row order from 1) and training ``meta``."""
    return save_model(path, FORMAT, model, encoder, meta, store=fingerprint,
                      path_types=[[list(hop) for hop in chain] for chain in path_types])


def load_checkpoint(path: str | Path, kg: KG | None = None, encoder: str | None = None,
                    device: str | torch.device = "cpu") -> tuple[PathScorer, dict[str, Any]]:
    """The scorer (in eval mode, on ``device``) and the checkpoint's training ``meta``, with
    ``path_types``: each chain with a vector of its own → its row.

    With ``kg`` the checkpoint must have been trained on a store with the same relations, with
    ``encoder`` on the same frozen encoder: either mismatch would score noise, so it is refused.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no path scorer checkpoint at {path} (train one with `localkg train paths`)")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
        if payload.get("format") != FORMAT:
            raise CheckpointError(f"{path}: path scorer checkpoint format {payload.get('format')!r}, "
                                  f"expected {FORMAT}; retrain with `localkg train paths`")
        model = PathScorer(ScorerConfig(**payload["config"]))
        model.load_state_dict(payload["state_dict"])
    except CheckpointError:
        raise
    except Exception as error:  # torch raises many kinds for a truncated or foreign file
        raise CheckpointError(f"{path} is not a path scorer checkpoint: {error}") from None
    if encoder is not None and payload["encoder"] != encoder:
        raise CheckpointError(f"{path} was trained with the encoder {payload['encoder']!r}, not {encoder!r}; "
                              "use the same encoder or retrain")
    if kg is not None and payload["store"] != store_fingerprint(kg):
        raise CheckpointError(f"{path} was trained on another store (its relations differ from those of "
                              f"{kg.path}); retrain with `localkg train paths --db {kg.path}`")
    model.eval()
    path_types = {tuple(tuple(hop) for hop in chain): row for row, chain in enumerate(payload["path_types"], 1)}
    return model.to(device), {**payload["meta"], "encoder": payload["encoder"], "store": payload["store"],
                              "path_types": path_types}
