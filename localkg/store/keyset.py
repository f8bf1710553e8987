"""A persistent set of 64-bit key hashes, used to deduplicate loads.

Kùzu has no unique constraint on relationship rows and refuses duplicate
primary keys in ``COPY``, so every load must know which nodes and facts the
database already holds. Asking Kùzu for each key would be slow at dump scale;
instead each kind of key keeps a set of BLAKE2b-64 hashes on disk as sorted
NumPy runs, an LSM-style layout:

* a lookup memory-maps every run and binary-searches it;
* an add writes a new run, then merges the newest runs while the run before
  them is no larger than they are together (a binary counter), so a set of N
  keys added in batches of b has at most log2(N/b) + 1 runs and every key is
  rewritten about log2(N/b) times in all. Merging every run whenever a few
  had piled up rewrote the whole set each time: quadratic over a Freebase load;
* a merge streams its runs in blocks of at most :data:`MERGE_BLOCK_KEYS` keys
  in all, so its memory is bounded however large the set grows.

A run is named by the range of adds it holds (``run-000003-000005.npy``) and
written under a temporary name first. A crash after a merge is written but
before its inputs are deleted leaves runs whose range another run covers; the
next open deletes those, so no key is counted twice.

With 64-bit hashes the chance of any collision among 10⁸ keys is about
3·10⁻⁴; a collision would drop one fact as a "duplicate". That trade is
documented in docs/architecture.md.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

MERGE_BLOCK_KEYS = 1 << 23
_RUN_NAME = re.compile(r"run-(\d+)(?:-(\d+))?\.npy")


def hash_keys(keys: Iterable[str]) -> np.ndarray:
    """Stable 64-bit hashes of strings (BLAKE2b, independent of PYTHONHASHSEED)."""
    blake = hashlib.blake2b
    digests = b"".join([blake(k.encode("utf-8", "surrogatepass"), digest_size=8).digest() for k in keys])
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64)


def sorted_distinct(hashes: np.ndarray) -> np.ndarray:
    """The distinct ``hashes``, ascending.

    Sorts and drops repeats: ``np.unique`` takes NumPy 2's hash-table path for integers, 0.74 s
    for 500k hashes here against 0.01 s for the sort.

    >>> sorted_distinct(np.array([5, 1, 5, 3], dtype=np.uint64)).tolist()
    [1, 3, 5]
    """
    ordered = np.sort(np.asarray(hashes, dtype=np.uint64))
    if len(ordered) < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


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


def merge_sorted_runs(runs: list[np.ndarray], out: np.ndarray, block_keys: int = MERGE_BLOCK_KEYS) -> None:
    """Merge ascending runs into ``out`` (as long as all of them), reading at most about
    ``block_keys`` keys at a time.

    Each step cuts at the smallest of the runs' block ends, so every run gives at most one block
    and the run that set the cut gives a whole one.

    >>> out = np.zeros(6, dtype=np.uint64)
    >>> merge_sorted_runs([np.array([1, 4, 9], dtype=np.uint64), np.array([2, 3, 10], dtype=np.uint64)], out, 2)
    >>> out.tolist()
    [1, 2, 3, 4, 9, 10]
    """
    block = max(1, block_keys // max(1, len(runs)))
    positions = [0] * len(runs)
    written = 0
    while True:
        live = [i for i, run in enumerate(runs) if positions[i] < len(run)]
        if not live:
            return
        cut = min(runs[i][min(positions[i] + block, len(runs[i])) - 1] for i in live)
        pieces = []
        for i in live:
            window = runs[i][positions[i]:positions[i] + block]
            taken = int(np.searchsorted(window, cut, side="right"))
            pieces.append(np.asarray(window[:taken]))
            positions[i] += taken
        merged = np.sort(np.concatenate(pieces))
        out[written:written + len(merged)] = merged
        written += len(merged)


@dataclass(frozen=True)
class _Run:
    """One sorted run on disk and the range of adds it holds."""

    first: int
    last: int
    path: Path

    @classmethod
    def parse(cls, path: Path) -> "_Run | None":
        match = _RUN_NAME.fullmatch(path.name)
        if match is None:
            return None
        first = int(match.group(1))
        return cls(first, int(match.group(2) or first), path)

    def covers(self, other: "_Run") -> bool:
        return self is not other and self.first <= other.first and other.last <= self.last


class KeySet:
    """A set of uint64 hashes stored as sorted runs in one directory."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._runs: list[_Run] = []
        self._arrays: list[np.ndarray] = []
        self._load_runs()

    def _load_runs(self) -> None:
        """Read the run files, oldest first, deleting runs that a completed merge covers and
        files a crash left half written."""
        for partial in self.directory.glob("run-*.part"):
            partial.unlink()
        runs = [run for path in self.directory.glob("run-*.npy") if (run := _Run.parse(path)) is not None]
        kept = []
        for run in runs:
            if any(other.covers(run) for other in runs):
                run.path.unlink()
            else:
                kept.append(run)
        self._runs = sorted(kept, key=lambda run: run.first)
        self._arrays = [np.load(run.path, mmap_mode="r") for run in self._runs]

    def __len__(self) -> int:
        return int(sum(len(array) for array in self._arrays))

    @property
    def run_count(self) -> int:
        return len(self._runs)

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """A boolean mask: which of ``hashes`` are already in the set."""
        found = np.zeros(len(hashes), dtype=bool)
        for array in self._arrays:
            found |= find_sorted(array, hashes)[1]
        return found

    def add(self, hashes: np.ndarray) -> None:
        """Add hashes (which the caller has already checked are new) as a new run, then merge
        the newest runs while the run before them is no larger than they are together."""
        if len(hashes) == 0:
            return
        number = self._runs[-1].last + 1 if self._runs else 0
        path = self.directory / f"run-{number:06d}-{number:06d}.npy"
        write_atomically(path, lambda handle: np.save(handle, sorted_distinct(hashes)))
        self._runs.append(_Run(number, number, path))
        self._arrays.append(np.load(path, mmap_mode="r"))
        sizes = [len(array) for array in self._arrays]
        count, total = 1, sizes[-1]
        while count < len(sizes) and sizes[-count - 1] <= total:
            count += 1
            total += sizes[-count]
        if count > 1:
            self._merge(len(sizes) - count)

    def compact(self) -> None:
        """Merge all runs into one."""
        if len(self._runs) > 1:
            self._merge(0)

    def clear(self) -> None:
        """Forget every key (used before a rebuild from the database)."""
        for path in self.directory.glob("run-*"):
            path.unlink()
        self._load_runs()

    def _merge(self, start: int) -> None:
        """Merge the runs from position ``start`` on into one that names their whole range."""
        inputs, arrays = self._runs[start:], self._arrays[start:]
        path = self.directory / f"run-{inputs[0].first:06d}-{inputs[-1].last:06d}.npy"
        total = sum(len(array) for array in arrays)

        def write(handle) -> None:
            np.lib.format.write_array_header_1_0(
                handle, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.uint64)), "fortran_order": False,
                         "shape": (total,)})
            handle.flush()
            offset = handle.tell()
            handle.truncate(offset + total * 8)
            out = np.memmap(handle, dtype=np.uint64, mode="r+", offset=offset, shape=(total,))
            merge_sorted_runs(arrays, out, MERGE_BLOCK_KEYS)
            out.flush()
            del out

        write_atomically(path, write)
        for run in inputs:
            run.path.unlink()
        self._load_runs()


def write_atomically(path: Path, write) -> None:
    """Write a file under a temporary name with ``write(handle)``, sync it, then give it its name
    (a crash leaves the old file or the new one, never half of one)."""
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "w+b") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
