"""Loads with the summary tables (``HasRel``, ``Names``) stored forward only, against both directions.

Kùzu stores a rel table's backward adjacency too; ``HasRel``'s is keyed by the
few ``Relation`` nodes, so each load batch's commit rewrote it whole. The
shipped schema stores ``HasRel`` and ``Names`` forward only. This loads the same
generated Freebase dump with the shipped schema and, as the reference in the
same run, with both directions, alternately ``--repeat`` times, each load in
its own child process (one parser process and the writer, 256 MiB pool), and
reports seconds, the writer's peak RSS and the database's size on disk. It
then times committing 1,000 summary rows into each finished database. Prints
one JSON object. Usage::

    python bench/summary_direction.py [--lines 2000000] [--repeat 2] [--work DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from load_dumps import LINES_PER_ENTITY, REPO, make_dump

FORWARD_ONLY = " WITH (storage_direction = 'fwd')"


def child_load(variant: str, dump: str, db: str) -> dict:
    """Load ``dump`` into ``db`` with the shipped schema (``fwd``) or with both directions, in
    this process; then commit 1,000 summary rows into it."""
    from localkg.store import schema

    if variant == "both":
        schema.DDL = tuple(statement.replace(FORWARD_ONLY, "") for statement in schema.DDL)
    import pyarrow as pa
    import pyarrow.parquet as pq

    from localkg.loaders.freebase import load_freebase
    from localkg.store import KG

    started = time.perf_counter()
    with KG.create(db, buffer_pool_bytes=256 << 20) as kg:
        report = load_freebase(kg, [dump], workers=1, progress=False)
        seconds = time.perf_counter() - started
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        ids = [row[0] for row in kg.execute("MATCH (n:Node) RETURN n.id LIMIT 1000").get_all()]
        relation = kg.execute("MATCH (r:Relation) RETURN r.id LIMIT 1").get_all()[0][0]
        rows = Path(db) / "bench-hasrel.parquet"
        pq.write_table(pa.table({"from": ids, "to": [relation] * len(ids), "dir": ["out"] * len(ids),
                                 "n": [1] * len(ids)}), rows)
        connection = kg._connection
        connection.execute("BEGIN TRANSACTION")
        connection.execute(f"COPY HasRel FROM '{rows}'")
        committing = time.perf_counter()
        connection.execute("COMMIT")
        commit = time.perf_counter() - committing
    disk = sum(path.stat().st_size for path in Path(db).rglob("*") if path.is_file())
    return {"seconds": round(seconds, 1), "writer_peak_rss_mb": rss >> 20, "disk_mb": disk >> 20,
            "facts": report.facts_loaded, "commit_1000_summary_rows_s": round(commit, 3)}


def run_variant(variant: str, dump: Path, work: Path) -> dict:
    db = work / f"db-{variant}"
    shutil.rmtree(db, ignore_errors=True)
    done = subprocess.run([sys.executable, __file__, "_child", variant, str(dump), str(db)], capture_output=True,
                          text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    shutil.rmtree(db, ignore_errors=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        print(json.dumps(child_load(*sys.argv[2:5])))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(dir=args.work))
    try:
        dump = work / "fb.nt.gz"
        make_dump("freebase", int(args.lines / LINES_PER_ENTITY), dump)
        runs: dict[str, list[dict]] = {"forward_only": [], "both_directions_reference": []}
        for _ in range(args.repeat):
            runs["both_directions_reference"].append(run_variant("both", dump, work))
            runs["forward_only"].append(run_variant("fwd", dump, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best = {name: min(results, key=lambda r: r["seconds"]) for name, results in runs.items()}
    ratio = lambda key: round(best["forward_only"][key] / best["both_directions_reference"][key], 3)  # noqa: E731
    print(json.dumps({"lines": args.lines, "runs": runs, "ratios_forward_over_both (best runs)": {
        key: ratio(key) for key in ("seconds", "writer_peak_rss_mb", "disk_mb", "commit_1000_summary_rows_s")}},
        indent=2))


if __name__ == "__main__":
    main()
