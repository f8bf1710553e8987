"""Rejected input lines: counted by reason and written to ``DB/rejects.tsv``; ``--max-rejects``.

Bad input loses nothing: every line a loader cannot use is appended with the
file it came from, its line number, the reason and the run (when the load that
rejected it started), so a user can fix and reload just those lines, and tell
one run's rejects from another's.

Every loader records a line's rejection while it parses the line, before the
write that would hold the line's batch. So ``max_rejects`` works the same in
every loader: reject ``max_rejects + 1`` raises :class:`TooManyRejectsError`
before its batch is written, and the store keeps only the batches written
before it (which the loader reports with :meth:`RejectLog.written_through`, so
the message can say what the store holds).

A field holding a NUL character is a reject reason in every loader
(:data:`NUL_REASON`): Kùzu and the hash sets take it as an ordinary character,
so it became ids nobody can type, and it is almost always damage.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from localkg.errors import TooManyRejectsError
from localkg.store import schema
from localkg.store.batch import FactBatch

MAX_RAW_CHARS = 2_000
NUL_REASON = "NUL character"
NOT_TWICE = "facts already stored are not added twice"
RERUN_TRIPLES = f"To go on, fix the file and load it again, or load it again with a larger --max-rejects ({NOT_TWICE})."
RERUN_DUMP = ("To go on, run the same command with --resume and a larger --max-rejects, or fix the file and load "
              f"it again without --resume ({NOT_TWICE}).")


def has_nul(*fields: str) -> bool:
    """Whether any of ``fields`` holds a NUL character.

    >>> has_nul("m.01", "a\\x00b"), has_nul("m.01", "")
    (True, False)
    """
    return any("\x00" in field for field in fields)


def batch_has_nul(batch: FactBatch) -> bool:
    """Whether anything ``batch`` would store (ids, relations, node attributes, relation labels)
    holds a NUL character: for parsers that resolve escapes, whose input shows no NUL byte."""
    if has_nul(*batch.heads, *batch.relations, *batch.tails):
        return True
    for node_id, node in batch.nodes.items():
        if has_nul(node_id, node.name, node.description, node.value, node.datatype, node.lang, *node.aliases,
                   *node.types):
            return True
    return any(has_nul(relation, *info) for relation, info in batch.relation_info.items())


@dataclass
class Written:
    """What a load has written so far: its new facts, and the last line of its last written batch."""

    facts: int
    source: str
    line: int


class RejectLog:
    """Appends rejected lines to the database's rejects file, counts them by reason, and stops the
    load at reject ``max_rejects + 1`` (see the module docstring).

    ``counted`` is how many rejects the load counted in earlier runs (a resumed dump load), so
    the limit is the load's; ``how_to_go_on`` ends the message of a stop.
    """

    def __init__(self, db_path: Path, max_rejects: int | None = None, *, counted: int = 0,
                 how_to_go_on: str = RERUN_TRIPLES):
        self.path = Path(db_path) / schema.REJECTS_FILE
        self.max_rejects = max_rejects
        self.counted = counted
        self.how_to_go_on = how_to_go_on
        self.by_reason: Counter[str] = Counter()
        self.run = time.strftime("%Y-%m-%dT%H:%M:%S")  # names this load's rows in the file
        self.written: Written | None = None
        self._handle = None

    @property
    def total(self) -> int:
        """Rejects recorded by this run."""
        return sum(self.by_reason.values())

    def written_through(self, facts: int, source: str, line: int) -> None:
        """Note that the load's writes so far (``facts`` new facts) hold every line up to ``source:line``."""
        self.written = Written(facts, source, line)

    def reject(self, source: str, line_number: int, reason: str, raw: str | bytes) -> None:
        """Record one rejected line; raise :class:`TooManyRejectsError` when it is one more than
        ``max_rejects`` allows (the line is recorded first, so the file shows where the load stopped)."""
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", "backslashreplace")
        if self._handle is None:
            new = not self.path.exists()
            self._handle = open(self.path, "a", encoding="utf-8")
            if new:
                self._handle.write("source\tline\treason\traw\trun\n")
        shown = (raw.rstrip("\r\n")[:MAX_RAW_CHARS].replace("\\", "\\\\").replace("\t", "\\t")
                 .replace("\n", "\\n").replace("\x00", "\\0"))
        self._handle.write(f"{source}\t{line_number}\t{reason}\t{shown}\t{self.run}\n")
        self.by_reason[reason] += 1
        if self.max_rejects is not None and self.counted + self.total > self.max_rejects:
            self.close()
            raise TooManyRejectsError(self._stop_message(source, line_number, reason))

    def _stop_message(self, source: str, line_number: int, reason: str) -> str:
        if self.written is None:
            kept = "the store holds nothing of this load"
        else:
            kept = (f"the store holds the {self.written.facts:,} new facts of the lines up to "
                    f"{self.written.source}:{self.written.line} and nothing of the lines after")
        return (f"more than {self.max_rejects:,} lines rejected (--max-rejects {self.max_rejects}): the load "
                f"stopped at {source}:{line_number} ({reason}) before writing the batch that holds it, so {kept}. "
                f"The rejects up to that line are in {self.path}. {self.how_to_go_on}")

    def flush(self) -> None:
        """Make the rows recorded so far durable in the file (with the checkpoint that follows a write)."""
        if self._handle is not None:
            self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
