"""How close `localkg load freebase --plan` comes to what the load then does: nodes, facts, flushes
and peak memory, planned against measured.

Why: the plan is what a user reads before a load of hours; its memory line decides whether they
start it on this machine. This script generates Freebase-format dumps with
``../shared/tools/make_dump.py`` (reusing those a ``--workdir`` already holds), plans each with
the buffer pools given (0: the plan's automatic choice, as a user gets it), then runs
``localkg load freebase`` with the same pool in a child process and samples the peak resident
memory of the child and its workers every 0.1 s, and when it peaked (bench/load_dumps.py's
``peak_while_running``). Each load runs alone; run the script alone on the machine.

    python bench/plan_accuracy.py --entities 1250000 5000000 --buffer-pool-mb 0 2048 --workdir /tmp/ld5m

Prints one JSON object: per dump and pool, the plan's nodes, facts, flushes and peak beside the
load's, and the planned peak as a ratio to the measured one (the target is within 25%).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from load_dumps import make_dump, peak_while_running  # bench/ is on the path when run as a script


def measured_load(dump: Path, db: Path, pool_mb: int) -> dict:
    """``localkg load freebase`` in a child process: its report, seconds and peak tree RSS."""
    shutil.rmtree(db, ignore_errors=True)
    command = [sys.executable, "-m", "localkg", "load", "freebase", str(dump), "--db", str(db), "--json", "--quiet"]
    command += ["--buffer-pool-mb", str(pool_mb)] if pool_mb else []
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    peak_kib, peak_at = peak_while_running(process)
    seconds = time.perf_counter() - started
    output = process.stdout.read() if process.stdout else ""
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed with {process.returncode}")
    report = json.loads(output)
    shutil.rmtree(db, ignore_errors=True)
    return {"seconds": round(seconds, 1), "peak_rss_bytes": peak_kib * 1024, "peak_at_seconds": round(peak_at, 1),
            "facts": report["facts_loaded"], "nodes": report["nodes_added"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entities", type=int, nargs="+", default=[1_250_000],
                        help="make_dump.py freebase --entities of each dump (about 9 lines per entity)")
    parser.add_argument("--buffer-pool-mb", type=int, nargs="+", default=[0],
                        help="buffer pools to plan and load with; 0 is the plan's automatic choice")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/plan-accuracy"))
    args = parser.parse_args()

    from localkg.loaders.freebase import freebase_format
    from localkg.loaders.plan import plan_load

    args.workdir.mkdir(parents=True, exist_ok=True)
    runs = []
    for entities in args.entities:
        dump = args.workdir / f"fb-{entities}.nt.gz"
        made = make_dump("freebase", entities, dump)
        for pool_mb in args.buffer_pool_mb:
            plan = plan_load([dump], freebase_format(), pool_mb << 20 if pool_mb else None)
            load = measured_load(dump, args.workdir / "plan-accuracy-db", plan.buffer_pool_bytes >> 20)
            runs.append({
                "entities": entities, "lines": made["lines"], "buffer_pool_mb": plan.buffer_pool_bytes >> 20,
                "pool_reason": plan.pool_reason,
                "planned": {"nodes": plan.nodes, "facts": plan.facts, "flushes": plan.flushes,
                            "peak_rss_bytes": plan.peak_memory_bytes},
                "measured": load,
                "planned_peak_over_measured": round(plan.peak_memory_bytes / load["peak_rss_bytes"], 3)})
            print(json.dumps(runs[-1]), file=sys.stderr)
    print(json.dumps({"runs": runs}, indent=1))


if __name__ == "__main__":
    main()
