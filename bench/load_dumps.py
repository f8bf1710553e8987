"""Dump loading speed and memory: `localkg load freebase` against pyoxigraph's bulk loader.

Generates Freebase-format dumps with ``../shared/tools/make_dump.py`` and loads the same file
(a) with localkg (streaming, worker processes, Kùzu) and (b) with pyoxigraph's
``Store.bulk_load`` (RocksDB), both ending in a queryable on-disk store. Each load runs in its own
child process; peak RSS is the largest sum of resident memory over the child and its worker
processes, sampled from /proc every 0.1 s. The localkg measured is the one installed (``pip install .``
first, to measure a checkout). Also measures localkg on a file 4x smaller, for the
RSS growth check (peak RSS must not grow with dump size), and a Wikidata JSON dump.

    python bench/load_dumps.py --lines 2000000 --growth-from 500000 --wikidata-entities 20000 --repeat 3

Prints one JSON object: triples/s for both loaders on the big file (the median of ``--repeat``
alternating runs), their ratio (localkg / pyoxigraph; target >= 1.0; also per pair of runs), peak RSS of each run (target <= 3 GB) and the RSS growth
from the small to the big file (target <= 20%). Beside them, two limits of localkg's load on the
big file: the bare parse (the Freebase format's own parser in the same worker processes, results
discarded) and Kùzu's bare ``COPY`` of what the load stored (every table's rows exported to
Parquet, then copied into an empty store of the same schema, the export not timed).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAKE_DUMP = REPO.parent / "shared" / "tools" / "make_dump.py"
LINES_PER_ENTITY = 9.0  # make_dump.py freebase writes about 9 lines per entity


def tree_rss_kib(root: int) -> int:
    """Resident memory of ``root`` and all its descendants, in KiB."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/statm") as handle:
                pages = int(handle.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        pid, parent = int(entry), int(fields[1])
        children.setdefault(parent, []).append(pid)
        rss[pid] = pages * os.sysconf("SC_PAGE_SIZE") // 1024
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def peak_while_running(process: subprocess.Popen) -> tuple[int, float]:
    """Wait for ``process``, sampling its tree RSS every 0.1 s: the peak in KiB, and the seconds
    after this call began at which it came."""
    started = time.perf_counter()
    peak, peak_at = 0, 0.0
    while process.poll() is None:
        resident = tree_rss_kib(process.pid)
        if resident > peak:
            peak, peak_at = resident, time.perf_counter() - started
        time.sleep(0.1)
    return peak, peak_at


def run_child(args: list[str]) -> dict:
    """Run this script as a child doing one load; return its JSON plus peak tree RSS."""
    process = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)
    peak, _ = peak_while_running(process)
    output = process.stdout.read() if process.stdout else ""
    if process.returncode != 0:
        raise SystemExit(f"child {args} failed with {process.returncode}")
    result = json.loads(output.strip().splitlines()[-1])
    result["peak_rss_mb"] = round(peak / 1024, 1)
    return result


def make_dump(kind: str, entities: int, out: Path) -> dict:
    """Generate a dump, or reuse the one an earlier run made in the same ``--workdir`` with the same
    arguments (make_dump.py is deterministic; generating 8M lines takes minutes)."""
    made = out.with_name(out.name + ".made.json")
    arguments = [kind, "--entities", str(entities)]
    if out.exists() and made.exists():
        record = json.loads(made.read_text())
        if record["arguments"] == arguments:
            return record["result"]
    done = subprocess.run([sys.executable, str(MAKE_DUMP), *arguments, "--out", str(out)],
                          check=True, capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    made.write_text(json.dumps({"arguments": arguments, "result": result}))
    return result


# ---------------------------------------------------------------- children
def child_localkg(kind: str, path: str, db: str, workers: int | None, pool_mb: int) -> dict:
    """``localkg load KIND PATH --db DB`` as a user runs it (the command's own defaults: buffer pool,
    malloc arenas), in this process; then the store's counts, outside the timing."""
    from localkg.cli import main as localkg_cli
    from localkg.store import KG

    command = ["load", kind, path, "--db", db, "--quiet", "--json"]
    command += [] if workers is None else ["--workers", str(workers)]
    command += ["--buffer-pool-mb", str(pool_mb)] if pool_mb else []
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        localkg_cli(command, standalone_mode=False)
    seconds = time.perf_counter() - started
    report = json.loads(printed.getvalue())
    with KG.open(db, read_only=True) as kg:
        stats = kg.stats()
    return {"seconds": round(seconds, 2), "lines": report["lines_read"], "facts": stats.facts, "nodes": stats.nodes,
            "items": report["details"].get("items", 0), "db_mb": round(_size(Path(db)) / 2**20, 1)}


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def child_oxigraph(path: str, db: str) -> dict:
    import gzip

    import pyoxigraph

    started = time.perf_counter()
    store = pyoxigraph.Store(db)
    with gzip.open(path, "rb") as handle:
        store.bulk_load(input=handle, format=pyoxigraph.RdfFormat.N_TRIPLES)
    store.flush()
    seconds = time.perf_counter() - started
    count = len(store)
    return {"seconds": round(seconds, 2), "triples": count}


def child_parse(path: str, workers: str) -> dict:
    """The load's parser alone: every chunk of ``path`` parsed by the Freebase format in the load's
    worker processes (as many as the load uses) and thrown away."""
    from localkg.loaders.checkpoint import Position
    from localkg.loaders.freebase import freebase_format
    from localkg.loaders.parallel import CHUNK_BYTES, default_workers, iter_chunks, parse_in_order

    fmt = freebase_format()
    started = time.perf_counter()
    lines = 0
    for _, result in parse_in_order(fmt, iter_chunks([Path(path)], Position(), CHUNK_BYTES, fmt.cut),
                                    default_workers() if workers == "all" else int(workers)):
        lines += result.lines
    return {"seconds": round(time.perf_counter() - started, 2), "lines": lines}


EXPORTS = {  # table: the query that exports its rows in the table's column order (a COPY's input)
    "Node": "MATCH (n:Node) RETURN n.id, n.name, n.kind, n.aliases, n.description, n.types, n.value, n.datatype, "
            "n.lang, n.hub, n.seq",
    "Relation": "MATCH (r:Relation) RETURN r.id, r.label, r.description, r.facts",
    "Label": "MATCH (l:Label) RETURN l.id",
    "Names": "MATCH (l:Label)-[x:Names]->(n:Node) RETURN l.id, n.id, x.how",
    "Fact": "MATCH (a:Node)-[f:Fact]->(b:Node) RETURN a.id, b.id, f.rel",
    "HasRel": "MATCH (n:Node)-[s:HasRel]->(r:Relation) RETURN n.id, r.id, s.dir, s.n",
}


def child_kuzu_copy(db: str, scratch: str) -> dict:
    """Kùzu's bare ``COPY`` of every row the load stored in ``db``: exported to Parquet under
    ``scratch`` (not timed), then copied, a table at a time, into an empty store of the same schema."""
    import kuzu

    from localkg.store import schema
    from localkg.store.copying import path_literal

    scratch_path = Path(scratch)
    shutil.rmtree(scratch_path, ignore_errors=True)
    scratch_path.mkdir(parents=True)
    source = kuzu.Connection(kuzu.Database(str(Path(db) / schema.GRAPH_FILE), read_only=True))
    for table, query in EXPORTS.items():
        source.execute(f"COPY ({query}) TO {path_literal(scratch_path / f'{table}.parquet')}")
    del source
    target = kuzu.Connection(kuzu.Database(str(scratch_path / "copy.kuzu")))
    for statement in schema.DDL:
        target.execute(statement)
    started = time.perf_counter()
    for table in EXPORTS:
        target.execute(f"COPY {table} FROM {path_literal(scratch_path / f'{table}.parquet')}")
    seconds = time.perf_counter() - started
    shutil.rmtree(scratch_path)
    return {"seconds": round(seconds, 2)}


def _median_run(runs: list[dict]) -> dict:
    """The run of median seconds (the slower middle one of an even count), with every run's
    seconds and the highest peak RSS of all."""
    middle = sorted(runs, key=lambda run: run["seconds"])[len(runs) // 2]
    return {**middle, "seconds_of_each_run": [run["seconds"] for run in runs],
            "peak_rss_mb": max(run["peak_rss_mb"] for run in runs)}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        _, _, which, *rest = sys.argv
        if which == "oxigraph":
            print(json.dumps(child_oxigraph(*rest)))
        elif which == "parse":
            print(json.dumps(child_parse(*rest)))
        elif which == "kuzu-copy":
            print(json.dumps(child_kuzu_copy(*rest)))
        else:
            kind, path, db, workers, pool_mb = rest
            print(json.dumps(child_localkg(kind, path, db, None if workers == "all" else int(workers),
                                           int(pool_mb))))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=2_000_000, help="Freebase dump size for the comparison.")
    parser.add_argument("--growth-from", type=int, default=500_000,
                        help="Smaller dump (lines) whose peak RSS the big one is compared with.")
    parser.add_argument("--wikidata-entities", type=int, default=20_000)
    parser.add_argument("--workers", default="all", help="localkg parser processes (default: all cores).")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--buffer-pool-mb", type=int, default=0,
                        help="Kùzu buffer pool of the localkg loads (default: the load command's, 1 GiB).")
    parser.add_argument("--repeat", type=int, default=1,
                        help="Load the big file this many times with each loader, alternating, and report the "
                             "median run (single runs vary by a fifth on a shared machine).")
    parser.add_argument("--growth-only", action="store_true",
                        help="Only the two localkg Freebase loads of the RSS growth check.")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="localkg-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    result: dict = {"cpu_count": os.cpu_count(), "load_average_at_start": os.getloadavg()[0]}
    big, small = workdir / "fb-big.nt.gz", workdir / "fb-small.nt.gz"
    result["freebase_big_dump"] = make_dump("freebase", int(args.lines / LINES_PER_ENTITY), big)
    result["freebase_small_dump"] = make_dump("freebase", int(args.growth_from / LINES_PER_ENTITY), small)
    wikidata = workdir / "wd.json.gz"
    if not args.growth_only:
        result["wikidata_dump"] = make_dump("wikidata", args.wikidata_entities, wikidata)
    for name in ("oxigraph-db", "localkg-big", "localkg-small", "localkg-wd"):
        shutil.rmtree(workdir / name, ignore_errors=True)

    pool = str(args.buffer_pool_mb)
    smaller = run_child(["_child", "localkg", "freebase", str(small), str(workdir / "localkg-small"), args.workers,
                         pool])
    localkg_runs, oxigraph_runs = [], []
    for _ in range(max(1, args.repeat)):  # alternating, so drift in the machine's load hits both alike
        shutil.rmtree(workdir / "localkg-big", ignore_errors=True)
        localkg_runs.append(run_child(["_child", "localkg", "freebase", str(big), str(workdir / "localkg-big"),
                                       args.workers, pool]))
        if not args.growth_only:
            shutil.rmtree(workdir / "oxigraph-db", ignore_errors=True)
            oxigraph_runs.append(run_child(["_child", "oxigraph", str(big), str(workdir / "oxigraph-db")]))
    localkg = _median_run(localkg_runs)
    lines = result["freebase_big_dump"]["lines"]
    result["rss_growth"] = {
        "small_lines": result["freebase_small_dump"]["lines"], "small_peak_rss_mb": smaller["peak_rss_mb"],
        "big_lines": lines, "big_peak_rss_mb": localkg["peak_rss_mb"],
        "growth": round(localkg["peak_rss_mb"] / smaller["peak_rss_mb"] - 1, 3),
        "small_triples_per_s": round(result["freebase_small_dump"]["lines"] / smaller["seconds"]),
        "big_triples_per_s": round(lines / localkg["seconds"]),
    }
    if args.growth_only:
        print(json.dumps(result, indent=2))
        return
    oxigraph = _median_run(oxigraph_runs)
    oxigraph["db_mb"] = round(_size(workdir / "oxigraph-db") / 2**20, 1)
    wd = run_child(["_child", "localkg", "wikidata", str(wikidata), str(workdir / "localkg-wd"), args.workers, pool])
    result["freebase"] = {
        "input_triples": lines,
        "localkg": {**localkg, "triples_per_s": round(lines / localkg["seconds"])},
        "pyoxigraph": {**oxigraph, "triples_per_s": round(lines / oxigraph["seconds"])},
        "ratio_localkg_over_pyoxigraph": round(oxigraph["seconds"] / localkg["seconds"], 3),
        "ratio_of_each_pair": [round(o["seconds"] / k["seconds"], 3) for k, o in zip(localkg_runs, oxigraph_runs)],
    }
    parse = run_child(["_child", "parse", str(big), args.workers])
    copy = run_child(["_child", "kuzu-copy", str(workdir / "localkg-big"), str(workdir / "kuzu-copy")])
    result["freebase"]["limits"] = {
        "bare_parse": {**parse, "triples_per_s": round(lines / parse["seconds"])},
        "kuzu_bare_copy": {**copy, "triples_per_s": round(lines / copy["seconds"])},
        "ratio_localkg_over_bare_parse": round(parse["seconds"] / localkg["seconds"], 3),
        "ratio_localkg_over_kuzu_bare_copy": round(copy["seconds"] / localkg["seconds"], 3),
        "ratio_kuzu_bare_copy_over_pyoxigraph": round(oxigraph["seconds"] / copy["seconds"], 3),
    }
    result["wikidata"] = {**wd, "entities_per_s": round(wd["items"] / wd["seconds"], 1)}
    result["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
