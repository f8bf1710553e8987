"""Dedupe hash sets at load scale: time and peak heap of ``KeySet`` as a load adds its keys.

A dump load asks the set which of a batch's keys it already holds, then adds
the new ones, batch after batch. This replays that traffic with random 64-bit
keys (``--keys`` in batches of ``--batch``; each batch's new keys come with half
as many keys of the batch before) and reports, per quarter of the keys added:

* seconds for the quarter's lookups and adds, and the runs on disk;
* peak heap of the quarter (tracemalloc, which counts NumPy's buffers; memory-mapped
  run files are page cache, not heap);

with, as the reference measured in the same run on the same batches, a Python
``set`` of the keys: the fast way to keep every key in RAM, whose heap grows
with the keys. Prints one JSON object. Usage::

    python bench/keyset_growth.py [--keys 20000000] [--batch 300000] [--work DIR]
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from localkg.store.keyset import KeySet


class InMemorySet:
    """The reference: every key in a Python set."""

    def __init__(self) -> None:
        self.keys: set[int] = set()

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        keys = self.keys
        return np.fromiter((key in keys for key in hashes.tolist()), dtype=bool, count=len(hashes))

    def add(self, hashes: np.ndarray) -> None:
        self.keys.update(hashes.tolist())


def replay(store, batches: list[np.ndarray], old_fraction: float, seed: int) -> list[dict]:
    """Look up and add each batch (mixed with keys added before); measure each quarter."""
    rng = np.random.default_rng(seed)
    quarters, added = [], []
    boundaries = {len(batches) * q // 4 for q in (1, 2, 3, 4)}
    tracemalloc.start()
    started = time.perf_counter()
    for number, batch in enumerate(batches, 1):
        old = rng.choice(added[-1], size=int(len(batch) * old_fraction)) if added else batch[:0]
        probe = np.concatenate([batch, old])
        new = probe[~store.contains(probe)]
        store.add(new)
        added.append(batch)
        if number in boundaries:
            _, peak = tracemalloc.get_traced_memory()
            quarters.append({"keys": sum(len(b) for b in added), "seconds": round(time.perf_counter() - started, 2),
                             "peak_heap_mb": round(peak / 2**20, 1),
                             "runs": getattr(store, "run_count", 1)})
            tracemalloc.reset_peak()
            started = time.perf_counter()
    tracemalloc.stop()
    return quarters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=20_000_000)
    parser.add_argument("--batch", type=int, default=300_000)
    parser.add_argument("--work", type=Path, default=None, help="directory for the runs (default: a temporary one)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    keys = np.unique(rng.integers(0, 1 << 63, size=args.keys + args.keys // 100, dtype=np.uint64))[:args.keys]
    rng.shuffle(keys)
    batches = [keys[start:start + args.batch] for start in range(0, len(keys), args.batch)]
    work = Path(tempfile.mkdtemp(dir=args.work))
    try:
        keyset = replay(KeySet(work / "keys"), batches, 0.5, seed=1)
        reference = replay(InMemorySet(), batches, 0.5, seed=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = lambda quarters: sum(q["seconds"] for q in quarters)  # noqa: E731
    print(json.dumps({
        "keys": args.keys, "batch": args.batch, "batches": len(batches),
        "keyset": keyset, "python_set_reference": reference,
        "seconds_ratio_keyset_over_reference": round(total(keyset) / total(reference), 2),
        "last_quarter_peak_heap_ratio": round(keyset[-1]["peak_heap_mb"] / reference[-1]["peak_heap_mb"], 3),
    }, indent=2))


if __name__ == "__main__":
    main()
