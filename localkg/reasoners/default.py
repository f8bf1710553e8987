"""Which reasoner answers when none is named: one policy for ``ask``, ``eval``, ``eval grid`` and ``demo``.

The best the store supports: ``learned-paths`` where ``localkg train paths`` has left a path
scorer beside the graph (it leads every set of docs/results.md), else ``tog``, the best there of
the reasoners that need no training and were measured on all six sets. A stale or damaged scorer still
picks ``learned-paths``, which then says in one line why it cannot run and how to retrain: a
silent fallback would measure another reasoner than the one the store was prepared for.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from localkg.path_scorer.location import default_checkpoint

TRAINED = "learned-paths"
UNTRAINED = "tog"


@dataclass(frozen=True)
class DefaultReasoner:
    """The reasoner picked, and why (for the line that names it)."""

    name: str
    reason: str


def default_reasoner(db: str | Path | None) -> DefaultReasoner:
    """The reasoner for the store at ``db`` (None: a run without a store, whose questions bring
    their own graphs) when none is named."""
    if db is not None and default_checkpoint(db).is_file():
        return DefaultReasoner(TRAINED, f"{db} has a trained path scorer")
    where = f"{db} has no trained path scorer" if db is not None else "no store"
    return DefaultReasoner(UNTRAINED, f"{where}; `localkg train paths` makes {TRAINED} the default")
