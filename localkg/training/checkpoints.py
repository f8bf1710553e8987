"""Writing a trained torch model as a checkpoint of plain data (read back with
``weights_only=True``, so loading never runs pickled code), and reading it back, for both trained
scorers. The write goes to a temporary file that then replaces the target, so an interrupted
training run leaves the previous checkpoint intact."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import torch

from localkg.errors import CheckpointError

#: The fields every checkpoint of :func:`save_model` holds.
FIELDS = ("format", "config", "encoder", "state_dict", "meta")


def save_model(path: str | Path, format_version: int, model: torch.nn.Module, encoder: str, meta: dict[str, Any],
               **fields: Any) -> Path:
    """Write ``model``'s config and weights, the encoder's name, training ``meta`` and ``fields``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": format_version, "config": model.config.to_json(), "encoder": encoder, **fields,
               "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()}, "meta": meta}
    temporary = path.with_name(path.name + ".tmp")
    torch.save(payload, temporary)
    temporary.replace(path)
    return path


def load_model(path: str | Path, format_version: int, what: str, train_command: str,
               build: Callable[[dict[str, Any]], torch.nn.Module], fields: tuple[str, ...] = (),
               encoder: str | None = None,
               device: str | torch.device = "cpu") -> tuple[torch.nn.Module, dict[str, Any]]:
    """The model ``build`` makes of a checkpoint's config, with its weights, in eval mode on
    ``device``, and the checkpoint's payload. ``what`` names the kind (``path scorer``) and
    ``train_command`` the way to make one, for the errors.

    ``encoder`` is the name of the frozen encoder the caller will embed with: a checkpoint trained
    on another encoder's vectors would score noise, so it is refused.

    A file torch cannot read as a checkpoint of this kind (truncated, or another kind of file)
    is one :class:`CheckpointError` saying so and how to make a new one; torch's own message
    would advise loading with ``weights_only=False``, which is about trusting pickled code and
    cannot mend a damaged file.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no {what} checkpoint at {path} (train one with `{train_command}`)")
    damaged = CheckpointError(f"{path} is damaged or is not a {what} checkpoint; make a new one with "
                              f"`{train_command}`")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # torch raises many kinds for a truncated or foreign file
        raise damaged from None
    if not isinstance(payload, dict) or not set(FIELDS + fields) <= set(payload):
        raise damaged
    if payload["format"] != format_version:
        raise CheckpointError(f"{path}: {what} checkpoint format {payload['format']!r}, expected {format_version}; "
                              f"retrain with `{train_command}`")
    try:
        model = build(payload["config"])
        model.load_state_dict(payload["state_dict"])
    except Exception:  # a config or weights of another shape: written by something else
        raise damaged from None
    if encoder is not None and payload["encoder"] != encoder:
        raise CheckpointError(f"{path} was trained with the encoder {payload['encoder']!r}, not {encoder!r}; "
                              "use the same encoder or retrain")
    return model.to(device).eval(), payload


def check_writable(path: str | Path, what: str = "the checkpoint") -> Path:
    """``path`` when ``what`` can be written there, checked before training spends any time:
    not a folder, and below a folder (or where one can be made) that this user may write to."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"cannot write {what} to {path}: it is a folder; name a file")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise CheckpointError(f"cannot write {what} to {path}: {parent} is a file, not a folder; "
                              "choose another place")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CheckpointError(f"cannot write {what} to {path}: {parent} is not writable; choose another place")
    return path
