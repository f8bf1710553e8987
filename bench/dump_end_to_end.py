"""A Freebase dump end to end: generate, plan, load, index, link, ask; wall time and peak RSS per stage.

Every stage runs as its own process, the way a user runs it (``localkg ...``; linking through
``EntityLinker`` in a child of this script), so its peak RSS is its own: ``ru_maxrss`` from
``wait4``, the largest single process of the stage (a load's parser processes are measured
separately from the writer and are not summed in). Prints one JSON object.

* ``make_dump``: ``make_dump.py freebase --entities N``;
* ``plan``: ``localkg load freebase --plan --json`` (its estimates are kept beside what the load did);
* ``load``: ``localkg load freebase --json`` with the automatic buffer pool;
* ``index_build``: ``localkg index build --json`` (static entity encoder, transformer relations);
* ``link``: ``--questions`` entity names asked marked, and marked but misspelt (last letter doubled),
  recall@1 and p50/p95 latency;
* ``ask``: ``localkg ask`` for ``--ask`` of those questions (bundled LLM), seconds each.

Usage::

    python bench/dump_end_to_end.py --entities 5000000 --work /tmp/localkg-bench/e2e   # the full run
    python bench/dump_end_to_end.py --entities 50000 --work /tmp/localkg-bench/e2e-smoke --ask 1
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"


def run_stage(command: list[str]) -> tuple[dict, str]:
    """Run ``command``; its wall seconds and peak RSS (MB, from ``wait4``), and its stdout."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    if child.returncode != 0:
        raise SystemExit(f"stage failed ({' '.join(command[:4])} ...): {stderr.strip().splitlines()[-3:]}")
    return {"wall_s": round(seconds, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024)}, stdout


def link_stage(db: Path, questions: int, out: Path) -> None:
    """(In a child process.) Link marked and misspelt names of random entities; write the result to ``out``."""
    import localkg  # noqa: F401
    from localkg.indexes.linking import EntityLinker
    from localkg.store import KG

    with KG.open(db, read_only=True) as kg:
        entities = [(r.id, r.name) for batch in kg.iter_nodes(("entity",), batch=200_000) for r in batch if r.name]
        picked = random.Random(0).sample(entities, min(questions, len(entities)))
        linker = EntityLinker(kg)
        result = {"entities": len(entities), "model": linker.vectors.meta.model if linker.vectors else None}
        for form, spell in (("marked", lambda n: n), ("marked_misspelt", lambda n: n + n[-1])):
            hits, seconds = 0, []
            for node_id, name in picked:
                started = time.perf_counter()
                top = linker.link(f"what is the place of birth of [{spell(name)}]", k=1)
                seconds.append(time.perf_counter() - started)
                hits += bool(top) and top[0].id == node_id
            ordered = sorted(seconds)
            result[form] = {"recall@1": round(hits / len(picked), 4),
                            "p50_ms": round(statistics.median(ordered) * 1000, 2),
                            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2)}
        result["asked"] = [name for _, name in picked]
    out.write_text(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=5_000_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/localkg-bench/e2e"))
    parser.add_argument("--questions", type=int, default=200, help="names linked per form")
    parser.add_argument("--ask", type=int, default=3, help="questions answered with `localkg ask`")
    parser.add_argument("--link-stage", type=Path, help=argparse.SUPPRESS)  # internal: run the link stage
    args = parser.parse_args()
    db = args.work / "db"
    if args.link_stage:
        return link_stage(db, args.questions, args.link_stage)
    args.work.mkdir(parents=True, exist_ok=True)
    dump = args.work / f"fb{args.entities}.nt.gz"
    shutil.rmtree(db, ignore_errors=True)
    localkg = [sys.executable, "-m", "localkg"]
    report: dict = {"entities": args.entities, "cpus": os.cpu_count(), "load_average_before": os.getloadavg()}
    stages: dict = {}
    if dump.exists():
        stages["make_dump"] = {"reused": str(dump)}
    else:
        stages["make_dump"], out = run_stage([sys.executable, str(SHARED / "tools" / "make_dump.py"), "freebase",
                                              "--entities", str(args.entities), "--out", str(dump)])
        stages["make_dump"]["summary"] = json.loads(out.strip().splitlines()[-1])
    stages["make_dump"]["dump_bytes"] = dump.stat().st_size
    stages["plan"], out = run_stage(localkg + ["load", "freebase", str(dump), "--db", str(db), "--plan", "--json"])
    stages["plan"]["estimate"] = json.loads(out)
    stages["load"], out = run_stage(localkg + ["load", "freebase", str(dump), "--db", str(db), "--json", "--quiet"])
    loaded = json.loads(out)
    stages["load"]["report"] = {key: loaded[key] for key in ("lines_read", "facts_loaded", "nodes_added", "seconds")}
    stages["load"]["store_bytes"] = sum(p.stat().st_size for p in db.rglob("*") if p.is_file())
    stages["index_build"], out = run_stage(localkg + ["index", "build", "--db", str(db), "--json"])
    stages["index_build"]["reports"] = json.loads(out)
    linked = args.work / "link.json"
    stages["link"], _ = run_stage([sys.executable, __file__, "--work", str(args.work), "--questions",
                                   str(args.questions), "--link-stage", str(linked)])
    stages["link"].update(json.loads(linked.read_text()))
    asked = stages["link"].pop("asked")[:args.ask]
    answers = []
    for name in asked:
        timing, out = run_stage(localkg + ["ask", f"what is the place of birth of [{name}]", "--db", str(db),
                                           "--json"])
        answers.append({**timing, "answers": [a.get("name") for a in json.loads(out).get("answers", [])][:3]})
    stages["ask"] = {"questions": answers}
    report["stages"] = stages
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
