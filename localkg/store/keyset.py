"""A persistent set of 64-bit key hashes, used to deduplicate loads.

Kùzu has no unique constraint on relationship rows and refuses duplicate
primary keys in ``COPY``, so every load must know which nodes and facts the
database already holds. Asking Kùzu for each key would be slow at dump scale;
instead each kind of key keeps a set of BLAKE2b-64 hashes on disk, as a few
sorted NumPy runs (an LSM-style layout): lookups memory-map the runs, adds
write a new run, and runs are merged when there are too many. Memory stays
bounded by the page cache, not by the number of keys.

With 64-bit hashes the chance of any collision among 10⁸ keys is about
3·10⁻⁴; a collision would drop one fact as a "duplicate". That trade is
documented in docs/architecture.md.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable

import numpy as np

MAX_RUNS = 8


def hash_keys(keys: Iterable[str]) -> np.ndarray:
    """Stable 64-bit hashes of strings (BLAKE2b, independent of PYTHONHASHSEED)."""
    blake = hashlib.blake2b
    return np.fromiter(
        (int.from_bytes(blake(k.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little") for k in keys),
        dtype=np.uint64,
    )


def find_sorted(sorted_hashes: np.ndarray, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``hashes`` would sit in the ascending ``sorted_hashes``, clamped to a valid
    position, and a mask of those that are there.

    >>> positions, found = find_sorted(np.array([3, 7, 9], dtype=np.uint64), np.array([7, 8, 10], dtype=np.uint64))
    >>> positions.tolist(), found.tolist()
    ([1, 2, 2], [True, False, False])
    """
    if len(sorted_hashes) == 0:
        return np.zeros(len(hashes), dtype=np.int64), np.zeros(len(hashes), dtype=bool)
    positions = np.minimum(np.searchsorted(sorted_hashes, hashes), len(sorted_hashes) - 1)
    return positions, np.asarray(sorted_hashes[positions]) == hashes


class KeySet:
    """A set of uint64 hashes stored as sorted runs in one directory."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._runs: list[np.ndarray] = []
        self._load_runs()

    def _run_paths(self) -> list[Path]:
        return sorted(self.directory.glob("run-*.npy"))

    def _load_runs(self) -> None:
        self._runs = [np.load(path, mmap_mode="r") for path in self._run_paths()]

    def __len__(self) -> int:
        return int(sum(len(run) for run in self._runs))

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """A boolean mask: which of ``hashes`` are already in the set."""
        found = np.zeros(len(hashes), dtype=bool)
        for run in self._runs:
            found |= find_sorted(run, hashes)[1]
        return found

    def add(self, hashes: np.ndarray) -> None:
        """Add hashes (which the caller has already checked are new) as a new run."""
        if len(hashes) == 0:
            return
        run = np.unique(np.asarray(hashes, dtype=np.uint64))
        index = len(self._run_paths())
        self._write_run(self.directory / f"run-{index:06d}.npy", run)
        self._load_runs()
        if len(self._runs) > MAX_RUNS:
            self.compact()

    def compact(self) -> None:
        """Merge all runs into one."""
        if len(self._runs) <= 1:
            return
        merged = np.unique(np.concatenate([np.asarray(run) for run in self._runs]))
        old = self._run_paths()
        self._runs = []
        self._write_run(self.directory / "run-merged.tmp.npy", merged)
        for path in old:
            path.unlink()
        os.replace(self.directory / "run-merged.tmp.npy", self.directory / "run-000000.npy")
        self._load_runs()

    def clear(self) -> None:
        """Forget every key (used before a rebuild from the database)."""
        self._runs = []
        for path in self._run_paths():
            path.unlink()

    @staticmethod
    def _write_run(path: Path, run: np.ndarray) -> None:
        tmp = path.with_name(path.name + ".part")
        with open(tmp, "wb") as handle:
            np.save(handle, run)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
