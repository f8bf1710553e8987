"""The report of a load: one type for every loader (triples, Freebase, Wikidata) and the CLI.

It says what happened to every input line (loaded, duplicate, attribute, filtered, skipped or
rejected, with the reasons), what the store gained, and whether the load completed; dump loads
save it in their checkpoint, so a resumed load reports both runs together.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from localkg.loaders.parallel import ChunkResult
    from localkg.store.writer import StagedWrite, WriteCounts


@dataclass
class LoadReport:
    """What a load did with its input: ``lines_read = facts_loaded + duplicates + attributes +
    filtered + skipped + rejected`` for line formats (a Turtle document counts statements;
    wikidata.py says how entities count)."""

    format: str
    files: list[str]
    lines_read: int = 0
    facts_loaded: int = 0
    duplicates: int = 0
    attributes: int = 0
    filtered: int = 0
    skipped: int = 0
    rejected: int = 0
    nodes_added: int = 0
    filtered_by_reason: dict[str, int] = field(default_factory=dict)
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    rejected_by_reason: dict[str, int] = field(default_factory=dict)
    details: dict[str, int] = field(default_factory=dict)
    chunks: int = 0
    resumed: bool = False
    complete: bool = False
    seconds: float = 0.0
    rejects_file: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LoadReport":
        """The report a load checkpoint saved (``to_json``), for ``--resume``; keys this version does
        not know are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    def to_json(self) -> dict[str, Any]:
        """The report as plain data: what ``load --json`` prints and a load checkpoint keeps."""
        return asdict(self)

    def add_written(self, counts: "WriteCounts") -> None:
        """Count what one write added to the store (``GraphWriter.write``'s counts)."""
        self.facts_loaded += counts.facts_added
        self.duplicates += counts.duplicates
        self.nodes_added += counts.nodes_added

    def add_recovered(self, writes: Sequence["StagedWrite"], load: str, after: Sequence[int] = (0, 0)) -> None:
        """Count the writes that an interrupted run of this load (``origin["load"] == load``) staged
        beyond the line the report covers (``origin["through"]`` past ``after``: file index, line),
        and that the writer opening now saw into the store.

        Their new facts and nodes are this load's, although no report of the interrupted run
        counted them; and the lines that said them, read again from ``after``, will count those
        facts as duplicates (the store holds them by then), so they are taken off the duplicates
        here. Without this, a rerun after a recovered flush reported none of what it added.
        """
        for write in writes:
            origin = write.origin if isinstance(write.origin, dict) else {}
            if origin.get("load") == load and tuple(origin.get("through", ())) > tuple(after):
                self.facts_loaded += write.counts.facts_added
                self.nodes_added += write.counts.nodes_added
                self.duplicates -= write.counts.facts_added

    def add_parsed(self, result: "ChunkResult") -> None:
        """Count a parsed chunk: its lines and attributes, and what it filtered, skipped or rejected, by reason."""
        self.chunks += 1
        self.lines_read += result.lines
        self.attributes += result.attributes
        for total, by_reason, counter in (("filtered", self.filtered_by_reason, result.filtered),
                                          ("skipped", self.skipped_by_reason, result.skipped),
                                          ("rejected", self.rejected_by_reason,
                                           Counter(reason for _, reason, _ in result.rejects))):
            for reason, count in counter.items():
                by_reason[reason] = by_reason.get(reason, 0) + count
                setattr(self, total, getattr(self, total) + count)
        for key, count in result.details.items():
            self.details[key] = self.details.get(key, 0) + count
