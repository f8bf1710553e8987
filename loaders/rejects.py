"""Rejected input lines: counted by reason and written to ``DB/rejects.tsv``.

Bad input loses nothing: every line a loader cannot use is appended with the
file it came from, its line number, the reason and the run (when the load that
rejected it started), so a user can fix and reload just those lines, and tell
one run's rejects from another's. ``max_rejects`` turns too many into an error.
"""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from localkg.errors import TooManyRejectsError
from localkg.store import schema

MAX_RAW_CHARS = 2_000


class RejectLog:
    """Appends rejected lines to the database's rejects file and counts them by reason."""

    def __init__(self, db_path: Path, max_rejects: int | None = None):
        self.path = Path(db_path) / schema.REJECTS_FILE
        self.max_rejects = max_rejects
        self.by_reason: Counter[str] = Counter()
        self.run = time.strftime("%Y-%m-%dT%H:%M:%S")  # names this load's rows in the file
        self._handle = None

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())

    def reject(self, source: str, line_number: int, reason: str, raw: str | bytes) -> None:
        """Record one rejected line; raise :class:`TooManyRejectsError` past ``max_rejects``."""
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", "backslashreplace")
        if self._handle is None:
            new = not self.path.exists()
            self._handle = open(self.path, "a", encoding="utf-8")
            if new:
                self._handle.write("source\tline\treason\traw\trun\n")
        shown = raw.rstrip("\r\n")[:MAX_RAW_CHARS].replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
        self._handle.write(f"{source}\t{line_number}\t{reason}\t{shown}\t{self.run}\n")
        self.by_reason[reason] += 1
        if self.max_rejects is not None and self.total > self.max_rejects:
            self.close()
            raise TooManyRejectsError(
                f"more than {self.max_rejects} lines rejected (latest: {source}:{line_number}: {reason}); "
                f"see {self.path}")

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
