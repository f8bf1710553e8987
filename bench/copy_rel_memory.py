"""What a ``COPY`` into Kùzu's fact table costs in memory, against the nodes the store holds.

Why: a dump load's peak memory grows with the dump (docs/benchmarks.md, "Dump loading") and the
growth sits in each flush's ``COPY Fact``. This script isolates it from the loader: it builds
stores of generated nodes with the real schema (``localkg.store.schema.DDL``), with facts in
``Fact`` and an empty second fact table ``FactEmpty`` of the same shape, and then, in a fresh
process per measurement, copies the same 1,000 facts into ``Fact`` (a table that holds facts)
and, as the reference measured in the same run, into ``FactEmpty``. Each measurement samples the
process's resident memory every 20 ms during the ``COPY`` and reports its growth. A third copy,
of 1M new nodes into ``Node``, shows what the node copies of a flush cost on the same store:
with ``--buffer-pool-mb`` below the store's size, whether a cost is held within Kùzu's buffer
pool (it stops growing at the pool's size) or outside it (it goes on growing with the store).

    python bench/copy_rel_memory.py --nodes 1000000 2000000 4000000 --workdir /tmp/copyrel
    python bench/copy_rel_memory.py --nodes 4000000 16000000 --buffer-pool-mb 256 --workdir /tmp/copyrel

Prints one JSON object: per store size, the growth of each copy, the growth per stored node,
and the ratio of the two fact copies' growth.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from flush_memory import PeakSampler  # bench/ is on the path when run as a script

COPIED_FACTS = 1_000
COPIED_NODES = 1_000_000
BUILD_STEP = 1_000_000


def node_ids(numbers: Iterable[int]) -> pa.Array:
    return pa.array([f"m.{number:09d}" for number in numbers])


def node_rows(low: int, high: int) -> pa.Table:
    """Generated nodes ``[low, high)``, numbered as the writer numbers them."""
    return pa.table({"id": node_ids(range(low, high)), "seq": pa.array(np.arange(low, high))})


def fact_rows(ends: np.ndarray, relations: list[str] | None = None) -> pa.Table:
    """Facts from ``ends[0]`` to ``ends[1]`` (node numbers), with ``relations`` or one of 500
    relations chosen by the head."""
    return pa.table({"from": node_ids(ends[0]), "to": node_ids(ends[1]),
                     "rel": pa.array(relations or [f"domain.type.relation_{n % 500}" for n in ends[0]])})


def copy_nodes(connection: Any, staged: Path, nodes: int) -> None:
    """Copy ``nodes`` generated nodes into ``Node``, a million at a time, through ``staged``."""
    for low in range(0, nodes, BUILD_STEP):
        pq.write_table(node_rows(low, min(nodes, low + BUILD_STEP)), staged)
        connection.execute(f"COPY Node(id, seq) FROM '{staged}'")


def build_store(path: Path, nodes: int, facts_per_node: float) -> None:
    """A store of ``nodes`` nodes and random facts between them in ``Fact``; ``FactEmpty`` empty."""
    import kuzu

    from localkg.store import schema

    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    connection = kuzu.Connection(kuzu.Database(str(path / "graph.kuzu"), buffer_pool_size=1 << 30))
    for statement in schema.DDL:
        connection.execute(statement)
    connection.execute("CREATE REL TABLE FactEmpty(FROM Node TO Node, rel STRING)")
    rng = np.random.default_rng(0)
    staged = path / "staged.parquet"
    copy_nodes(connection, staged, nodes)
    facts = int(nodes * facts_per_node)
    for low in range(0, facts, BUILD_STEP):
        pq.write_table(fact_rows(rng.integers(0, nodes, (2, min(BUILD_STEP, facts - low)))), staged)
        connection.execute(f"COPY Fact FROM '{staged}'")
    pq.write_table(fact_rows(rng.integers(0, nodes, (2, COPIED_FACTS)), ["domain.type.copied"] * COPIED_FACTS),
                   path / "copied.parquet")
    pq.write_table(node_rows(nodes, nodes + COPIED_NODES), path / "copied-nodes.parquet")
    staged.unlink()
    connection.execute("CHECKPOINT")


def measure_copy(path: Path, table: str, pool_mb: int) -> dict:
    """In this process: open the store, copy the 1,000 facts (or, into ``Node``, the 1M new nodes)
    into ``table``; the memory it took.

    Run on a copy of the store, so that every measurement starts from the same files."""
    import kuzu

    connection = kuzu.Connection(kuzu.Database(str(path / "graph.kuzu"), buffer_pool_size=pool_mb << 20))
    connection.execute("MATCH (n:Node) RETURN count(*)")
    copied = path / ("copied-nodes.parquet" if table == "Node" else "copied.parquet")
    with PeakSampler() as sampler:
        connection.execute(f"COPY {table}{'(id, seq)' if table == 'Node' else ''} FROM '{copied}'")
    return {"growth_mb": sampler.peak - sampler.start}


def measured_in_fresh_process(store: Path, table: str, pool_mb: int) -> dict:
    scratch = store.with_name(store.name + "-scratch")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(store, scratch)
    try:
        output = subprocess.run([sys.executable, __file__, "--measure", str(scratch), table, str(pool_mb)],
                                check=True, capture_output=True, text=True).stdout
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return json.loads(output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1_000_000, 2_000_000, 4_000_000])
    parser.add_argument("--facts-per-node", type=float, default=0.5)
    parser.add_argument("--buffer-pool-mb", type=int, default=1024)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--measure", nargs=3, metavar=("STORE", "TABLE", "POOL_MB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure_copy(Path(args.measure[0]), args.measure[1], int(args.measure[2]))))
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="copyrel-"))
    runs = []
    for nodes in args.nodes:
        store = workdir / f"store-{nodes}"
        build_store(store, nodes, args.facts_per_node)
        filled, empty, node_copy = (measured_in_fresh_process(store, table, args.buffer_pool_mb)["growth_mb"]
                                    for table in ("Fact", "FactEmpty", "Node"))
        runs.append({"stored_nodes": nodes, "stored_facts": int(nodes * args.facts_per_node),
                     "copied_facts": COPIED_FACTS, "copy_into_fact_mb": filled, "copy_into_empty_table_mb": empty,
                     "bytes_per_stored_node": round((filled - empty) * (1 << 20) / nodes),
                     "ratio_to_empty_table": round(filled / max(empty, 1), 1),
                     "copy_of_new_nodes_mb": node_copy, "copied_nodes": COPIED_NODES})
        shutil.rmtree(store)
    print(json.dumps({"buffer_pool_mb": args.buffer_pool_mb, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
