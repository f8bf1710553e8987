"""What appending rows to a keyed Kùzu table in pieces costs, and what one piece loses.

Why: kuzu 0.11.3 loses keys from a primary-key index when one checkpoint more than doubles one of
its hash partitions, so the writer copies into a non-empty keyed table in the pieces of
``copying.keyed_pieces`` (a quarter of what the table holds, each committed and checkpointed;
docs/loading.md, "Properties of Kùzu 0.11.3"). This script measures that price on Freebase-like
ids (``m.0`` + base-32 digits, and literal ids): a table of ``--held`` ids gets ``--added`` more,
once in one ``COPY`` (the reference, measured in the same run) and once in keyed pieces, each in
a fresh database file. Every id is then looked up by key (one ``COPY`` into a scratch
relationship table, as ``localkg check --full`` does) and the lost ones counted.

    python bench/keyed_append.py --held 88068 --added 114866 --workdir /tmp/keyed
    python bench/keyed_append.py --held 1000000 4000000 --added 4000000 --workdir /tmp/keyed

Prints one JSON object: per size, seconds and lost keys of each way, and the ratio of the
pieces' seconds to one piece's.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

import kuzu
import pyarrow as pa
import pyarrow.parquet as pq

from localkg.store.check import unindexed_keys
from localkg.store.kg import KG
from localkg.store.copying import keyed_pieces, path_literal

DIGITS = "0123456789bcdfghjklmnpqrstvwxyz_"


def freebase_ids(count: int, seed: int) -> list[str]:
    """Distinct ids shaped like a Freebase dump's: machine ids, and a tenth literal ids."""
    rng, ids = random.Random(seed), set()
    while len(ids) < count:
        if rng.random() < 0.1:
            ids.add(f'"{rng.randrange(1800, 2030)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"^^xsd:date')
        else:
            ids.add("m.0" + "".join(rng.choice(DIGITS) for _ in range(rng.randint(3, 6))))
    return sorted(ids, key=lambda _: rng.random())


def append(folder: Path, held: list[str], added: list[str], pieces: list[tuple[int, int]], pool: int) -> dict:
    """Copy ``held`` into an empty table, then ``added`` in ``pieces``; the seconds of the second
    part and the keys the index lost."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    database = kuzu.Database(str(folder / "graph.kuzu"), buffer_pool_size=pool)
    connection = kuzu.Connection(database)
    connection.execute("CREATE NODE TABLE Node(id STRING, PRIMARY KEY(id))")
    file = folder / "rows.parquet"
    pq.write_table(pa.table({"id": held}), file)
    connection.execute(f"COPY Node FROM {path_literal(file)}")
    connection.execute("CHECKPOINT")
    started = time.perf_counter()
    for start, stop in pieces:
        pq.write_table(pa.table({"id": added[start:stop]}), file)
        connection.execute(f"COPY Node FROM {path_literal(file)}")
        connection.execute("CHECKPOINT")
    seconds = time.perf_counter() - started
    connection.close()
    database.close()
    kg = KG(folder, kuzu.Database(str(folder / "graph.kuzu"), buffer_pool_size=pool), read_only=False,
            buffer_pool_bytes=pool)
    with kg:
        lost, _ = unindexed_keys(kg, "Node")
    return {"seconds": round(seconds, 3), "pieces": len(pieces), "lost_keys": len(lost)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--held", type=int, nargs="+", default=[88_068])
    parser.add_argument("--added", type=int, default=114_866)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--buffer-pool-mb", type=int, default=1024)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="keyed-append-"))
    runs = []
    for held in args.held:
        ids = freebase_ids(held + args.added, args.seed)
        first, rest = ids[:held], ids[held:]
        pool = args.buffer_pool_mb << 20
        whole = append(workdir / "whole", first, rest, [(0, len(rest))], pool)
        pieces = append(workdir / "pieces", first, rest, keyed_pieces(held, len(rest)), pool)
        runs.append({"held": held, "added": args.added, "one_copy": whole, "keyed_pieces": pieces,
                     "pieces_vs_one_copy_seconds": round(pieces["seconds"] / max(whole["seconds"], 1e-9), 2)})
    shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps({"runs": runs}, indent=2))


if __name__ == "__main__":
    main()
