"""Writing a trained torch model as a checkpoint of plain data (read back with
``weights_only=True``, so loading never runs pickled code), shared by the fog and path scorers.
The write goes to a temporary file that then replaces the target, so an interrupted training
run leaves the previous checkpoint intact."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


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
