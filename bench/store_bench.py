"""Store benchmark: load speed and query-primitive latency on FB15k-237 and a 1M-edge hub graph.

Prints one JSON object. Each measurement comes with a reference measured in
the same run, so the ratios mean something on any machine:

* load: triples/s of ``load_triples`` against three references on the same triples and names:
  the bare parse of the file (reading and splitting lines, the floor any loader pays),
  pyoxigraph's ``Store.bulk_load`` of them as N-Triples (the load speed to beat), and Kùzu's
  bare ``COPY`` of them into the store's schema from ready Parquet files (the floor of the
  writer's database work);
* ``relations(hub)``: the per-node summary against counting the hub's edges
  with a plain Cypher scan (what listing relations would cost without it);
* ``paths``: the primitive against Kùzu's own variable-length match.

Usage::

    python bench/store_bench.py --work /tmp/localkg-bench [--shared ../shared]

The hub graph is ``make_dump.py freebase --entities 50000 --hub-edges 1000000``,
converted to id triples (entity-to-entity facts; names from type.object.name)
and loaded with ``load_triples``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from localkg.loaders.triples import load_triples
from localkg.store import KG

NS = "<http://rdf.freebase.com/ns/"
DROPPED = ("type.object.type", "type.object.key", "type.type.instance", "common.notable_for", "common.topic",
           "kg.object_profile", "type.object.name")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed(fn, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def summary_ms(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(samples), 3), "p95_ms": round(percentile(samples, 0.95), 3),
            "n": len(samples)}


def parse_floor(path: Path) -> float:
    """Seconds to read and split every line: the floor for any loader."""
    started = time.perf_counter()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line.rstrip("\n").split("\t")
    return time.perf_counter() - started


def fb15k_rows(source: Path, names: Path) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """The FB15k-237 training triples and entity names, as read from their files."""
    with open(source, encoding="utf-8") as handle:
        triples = [tuple(line.rstrip("\n").split("\t")) for line in handle]
    with open(names, encoding="utf-8") as handle:
        named = dict(line.rstrip("\n").split("\t", 1) for line in handle)
    return triples, named


def oxigraph_reference(triples: list[tuple[str, str, str]], names: dict[str, str], work: Path) -> dict:
    """pyoxigraph's bulk load of the same triples and names as N-Triples (the text made beforehand,
    not timed), into an on-disk store."""
    import pyoxigraph

    def iri(freebase_id: str) -> str:
        return f"{NS}{freebase_id.strip('/').replace('/', '.')}>"

    def literal(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"@en'

    lines = [f"{iri(s)} {iri(p)} {iri(o)} .\n" for s, p, o in triples]
    lines += [f"{iri(e)} {NS}type.object.name> {literal(name)} .\n" for e, name in names.items()]
    text = "".join(lines).encode()
    db = work / "fb15k-oxigraph"
    subprocess.run(["rm", "-rf", str(db)], check=True)
    started = time.perf_counter()
    store = pyoxigraph.Store(str(db))
    store.bulk_load(input=text, format=pyoxigraph.RdfFormat.N_TRIPLES)
    store.flush()
    seconds = time.perf_counter() - started
    return {"quads": len(store), "seconds": round(seconds, 2)}


def kuzu_copy_reference(triples: list[tuple[str, str, str]], names: dict[str, str], work: Path) -> dict:
    """Kùzu's bare ``COPY`` of the same nodes (with names) and facts into the store's schema, from
    Parquet files written beforehand (not timed): what the writer's database work cannot beat."""
    import kuzu
    import pyarrow as pa
    import pyarrow.parquet as pq

    from localkg.store import schema
    from localkg.store.copying import path_literal

    ids = sorted({s for s, _, _ in triples} | {o for _, _, o in triples})
    pq.write_table(pa.table({"id": ids, "name": [names.get(i, "") for i in ids], "seq": range(len(ids))}),
                   work / "copy-nodes.parquet")
    pq.write_table(pa.table({"from": [s for s, _, _ in triples], "to": [o for _, _, o in triples],
                             "rel": [p for _, p, _ in triples]}), work / "copy-facts.parquet")
    db = work / "fb15k-copy"
    subprocess.run(["rm", "-rf", str(db)], check=True)
    db.mkdir()
    connection = kuzu.Connection(kuzu.Database(str(db / "graph.kuzu")))
    for statement in schema.DDL:
        connection.execute(statement)
    started = time.perf_counter()
    connection.execute(f"COPY Node(id, name, seq) FROM {path_literal(work / 'copy-nodes.parquet')}")
    connection.execute(f"COPY Fact FROM {path_literal(work / 'copy-facts.parquet')}")
    seconds = time.perf_counter() - started
    return {"nodes": len(ids), "facts": len(triples), "seconds": round(seconds, 2)}


def bench_fb15k(work: Path, shared: Path) -> dict:
    source = shared / "fb15k237" / "train.txt"
    db = work / "fb15k-db"
    subprocess.run(["rm", "-rf", str(db)], check=True)
    with KG.create(db) as kg:
        started = time.perf_counter()
        summary = load_triples(kg, [source], names=shared / "fb15k237" / "entity2text.txt", progress=False)
        seconds = time.perf_counter() - started
        floor = parse_floor(source)
        entities = [n.id for batch in kg.iter_nodes(batch=20_000) for n in batch]
        rng = random.Random(0)
        picks = [rng.choice(entities) for _ in range(200)]
        pairs = [(e, kg.relations(e)[0]) for e in picks]
        neighbors = timed(_cycle(lambda e_r: kg.neighbors(e_r[0], e_r[1].relation, e_r[1].direction), pairs),
                          len(pairs))
        relations = timed(_cycle(lambda e: kg.relations(e), picks), len(picks))
    triples, names = fb15k_rows(source, shared / "fb15k237" / "entity2text.txt")
    oxigraph = oxigraph_reference(triples, names, work)
    copy = kuzu_copy_reference(triples, names, work)
    return {
        "triples": summary.facts_loaded, "load_seconds": round(seconds, 2),
        "load_triples_per_s": round(summary.facts_loaded / seconds), "parse_floor_triples_per_s": round(summary.lines_read / floor),
        "load_vs_parse_floor": round((summary.facts_loaded / seconds) / (summary.lines_read / floor), 4),
        "pyoxigraph_bulk_load": oxigraph, "load_vs_pyoxigraph": round(oxigraph["seconds"] / seconds, 3),
        "kuzu_bare_copy": copy, "load_vs_kuzu_bare_copy": round(copy["seconds"] / seconds, 3),
        "relations": summary_ms(relations), "neighbors": summary_ms(neighbors),
    }


def _cycle(fn, items):
    iterator = iter(items)
    return lambda: fn(next(iterator))


def make_hub_triples(work: Path, shared: Path, entities: int, hub_edges: int) -> tuple[Path, Path]:
    dump = work / f"hub-{entities}-{hub_edges}.nt.gz"
    if not dump.exists():
        subprocess.run([sys.executable, str(shared / "tools" / "make_dump.py"), "freebase", "--entities", str(entities),
                        "--hub-edges", str(hub_edges), "--out", str(dump)], check=True, stdout=subprocess.DEVNULL)
    triples, names = work / "hub-triples.tsv", work / "hub-names.tsv"
    with gzip.open(dump, "rt", encoding="utf-8") as source, open(triples, "w", encoding="utf-8") as out, \
            open(names, "w", encoding="utf-8") as name_out:
        for line in source:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4 or not parts[0].startswith(NS + "m.") or not parts[1].startswith(NS):
                continue
            predicate = parts[1][len(NS):-1]
            if predicate == "type.object.name" and parts[2].endswith('"@en'):
                name_out.write(f"{parts[0][len(NS):-1]}\t{parts[2][1:-4]}\n")
            if parts[2].startswith(NS + "m.") and not predicate.startswith(DROPPED):
                out.write(f"{parts[0][len(NS):-1]}\t{predicate}\t{parts[2][len(NS):-1]}\n")
    return triples, names


def bench_hub(work: Path, shared: Path, entities: int, hub_edges: int) -> dict:
    triples, names = make_hub_triples(work, shared, entities, hub_edges)
    db = work / "hub-db"
    subprocess.run(["rm", "-rf", str(db)], check=True)
    with KG.create(db) as kg:
        started = time.perf_counter()
        summary = load_triples(kg, [triples], names=names, progress=False)
        seconds = time.perf_counter() - started
        hub = "m.00"
        hub_degree = sum(r.count for r in kg.relations(hub))
        relations = timed(lambda: kg.relations(hub, "both"), 50)
        scan = timed(lambda: kg.execute("MATCH (n:Node {id: $id})-[f:Fact]-() RETURN f.rel, count(*)",
                                        {"id": hub}).get_all(), 5)
        rng = random.Random(0)
        named = [n.id for batch in kg.iter_nodes(batch=50_000) for n in batch if n.name][:60_000]
        sources = [e for e in (rng.choice(named) for _ in range(400)) if e != hub][:200]
        firsts = [(e, kg.relations(e)) for e in sources]
        firsts = [(e, rels[0]) for e, rels in firsts if rels]
        neighbors = timed(_cycle(lambda e_r: kg.neighbors(e_r[0], e_r[1].relation, e_r[1].direction), firsts),
                          len(firsts))
        hub_neighbors = timed(lambda: kg.neighbors(hub, "location.location.containedby", "in", limit=100), 50)
        pairs = []
        for source in sources:
            target = _walk(kg, source, rng.randint(2, 3), rng, avoid=hub)
            if target and target != source:
                pairs.append((source, target))
            if len(pairs) == 50:
                break
        paths = timed(_cycle(lambda p: kg.paths(p[0], p[1], max_hops=3, limit=100), pairs), len(pairs))
        found = sum(1 for a, b in pairs if kg.paths(a, b, max_hops=3, limit=1))
    return {
        "facts": summary.facts_loaded, "hub_degree": hub_degree, "load_seconds": round(seconds, 2),
        "load_triples_per_s": round(summary.facts_loaded / seconds),
        "relations_hub_both": summary_ms(relations), "relations_hub_edge_scan": summary_ms(scan),
        "relations_speedup_vs_scan": round(statistics.median(scan) / statistics.median(relations), 1),
        "neighbors": summary_ms(neighbors), "neighbors_hub_limit_100": summary_ms(hub_neighbors),
        "paths_3_hops": summary_ms(paths), "paths_pairs_connected": f"{found}/{len(pairs)}",
    }


def _walk(kg: KG, start: str, length: int, rng: random.Random, avoid: str) -> str | None:
    here = start
    for _ in range(length):
        moves = [t for t in kg.triples(here, limit=50) if avoid not in (t.head.id, t.tail.id)]
        if not moves:
            return None
        step = rng.choice(moves)
        here = step.tail.id if step.head.id == here else step.head.id
    return here


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/localkg-bench"))
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared")
    parser.add_argument("--entities", type=int, default=50_000)
    parser.add_argument("--hub-edges", type=int, default=1_000_000)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    result = {"fb15k237": bench_fb15k(args.work, args.shared / "data"),
              "hub": bench_hub(args.work, args.shared, args.entities, args.hub_edges)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
