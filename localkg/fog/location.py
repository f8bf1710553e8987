"""Where the foresight scorer's checkpoint lives.

Apart from ``checkpoint`` (which needs torch and the model code) so that a reasoner can find
out whether a store has a trained scorer without importing either.
"""
from __future__ import annotations

from pathlib import Path

#: Where ``localkg train fog`` writes by default, and where ``fog`` looks: beside the graph.
DEFAULT_NAME = Path("fog") / "scorer.pt"


def default_checkpoint(db_path: str | Path) -> Path:
    """The foresight scorer of the store at ``db_path``: beside its graph, so it travels with the store."""
    return Path(db_path) / DEFAULT_NAME


def checkpoint_location(setting: str, db_path: str | Path | None) -> Path | None:
    """The checkpoint a reasoner's ``checkpoint`` setting names: the given path, or, when it is
    empty, the default one beside the graph (None without a graph)."""
    if setting:
        return Path(setting).expanduser()
    return None if db_path is None else default_checkpoint(db_path)
