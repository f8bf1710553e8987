"""Saving and loading a trained path scorer, tied to its store and its encoder.

A checkpoint is one ``torch.save`` file of plain data (weights, the scorer's
sizes, the encoder's name, the store's fingerprint and what it was trained
on), read back with ``weights_only=True`` so loading never runs pickled code.
The fingerprint is a hash of the store's relation catalogue: a scorer has
learned what *these* relations mean, so a checkpoint is refused once the
relations differ, while loading more facts over the same relations keeps it
valid. The checkpoint also keeps the relations and the store's load generation
it was trained on, so that the refusal can tell a store that has since gained
relations from another store. Writes are atomic (``localkg.training.checkpoints``).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from localkg.errors import CheckpointError
from localkg.path_scorer.familiarity import Familiarity
from localkg.path_scorer.model import PathScorer, ScorerConfig
from localkg.store.kg import KG
from localkg.training.checkpoints import load_model, save_model

FORMAT = 2  # 2: the score adds the untrained label match (model.label_match)
TRAIN_COMMAND = "localkg train paths"


@dataclass(frozen=True)
class StoreState:
    """What a trained scorer depends on of its store: the relation ids, and the load generation
    they were read at (to say how the store changed when they no longer match)."""

    relations: tuple[str, ...]
    generation: int

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256("\n".join(self.relations).encode("utf-8")).hexdigest()[:16]


def store_state(kg: KG) -> StoreState:
    relations = sorted(relation for relation, _label, _description, _facts in kg.relation_catalogue())
    return StoreState(tuple(relations), kg.generation)


def save_checkpoint(path: str | Path, model: PathScorer, encoder: str, store: StoreState,
                    path_types: list[tuple[tuple[str, str], ...]], meta: dict[str, Any],
                    familiarity: Familiarity | None = None) -> Path:
    """Write ``model`` with its config, encoder name, the ``store`` it was trained on, the chains
    it has a vector of (``path_types``, in row order from 1), training ``meta`` and the training
    pairs' ``familiarity`` (None: trained on the store's own questions alone)."""
    return save_model(path, FORMAT, model, encoder, meta, store=store.fingerprint,
                      store_relations=list(store.relations), store_generation=store.generation,
                      path_types=[[list(hop) for hop in chain] for chain in path_types],
                      familiarity=familiarity.to_checkpoint() if familiarity else None)


def load_checkpoint(path: str | Path, kg: KG | None = None, encoder: str | None = None,
                    device: str | torch.device = "cpu") -> tuple[PathScorer, dict[str, Any]]:
    """The scorer (in eval mode, on ``device``) and the checkpoint's training ``meta``, with
    ``path_types``: each chain with a vector of its own → its row, and ``familiarity``: the
    training pairs' (``familiarity.Familiarity``, or None).

    With ``kg`` the checkpoint must have been trained on a store with the same relations, with
    ``encoder`` on the same frozen encoder: either mismatch would score noise, so it is refused.
    """
    path = Path(path)
    model, payload = load_model(path, FORMAT, "path scorer", TRAIN_COMMAND,
                                lambda config: PathScorer(ScorerConfig(**config)), fields=("store", "path_types"),
                                encoder=encoder, device=device)
    if kg is not None:
        _check_store(path, payload, kg)
    path_types = {tuple(tuple(hop) for hop in chain): row for row, chain in enumerate(payload["path_types"], 1)}
    return model, {**payload["meta"], "encoder": payload["encoder"], "store": payload["store"],
                   "path_types": path_types, "familiarity": Familiarity.from_checkpoint(payload.get("familiarity"))}


def _check_store(path: Path, payload: dict[str, Any], kg: KG) -> None:
    """Refuse a checkpoint whose relations are not the store's, saying whether the store has
    changed since training (a load added relations) or is another store."""
    now = store_state(kg)
    if payload["store"] == now.fingerprint:
        return
    retrain = f"retrain with `{TRAIN_COMMAND} --db {kg.path}`"
    trained = payload.get("store_relations")
    if trained is None:  # written before checkpoints kept their relations
        raise CheckpointError(f"{path} was trained on other relations than those {kg.path} has now (the store "
                              f"has changed since, or is another store); {retrain}")
    added, missing = sorted(set(now.relations) - set(trained)), sorted(set(trained) - set(now.relations))
    if missing:
        raise CheckpointError(f"{path} was trained on another store: {len(missing)} of its relations "
                              f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}) are not in "
                              f"{kg.path}; {retrain}")
    raise CheckpointError(f"{kg.path} has changed since {path} was trained: load generation "
                          f"{payload.get('store_generation')} then, {now.generation} now, with {len(added)} new "
                          f"relation{'s' if len(added) > 1 else ''} ({', '.join(added[:3])}"
                          f"{', ...' if len(added) > 3 else ''}) the scorer has not learned; {retrain}")
