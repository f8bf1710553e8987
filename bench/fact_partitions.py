"""What splitting the fact table into partitions would cost the reasoners' traversals.

Why: a Kùzu 0.11.3 ``COPY`` into a relationship table that already holds rows takes about
130 bytes per node of its node table outside the buffer pool (``bench/copy_rel_memory.py``),
so a dump load's peak grows with the store. The one workaround found is to copy each flush
into a relationship table of its own, empty when copied ("partitions", all read together),
which makes every traversal read every partition. This script measures that price: it builds
a store of generated nodes with the same facts held in one ``Fact`` table (the reference, as
now) and split over K tables of the same shape, and times the traversals ``KG`` runs (a
node's outgoing facts, its facts in both directions, its relations counted, two-hop
neighbours, ``KG.paths``' search for paths of up to three facts to another random node) from
the same random nodes, each query with the partitions named in its pattern
(``-[f:Fact_0|Fact_1|...]->``).

    python bench/fact_partitions.py --nodes 2000000 --facts 4000000 --partitions 1 4 16 64

Prints one JSON object: per partition count, each query's median milliseconds and its ratio
to the one-table store measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from copy_rel_memory import BUILD_STEP, copy_nodes, fact_rows, node_ids  # bench/ is on the path when run as a script

QUERIES = {
    "outgoing": "MATCH (a:Node {id: $id})-[f:FACTS]->(b:Node) RETURN f.rel, b.id, b.name",
    "both_directions": "MATCH (a:Node {id: $id})-[f:FACTS]-(b:Node) RETURN f.rel, b.id, b.name",
    "relations_counted": "MATCH (a:Node {id: $id})-[f:FACTS]->() RETURN f.rel, count(*)",
    "two_hops": "MATCH (a:Node {id: $id})-[:FACTS]->(b:Node)-[f:FACTS]->(c:Node) RETURN count(*)",
    "paths_up_to_3": "MATCH p = (a:Node {id: $id})-[f:FACTS* ACYCLIC 1..3 (r, n | WHERE NOT n.hub)]-"
                     "(b:Node {id: $target}) RETURN rels(p), nodes(p) ORDER BY length(p) LIMIT 50",
}


def build_store(path: Path, nodes: int, facts: int, partitions: int) -> list[str]:
    """Nodes with the real schema, and ``facts`` random facts spread over ``partitions`` tables."""
    import kuzu

    from localkg.store import schema

    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    connection = kuzu.Connection(kuzu.Database(str(path / "graph.kuzu"), buffer_pool_size=1 << 30))
    connection.execute(next(ddl for ddl in schema.DDL if ddl.startswith("CREATE NODE TABLE Node")))
    tables = [f"Fact_{number}" for number in range(partitions)]
    for table in tables:
        connection.execute(f"CREATE REL TABLE {table}(FROM Node TO Node, rel STRING)")
    staged = path / "staged.parquet"
    copy_nodes(connection, staged, nodes)
    rng = np.random.default_rng(0)
    ends = rng.integers(0, nodes, (2, facts))
    owner = rng.integers(0, partitions, facts)  # a fact lands in the partition of the flush that copied it
    for number, table in enumerate(tables):
        mine = np.flatnonzero(owner == number)
        for low in range(0, len(mine), BUILD_STEP):
            pq.write_table(fact_rows(ends[:, mine[low:low + BUILD_STEP]]), staged)
            connection.execute(f"COPY {table} FROM '{staged}'")
    staged.unlink()
    connection.execute("CHECKPOINT")
    return tables


def time_queries(path: Path, tables: list[str], probes: list[str]) -> dict[str, float]:
    """Median milliseconds of each query over the probe nodes (after one warm-up pass)."""
    import kuzu

    connection = kuzu.Connection(kuzu.Database(str(path / "graph.kuzu"), buffer_pool_size=1 << 30))
    medians = {}
    for name, template in QUERIES.items():
        query = template.replace("FACTS", "|".join(tables))
        parameters = [{"id": node, "target": target} if "$target" in query else {"id": node}
                      for node, target in zip(probes, probes[1:] + probes[:1])]
        for values in parameters[:20]:
            connection.execute(query, values).get_all()
        seconds = []
        for values in parameters:
            started = time.perf_counter()
            connection.execute(query, values).get_all()
            seconds.append(time.perf_counter() - started)
        medians[name] = round(statistics.median(seconds) * 1000, 2)
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--facts", type=int, default=4_000_000)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="factparts-"))
    probes = node_ids(np.random.default_rng(1).integers(0, args.nodes, args.probes)).to_pylist()
    runs = []
    for partitions in sorted(set(args.partitions) | {1}):
        store = workdir / f"store-{partitions}"
        tables = build_store(store, args.nodes, args.facts, partitions)
        runs.append({"partitions": partitions, "median_ms": time_queries(store, tables, probes)})
        shutil.rmtree(store)
    reference = runs[0]["median_ms"]
    for run in runs:
        run["ratio_to_one_table"] = {name: round(ms / max(reference[name], 1e-9), 2)
                                     for name, ms in run["median_ms"].items()}
    print(json.dumps({"nodes": args.nodes, "facts": args.facts, "probes": args.probes, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
