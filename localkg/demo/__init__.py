"""The bundled demo: a small MetaQA movie graph, built into a user cache directory on first use.

Nothing here reads outside the package, so the demo runs with networking removed
and without the test data.
"""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

DEMO_QUESTION = "who directed the movies starred by [Ginger Rogers]"
DEMO_TOPIC = "Ginger Rogers"


def cache_dir() -> Path:
    """``$LOCALKG_CACHE``, else ``$XDG_CACHE_HOME/localkg``, else ``~/.cache/localkg``."""
    explicit = os.environ.get("LOCALKG_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "localkg"


def triples_file() -> Path:
    """The bundled triples (``head|relation|tail``)."""
    return Path(str(resources.files(__package__).joinpath("movies.psv")))


def ensure_demo_db(path: Path | None = None, progress: bool = False) -> Path:
    """Build the demo database at ``path`` (default: the cache) unless it is already complete."""
    from localkg.loaders.triples import load_triples
    from localkg.store import KG

    path = Path(path) if path else cache_dir() / "demo-db"
    done = path / "demo-complete"
    if done.exists():
        with KG.open(path):  # upgrades a demo database that an older localkg built
            return path
    with KG.open(path, create=True) as kg:
        load_triples(kg, [triples_file()], format="psv", progress=progress)
    done.write_text("built from the bundled movies.psv\n")
    return path
