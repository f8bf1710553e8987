"""The bulk write path: batches of facts and node attributes into Kùzu.

Every loader fills :class:`FactBatch` objects (or, in the dump loaders' worker processes,
:class:`ColumnBatch` columns) and hands them to one :class:`GraphWriter`, which ``KG.writer()``
opens. The writer holds the state of one write and calls a module for each step:

- ``recovery.py``: what an interrupted writer left is settled when the writer opens
  (:meth:`GraphWriter.recover`; ``recovery.recover`` settles all of it for ``localkg check
  --repair``), so a crash at any step loses nothing;
- ``staging.py``: each batch is deduplicated against the hash sets of ``dedupe.py`` and its new
  rows staged as Parquet under ``DB/staged/``;
- ``flush.py``: the staged batches are copied into Kùzu with one ``COPY`` per table once
  ``flush_rows`` rows have gathered (``copying.py`` copies keyed tables in pieces);
- ``updates.py``: updates of stored nodes wait under ``DB/pending/``;
- ``closing.py``: the close applies them and flags new hubs (``hubs.py``);
- ``pool.py``: flushes and update ranges are sized to the buffer pool, and a write that
  overflows it raises :class:`~localkg.errors.BufferPoolFullError`.

The reasons and measurements are in docs/architecture.md and docs/benchmarks.md.
"""
from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from localkg.errors import LoadError
from localkg.store import schema
from localkg.store.batch import ColumnBatch, FactBatch
from localkg.store.closing import finish_writes
from localkg.store.dedupe import open_key_sets
from localkg.store.flush import flush_staged
from localkg.store.hubs import sequence_ranges, stored_hubs
from localkg.store.pool import buffer_pool_errors, update_span_for_pool
from localkg.store.recovery import recover_staged
from localkg.store.staging import StagedWrite, WriteCounts, stage_batch, staged_batches
from localkg.store.updates import apply_pending_updates

if TYPE_CHECKING:
    from localkg.store.kg import KG

__all__ = ["GraphWriter", "StagedWrite", "WriteCounts"]


class GraphWriter:
    """Appends :class:`FactBatch` or :class:`ColumnBatch` objects to a database, deduplicating; use as a
    context manager, opened by ``KG.writer()``, which recovers it (:meth:`recover`). Writes are staged
    and reach Kùzu at a flush (see the module docstring): ``flush_rows`` staged nodes and facts
    trigger one."""

    def __init__(self, kg: "KG", flush_rows: int):
        self.kg = kg
        self.flush_rows = flush_rows
        self.keys = open_key_sets(kg.path)
        self.totals = WriteCounts()
        self.recovered: list[StagedWrite] = []  # an interrupted writer's batches: in the store once recovered
        self.update_span = update_span_for_pool(kg.buffer_pool_bytes)
        self._hubs = stored_hubs(kg)
        self._staged_rows = 0
        self._flush_failed = False

    @buffer_pool_errors()
    def recover(self) -> list[StagedWrite]:
        """Settle what an interrupted or failed writer left, before this writer stages anything
        (``recovery.recover_staged``: its flush finished or dropped, the hash sets rebuilt if they
        disagree, its staged batches flushed); return those batches, also kept in
        :attr:`recovered`. The close's passes it owed are done when this writer closes."""
        try:
            self.recovered = recover_staged(self.kg, self.keys)
        except BaseException:
            self._flush_failed = True
            raise
        return self.recovered

    def __enter__(self) -> "GraphWriter":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            shutil.rmtree(self.kg.path / schema.STAGING_DIR, ignore_errors=True)  # staged batches wait
            return
        self.close()

    @buffer_pool_errors()
    def close(self) -> None:
        """Finish: flush, apply the pending updates of stored nodes, and, if anything changed, flag
        new hubs and bump the generation (``closing.finish_writes``); drop the transient files.
        After a failed flush the staged batches stay for the next writer (kuzu 0.11.3 aborts the
        process on a second rollback on one connection)."""
        if not self._flush_failed:
            self.flush()
            finish_writes(self.kg, self.keys["nodes"], self.update_span)
        shutil.rmtree(self.kg.path / schema.STAGING_DIR, ignore_errors=True)

    def write(self, batch: FactBatch | ColumnBatch, origin: Any = None) -> WriteCounts:
        """Append one batch (staged; durable once this returns) and flush when enough rows have
        gathered; return what it added. ``origin`` (JSON) says where the batch came from: a later
        writer that finds the batch staged and commits it lists it in :attr:`recovered`."""
        counts = self.stage(batch, origin)
        self.flush_when_full()
        return counts

    @buffer_pool_errors()
    def stage(self, batch: FactBatch | ColumnBatch, origin: Any = None) -> WriteCounts:
        """:meth:`write` without the flush, for a loader that records its progress between the two
        (a crash in the flush then finds the batch recorded as written)."""
        counts = stage_batch(self.kg, self.keys, batch, origin, self._hubs)
        self._staged_rows += counts.nodes_added + counts.facts_added
        self.totals += counts
        return counts

    def flush_when_full(self) -> None:
        """Flush once the staged nodes and facts reach ``flush_rows``."""
        if self._staged_rows >= self.flush_rows:
            self.flush()

    @buffer_pool_errors()
    def flush(self) -> None:
        """Copy every staged batch into Kùzu (``flush.flush_staged``).

        When a step fails (e.g. Kùzu's buffer pool is full) its transaction is rolled back and
        the staged batches stay for the next writer, which finishes the flush when it opens; this
        writer refuses to flush again (kuzu 0.11.3 aborts the process on a second rollback)."""
        if self._flush_failed:
            raise LoadError("an earlier flush of this writer failed; its writes stay staged for the next "
                            "writer, which flushes them when it opens")
        batches = staged_batches(self.kg.path)
        if not batches:
            return
        try:
            flush_staged(self.kg, self.keys["nodes"], batches)
        except BaseException:
            self._flush_failed = True
            raise
        self._staged_rows = 0

    @buffer_pool_errors()
    def apply_updates(self) -> None:
        """Apply the updates of stored nodes that the flushes saved (:meth:`close` does too; a load
        that reads node attributes before closing calls it first), a range of
        :attr:`update_span` sequence numbers at a time (``updates.apply_pending_updates``)."""
        apply_pending_updates(self.kg, self.keys["nodes"], self.update_span)

    def sequence_ranges(self) -> list[tuple[int, int]]:
        """The ranges ``[low, high)`` of :attr:`update_span` sequence numbers that cover every stored
        node, for passes over all nodes that must hold one range at a time."""
        return sequence_ranges(self.kg, self.update_span)
