"""A persistent cache of LLM answers, for sweeps that ask the same calls again.

Decoding is greedy and every prompt is evaluated canonically (``engine.py``),
so a call's answer is a function of the model file, its GPU offload, the
prompt style, the seed, the call kind and its exact text and parameters.
Keyed by exactly those, a stored answer *is* the answer a fresh call would
give: a sweep over a reasoner setting (bpc's ``K``, say) asks the calls its
settings share once, and a rerun of an evaluation costs nothing in model
time. The cached call is still recorded (with ``cached=True`` and the
seconds the lookup took), so call and token counts stay those of the method.

The store is one SQLite file: safe for several evaluations writing at once,
and a crash loses at most the call in flight.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from localkg.errors import LLMSettingsError

_SCHEMA = "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, answer TEXT NOT NULL)"


class ResponseCache:
    """Answers of earlier calls, by :func:`call_key`. Opens (and creates) ``path`` on first use."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    def get(self, key: str) -> dict[str, Any] | None:
        with self._database() as connection:
            row = connection.execute("SELECT answer FROM answers WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, answer: dict[str, Any]) -> None:
        with self._database() as connection:
            connection.execute("INSERT OR REPLACE INTO answers (key, answer) VALUES (?, ?)",
                               (key, json.dumps(answer)))
            connection.commit()

    def __len__(self) -> int:
        with self._database() as connection:
            return int(connection.execute("SELECT count(*) FROM answers").fetchone()[0])

    @contextmanager
    def _database(self) -> Iterator[sqlite3.Connection]:
        """The open connection, under the lock. A path SQLite cannot use as the cache (a file of
        another kind, a database of other tables, a folder that cannot be made) is an
        :class:`~localkg.errors.LLMSettingsError` naming it, not a traceback in the middle of a run."""
        with self._lock:
            try:
                yield self._connect()
            except (sqlite3.DatabaseError, OSError) as error:
                raise LLMSettingsError(f"cannot use {self.path} as the LLM cache: {error} (--llm-cache takes a new "
                                       "file or the cache file of an earlier run)") from None

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(_SCHEMA)
            connection.commit()
            self._connection = connection
        return self._connection


def model_identity(path: Path) -> list[Any]:
    """What names a model file's contents without reading 250 MB: its path, size and mtime."""
    stat = path.stat()
    return [str(path.resolve()), stat.st_size, stat.st_mtime_ns]


def call_key(model: list[Any], settings: dict[str, Any], kind: str, text: str, parameters: dict[str, Any]) -> str:
    """The SHA-256 of everything an answer depends on.

    >>> a = call_key(["m.gguf", 1, 2], {"seed": 0}, "choose", "Pick one", {"k": 1})
    >>> a == call_key(["m.gguf", 1, 2], {"seed": 0}, "choose", "Pick one", {"k": 1})
    True
    >>> a == call_key(["m.gguf", 1, 2], {"seed": 0}, "choose", "Pick one", {"k": 2})
    False
    """
    material = json.dumps([model, settings, kind, text, parameters], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()
