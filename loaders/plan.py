"""What a dump load will take, before it starts: lines, flushes, memory, disk, and the buffer pool.

A full dump runs for hours to days, so the load first reads a sample (the first ``SAMPLE_BYTES``
of text of the first file), parses it with the load's own format, and scales what the sample
made (lines, facts, described nodes and names per byte; text per compressed byte) to the whole
input. The peak memory is the larger of two measured costs, each a named constant saying where it
was measured: what the load holds for the nodes it stores, and what one flush holds for the rows
it copies. The buffer pool is a quarter of the available memory, but no larger than one flush of
everything the input is expected to stage (a larger pool means fewer flushes, and past that it
buys nothing). The plan warns when the peak does not fit.
``localkg load freebase|wikidata --plan`` prints the plan and stops.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from localkg.loaders.parallel import DumpFormat, iter_chunks, parse_chunk
from localkg.loaders.checkpoint import Position
from localkg.store.batch import ColumnBatch
from localkg.store.pool import POOL_BYTES_PER_FLUSHED_ROW, flush_rows_for_pool

SAMPLE_BYTES = 8 << 20
POOL_SHARE_OF_MEMORY = 0.25  # a flush needs memory outside the pool too (docs/loading.md)
MIN_POOL_BYTES = 256 << 20
# The two costs the peak is the larger of, fitted to seven loads of make_dump.py Freebase dumps
# (1.25M and 5M entities; the automatic pool and 256 MiB to 2 GiB; docs/benchmarks.md, "The plan's
# memory estimate", bench/plan_accuracy.py):
# - what the load holds for the store: 1.39 GB with 1.94M nodes, 2.78-2.95 GB with 6.96M, whatever
#   the pool (Kùzu's fact copy alone keeps about 140 B per stored node, bench/copy_rel_memory.py);
#   checked at 20M entities: 7.54 GB with 25.3M nodes, 8% below what these constants give;
LOAD_BASE_BYTES = 820_000_000
STORED_NODE_BYTES = 290
# - what one flush holds: 1.23 GB for a flush of 6.06M rows, 4.21 GB for one of 23.5M.
FLUSH_BASE_BYTES = 200_000_000
FLUSHED_ROW_BYTES = 170
# Store size: 108 MB for 732k facts and 393k nodes in one flush (docs/loading.md, "Full dumps").
DISK_BYTES_PER_FACT = 150
KEY_BYTES = 8  # one BLAKE2b-64 hash per node, fact, label and name link (DB/keys/)


@dataclass(frozen=True)
class MeasuredRate:
    """What one format's loads were measured at on 2 cores: input lines per second, what the time
    covered, and what the estimate leaves out."""

    lines_per_second: int
    covers: str
    caveat: str


# Each format's own measurement, keyed by its options()["format"]; a format without one gets no
# time estimate (another format's rate says nothing about it: a Wikidata JSON line is an entity).
MEASURED_RATES = {
    # The whole load of a 44.9M-line generated dump in one flush: 263,470 lines/s (docs/benchmarks.md,
    # "Dump loading").
    "freebase": MeasuredRate(263_000, "the whole load", "measured in one flush; with several, each flush "
                                                        "grows dearer with the store"),
    # The whole load of 20,000 generated items: 5,988 entities (lines) per second (docs/benchmarks.md,
    # "Dump loading").
    "json": MeasuredRate(5_988, "the whole load", "measured on generated items; real entities are larger, and "
                                                  "flushes grow dearer with the store"),
}


@dataclass
class LoadPlan:
    """The estimate for one load; ``describe`` is what the command prints."""

    input_bytes: int
    sample_text_bytes: int
    text_bytes: int
    lines: int
    facts: int
    nodes: int
    names: int
    buffer_pool_bytes: int
    pool_reason: str
    rows_per_flush: int
    flushes: int
    peak_memory_bytes: int
    disk_bytes: int
    format: str
    lines_per_second_2_cores: int | None  # the format's measured rate (MEASURED_RATES), None without one
    seconds_2_cores: float | None
    available_memory_bytes: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        warning = ([f"plan: warning: the peak is above the {_size(self.available_memory_bytes)} of memory available; "
                    "drop domains with --filter, or load on a machine with more memory"]
                   if self.peak_memory_bytes > self.available_memory_bytes else [])
        return "\n".join([
            f"plan: input {_size(self.input_bytes)}, about {_size(self.text_bytes)} of text and "
            f"{self.lines:,} lines (from a sample of {_size(self.sample_text_bytes)})",
            f"plan: about {self.facts:,} facts, {self.nodes:,} nodes and {self.names:,} names",
            f"plan: buffer pool {_size(self.buffer_pool_bytes)} ({self.pool_reason}): {self.rows_per_flush:,} rows "
            f"per flush, {self.flushes:,} flush{'es' if self.flushes != 1 else ''}",
            f"plan: peak memory about {_size(self.peak_memory_bytes)}, disk about {_size(self.disk_bytes)} "
            f"(store and hash sets, besides the input)",
            self._time(),
            *warning])

    def _time(self) -> str:
        rate = MEASURED_RATES.get(self.format)
        if rate is None or self.seconds_2_cores is None:
            return f"plan: no load rate has been measured for the {self.format} format, so no time estimate"
        return (f"plan: {rate.covers} at the 2-core rate of {rate.lines_per_second:,} lines/s: "
                f"{_duration(self.seconds_2_cores)} ({rate.caveat})")


def available_memory_bytes() -> int:
    """Memory the system can give without swapping (``MemAvailable``), else its physical memory."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def choose_buffer_pool(expected_rows: int, available_bytes: int) -> tuple[int, str]:
    """A quarter of ``available_bytes``, no more than one flush of ``expected_rows`` needs, at least
    :data:`MIN_POOL_BYTES`; with the reason, for the plan."""
    choices = [(int(available_bytes * POOL_SHARE_OF_MEMORY), f"automatic: a quarter of {_size(available_bytes)} available"),
               (max(1, expected_rows) * POOL_BYTES_PER_FLUSHED_ROW,
                f"automatic: all {expected_rows:,} expected rows in one flush")]
    chosen, reason = min(choices)
    if chosen < MIN_POOL_BYTES:
        chosen, reason = MIN_POOL_BYTES, f"automatic: the minimum, {_size(MIN_POOL_BYTES)}"
    return (chosen + (1 << 20) - 1) >> 20 << 20, reason


def peak_memory(buffer_pool_bytes: int, nodes: int, rows: int) -> int:
    """The load's estimated peak with ``nodes`` stored in the end and ``rows`` (nodes and facts) staged
    in all: what it holds for the store, or what its largest flush holds, whichever is more."""
    rows_per_flush = min(rows, flush_rows_for_pool(buffer_pool_bytes))
    return max(LOAD_BASE_BYTES + STORED_NODE_BYTES * nodes, FLUSH_BASE_BYTES + FLUSHED_ROW_BYTES * rows_per_flush)


def plan_load(paths: Sequence[str | Path], fmt: DumpFormat, buffer_pool_bytes: int | None = None,
              available_bytes: int | None = None) -> LoadPlan:
    """The plan for loading ``paths`` with ``fmt``; ``buffer_pool_bytes`` given (``--buffer-pool-mb``) is
    kept, else it is chosen from ``available_bytes`` (default: what the system has now)."""
    paths = [Path(p) for p in paths]
    input_bytes = sum(p.stat().st_size for p in paths)
    format = fmt.options()["format"]
    chunk = next(iter_chunks(paths[:1], Position(), SAMPLE_BYTES, fmt.cut), None)
    if chunk is None or chunk.size == 0:
        return _plan(input_bytes, 0, 0, 0, 0, 0, 0, format, buffer_pool_bytes, available_bytes)
    result = parse_chunk(fmt, chunk)
    batch = result.batch
    compressed = chunk.compressed or chunk.size
    scale = (input_bytes * chunk.size / compressed) / chunk.size  # whole input's text per sample byte
    return _plan(input_bytes, chunk.size, int(input_bytes * chunk.size / compressed), int(result.lines * scale),
                 int(len(np.unique(batch.fact_hashes)) * scale), int(_described_nodes(batch) * scale),
                 int(batch.names.num_rows * scale), format, buffer_pool_bytes, available_bytes)


def _described_nodes(batch: ColumnBatch) -> int:
    """The sample's distinct described nodes: subjects and literals. The nodes it only names as
    objects are left out: a dump describes most of them elsewhere, and a sample counts those it
    shares with other chunks again (the 5M-entity dump's sample put them at 8.6M, against none left
    bare by the whole load). Literals are counted as if none repeated, an upper bound."""
    described = batch.nodes.column("described").to_numpy(zero_copy_only=False)
    return len(np.unique(batch.node_hashes[described]))


def _plan(input_bytes: int, sample: int, text: int, lines: int, facts: int, nodes: int, names: int, format: str,
          buffer_pool_bytes: int | None, available_bytes: int | None) -> LoadPlan:
    rows = facts + nodes
    available = available_memory_bytes() if available_bytes is None else available_bytes
    if buffer_pool_bytes is None:
        pool, reason = choose_buffer_pool(rows, available)
    else:
        pool, reason = buffer_pool_bytes, "--buffer-pool-mb"
    per_flush = flush_rows_for_pool(pool)
    peak = peak_memory(pool, nodes, rows)
    disk = DISK_BYTES_PER_FACT * facts + KEY_BYTES * (facts + nodes + 2 * names)
    rate = MEASURED_RATES.get(format)
    return LoadPlan(input_bytes, sample, text, lines, facts, nodes, names, pool, reason, per_flush,
                    max(1, math.ceil(rows / per_flush)), peak, disk, format,
                    rate.lines_per_second if rate else None, lines / rate.lines_per_second if rate else None,
                    available)


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return ""


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
