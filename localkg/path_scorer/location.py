"""Where the path scorer's checkpoint lives.

Apart from ``checkpoint`` (which needs torch and the model code) so that choosing a reasoner,
or a relation ranking, by whether the store has a trained scorer imports neither.
"""
from __future__ import annotations

from pathlib import Path

#: Where ``localkg train paths`` writes by default, and where the reasoners look: beside the graph.
DEFAULT_NAME = Path("paths") / "scorer.pt"


def default_checkpoint(db_path: str | Path) -> Path:
    """The path scorer of the store at ``db_path``: beside its graph, so it travels with the store."""
    return Path(db_path) / DEFAULT_NAME
