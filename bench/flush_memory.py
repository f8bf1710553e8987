"""What each flush of a dump load holds and costs: the writer's memory and time per Kùzu statement.

Why: the load benchmark (bench/load_dumps.py) finds the peak RSS growing with the dump. This
script shows where: it loads a generated Freebase dump in this process with `load_freebase`
(2 parsers, the given buffer pool, which sets the flush size: 256 bytes of pool per row), and
samples this process's resident memory every 30 ms during each ``COPY``/``LOAD``/``CHECKPOINT``
statement of every flush, and times it (by wrapping ``KG.execute``); what a flush spends outside
them is its commit and the Python side (reading and merging the staged files). Then the same for
the writer's close, which applies the updates of stored nodes that the flushes saved, a range of
sequence numbers at a time.

    python bench/flush_memory.py --lines 8000000 --buffer-pool-mb 512

Prints one JSON object: per flush, the rows it copied, the nodes already stored, the writer's
memory when the flush began and its peak, each statement's growth and seconds, and the seconds
outside them; and each flush's peak and seconds as ratios to the first flush's (the reference,
measured in the same run).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from load_dumps import LINES_PER_ENTITY, make_dump  # bench/ is on the path when run as a script


def resident_mb() -> int:
    """This process's resident memory, in MB."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20


class PeakSampler:
    """The largest resident memory seen while the block runs (sampled every 30 ms)."""

    def __enter__(self) -> "PeakSampler":
        self.start = self.peak = resident_mb()
        self._running = True
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while self._running:
            self.peak = max(self.peak, resident_mb())
            time.sleep(0.03)

    def __exit__(self, *exc: object) -> None:
        self._running = False
        self._thread.join()
        self.peak = max(self.peak, resident_mb())


def instrument(flushes: list[dict], close: dict) -> None:
    """Record every flush and its statements into ``flushes``, and the close's steps (updates of
    stored nodes, hub flags) into ``close``."""
    import pyarrow.parquet as pq

    from localkg.store import closing, schema
    from localkg.store import writer as writer_module
    from localkg.store.kg import KG

    def timed_execute(kg: KG, query: str, parameters: dict | None = None):
        if not flushes or flushes[-1].get("done") or not query.startswith(("COPY", "LOAD", "CHECKPOINT")):
            return execute(kg, query, parameters)
        started = time.perf_counter()
        with PeakSampler() as sampler:
            result = execute(kg, query, parameters)
        seconds = round(time.perf_counter() - started, 2)
        statement = query.split(" FROM")[0] if query.startswith(("COPY", "CHECKPOINT")) else "LOAD (relation fact counts)"
        flushes[-1]["statements"].append({"statement": statement, "start_mb": sampler.start,
                                          "growth_mb": sampler.peak - sampler.start, "seconds": seconds})
        return result

    def recorded_flush(writer: writer_module.GraphWriter) -> None:
        stored = writer.kg.execute("MATCH (n:Node) RETURN count(*)").get_next()[0]
        flushes.append({"rows": writer._staged_rows, "nodes_stored_before": stored, "statements": []})
        started = time.perf_counter()
        with PeakSampler() as sampler:
            flush(writer)
        flushes[-1].update(start_mb=sampler.start, peak_mb=sampler.peak, done=True,
                           seconds=round(time.perf_counter() - started, 1))

    def recorded(step: str, method):
        def run(owner, *args) -> None:  # a writer, or the store whose hubs the close flags
            pending = getattr(owner, "kg", owner).path / schema.PENDING_DIR
            saved = sorted(pending.glob("*/*.parquet")) if pending.is_dir() else []
            rows_saved = sum(pq.read_metadata(path).num_rows for path in saved)
            started = time.perf_counter()
            with PeakSampler() as sampler:
                method(owner, *args)
            if step in close and not saved:  # the loader applies updates before the writer closes
                return
            close[step] = {"start_mb": sampler.start, "peak_mb": sampler.peak,
                           "seconds": round(time.perf_counter() - started, 1)}
            if method is apply_updates:
                close[step].update(files_saved=len(saved), rows_saved=rows_saved)
        return run

    execute, flush = KG.execute, writer_module.GraphWriter.flush
    apply_updates, flag_hubs = writer_module.GraphWriter.apply_updates, closing.flag_hubs
    KG.execute = timed_execute
    writer_module.GraphWriter.flush = recorded_flush
    writer_module.GraphWriter.apply_updates = recorded("updates of stored nodes", apply_updates)
    closing.flag_hubs = recorded("hub flags and summaries", flag_hubs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=8_000_000)
    parser.add_argument("--buffer-pool-mb", type=int, default=512)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="localkg-flush-"))
    workdir.mkdir(parents=True, exist_ok=True)
    dump = workdir / "fb.nt.gz"
    made = make_dump("freebase", int(args.lines / LINES_PER_ENTITY), dump)
    from localkg.loaders.freebase import load_freebase
    from localkg.loaders.memory import arrow_uses_system_allocator
    from localkg.store import KG

    flushes: list[dict] = []
    close: dict = {}
    instrument(flushes, close)
    arrow_uses_system_allocator()  # as `localkg load` does
    db = workdir / "db"
    shutil.rmtree(db, ignore_errors=True)
    with KG.create(db, buffer_pool_bytes=args.buffer_pool_mb << 20) as kg:
        load_freebase(kg, [str(dump)], workers=2, progress=False)
    copied = [f for f in flushes if f["rows"]]
    for entry in copied:
        entry.pop("done")
        entry["seconds_outside_statements"] = round(entry["seconds"] - sum(s["seconds"] for s in entry["statements"]), 1)
        entry["peak_vs_first"] = round(entry["peak_mb"] / copied[0]["peak_mb"], 2)
        entry["seconds_vs_first"] = round(entry["seconds"] / copied[0]["seconds"], 2)
    print(json.dumps({"lines": made["lines"], "buffer_pool_mb": args.buffer_pool_mb, "flushes": copied,
                      "close": close}))


if __name__ == "__main__":
    main()
