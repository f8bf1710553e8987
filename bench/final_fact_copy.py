"""One ``COPY`` of every fact into an empty fact table, under buffer pools smaller than it needs.

Why: a copy into a relationship table that holds rows costs Kùzu memory for every node the store
holds (docs/benchmarks.md, "A copy into a relationship table that holds rows"), because kuzu
0.11.3's relationship copy visits every node group of the bound node table and keeps what it
appends to a group already holding rows in memory until the database closes. A copy into an
empty table writes each node group straight to disk instead, but first partitions every copied
row in the buffer pool, spilling to disk when the pool is smaller. Whether a load can stage all
of its facts and copy them once at the end, in a pool of fixed size, depends on what that spill
costs as the rows outgrow the pool. This script builds a store of generated nodes with the real
schema and an empty ``Fact``, stages the facts as Parquet files, and times the one copy in a
fresh process per pool, sampling its resident memory; the reference is the same copy in the
largest pool given.

    python bench/final_fact_copy.py --nodes 4000000 --facts 16000000 --buffer-pool-mb 2048 1024 512 \
        --workdir /tmp/finalcopy

Prints one JSON object: per pool, the copy's seconds and memory growth, and both as ratios to
the reference's.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from copy_rel_memory import copy_nodes, fact_rows  # bench/ is on the path when run as a script
from flush_memory import PeakSampler

FILE_ROWS = 1_000_000


def build_store(path: Path, nodes: int, facts: int) -> None:
    """A store of ``nodes`` generated nodes and an empty ``Fact``; ``facts`` random facts between
    them staged as Parquet files beside it (``facts-NNNN.parquet``)."""
    import kuzu

    from localkg.store import schema

    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    connection = kuzu.Connection(kuzu.Database(str(path / "graph.kuzu"), buffer_pool_size=1 << 30))
    for statement in schema.DDL:
        connection.execute(statement)
    copy_nodes(connection, path / "nodes.parquet", nodes)
    (path / "nodes.parquet").unlink()
    connection.execute("CHECKPOINT")
    rng = np.random.default_rng(0)
    for number, low in enumerate(range(0, facts, FILE_ROWS)):
        pq.write_table(fact_rows(rng.integers(0, nodes, (2, min(FILE_ROWS, facts - low)))),
                       path / f"facts-{number:04d}.parquet")


def measure_copy(store: Path, pool_mb: int) -> dict:
    """In this process: open ``store`` with a ``pool_mb`` pool and copy every staged fact file into
    ``Fact`` in one ``COPY``; its seconds and memory growth."""
    import kuzu

    from localkg.store.copying import path_literal

    connection = kuzu.Connection(kuzu.Database(str(store / "graph.kuzu"), buffer_pool_size=pool_mb << 20))
    connection.execute("MATCH (n:Node) RETURN count(*)")
    files = ", ".join(path_literal(path) for path in sorted(store.glob("facts-*.parquet")))
    started = time.perf_counter()
    with PeakSampler() as sampler:
        connection.execute(f"COPY Fact FROM [{files}]")
    seconds = time.perf_counter() - started
    copied = connection.execute("MATCH ()-[f:Fact]->() RETURN count(*)").get_next()[0]
    return {"seconds": round(seconds, 1), "growth_mb": round(sampler.peak - sampler.start), "facts": copied}


def measured_in_fresh_process(store: Path, pool_mb: int, timeout: int) -> dict:
    scratch = store.with_name(store.name + "-scratch")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(store, scratch)
    try:
        done = subprocess.run([sys.executable, __file__, "--measure", str(scratch), str(pool_mb)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "growth_mb": None, "unfinished_after_s": timeout}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode:
        return {"seconds": None, "growth_mb": None, "failed": done.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=4_000_000)
    parser.add_argument("--facts", type=int, default=16_000_000)
    parser.add_argument("--buffer-pool-mb", type=int, nargs="+", default=[2048, 1024, 512],
                        help="pools to copy under; the first (largest) is the reference")
    parser.add_argument("--timeout", type=int, default=900, help="seconds before a copy counts as unfinished")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--measure", nargs=2, metavar=("STORE", "POOL_MB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure_copy(Path(args.measure[0]), int(args.measure[1]))))
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="finalcopy-"))
    store = workdir / "store"
    build_store(store, args.nodes, args.facts)
    runs = [{"buffer_pool_mb": pool, **measured_in_fresh_process(store, pool, args.timeout)}
            for pool in args.buffer_pool_mb]
    reference = runs[0]
    for run in runs:
        if run["seconds"] is not None and reference["seconds"]:
            run["seconds_ratio"] = round(run["seconds"] / reference["seconds"], 2)
            run["growth_ratio"] = round(run["growth_mb"] / max(reference["growth_mb"], 1), 2)
    shutil.rmtree(store)
    print(json.dumps({"nodes": args.nodes, "facts": args.facts, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
