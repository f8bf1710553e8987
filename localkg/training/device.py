"""Where a trained scorer trains and runs."""
from __future__ import annotations

import torch


def pick_device(device: str | None) -> torch.device:
    """``device`` when one is named, else ``cuda`` when a GPU is usable, else ``cpu``."""
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
