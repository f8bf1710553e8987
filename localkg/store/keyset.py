"""A persistent set of 64-bit key hashes, used to deduplicate loads.

Kùzu has no unique constraint on relationship rows and refuses duplicate
primary keys in ``COPY``, and asking it for each key is slow at dump scale. So
each kind of key keeps 64-bit hashes (:func:`hash_keys`) on disk as sorted, memory-mapped NumPy
runs, merged LSM-style (newest runs merge while the run before them is no
larger), so N keys added in batches of b make at most log2(N/b) + 1 runs, and a
merge streams in blocks of :data:`MERGE_BLOCK_KEYS`, so memory stays bounded.
A run is written under a temporary name first; runs another run covers (a
crash between a merge and deleting its inputs) are deleted on open. A set may
carry one 64-bit value per key (the node set keeps each node's ``seq``).
The collision risk of 64-bit hashes is discussed in docs/architecture.md.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa

MERGE_BLOCK_KEYS = 1 << 23
_HASH_FILE = "hash"
_RUN_NAME = re.compile(r"run-(\d+)(?:-(\d+))?\.npy")


#: Names the function :func:`hash_keys` computes; a store's hash sets record it (``dedupe``), and sets
#: hashed by another one are rebuilt from the database when a writer opens the store.
HASH_FUNCTION = "fold64-v1"
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)
_WORD = 8


def hash_keys(keys: pa.Array | pa.ChunkedArray | Iterable[str]) -> np.ndarray:
    """Stable 64-bit hashes of strings (independent of PYTHONHASHSEED), one per key.

    Vectorised over an Arrow string or binary array's buffers, so a batch of keys costs a few NumPy
    passes per 8 bytes of its longest key, not a Python call per key: each key's UTF-8 bytes are
    read as little-endian 64-bit words (the last one zero-padded), and each word is folded into a
    state seeded by the key's length, through SplitMix64's finaliser (a bijection with full
    avalanche). Python strings are encoded first (lone surrogates kept, as ``surrogatepass``).

    >>> hash_keys(["m.0abc"]).tolist() == hash_keys(pa.array(["m.0abc"])).tolist()
    True
    >>> len(set(hash_keys(["", "a", "a\\x00", "b"]).tolist()))
    4
    """
    if isinstance(keys, pa.ChunkedArray):
        chunks = [_hash_array(chunk) for chunk in keys.chunks]
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint64)
    if not isinstance(keys, pa.Array):
        keys = pa.array([key.encode("utf-8", "surrogatepass") for key in keys], pa.large_binary())
    return _hash_array(keys)


def _mix(state: np.ndarray) -> np.ndarray:
    state = (state ^ (state >> np.uint64(30))) * _M2
    state = (state ^ (state >> np.uint64(27))) * _M3
    return state ^ (state >> np.uint64(31))


def _hash_array(keys: pa.Array) -> np.ndarray:
    if keys.null_count:
        raise ValueError("a key to hash is null")
    if len(keys) == 0:
        return np.zeros(0, dtype=np.uint64)
    binary = keys.cast(pa.large_binary())
    _validity, offsets_buffer, data_buffer = binary.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64, count=len(binary) + 1, offset=binary.offset * 8)
    first, end = int(offsets[0]), int(offsets[-1])
    padded = np.zeros(end - first + _WORD, dtype=np.uint8)  # every key's last word may read past its end
    if data_buffer is not None:
        padded[:end - first] = np.frombuffer(data_buffer, dtype=np.uint8, count=end - first, offset=first)
    # the 64-bit word starting at every byte (an unaligned, overlapping view: no copy)
    words_at = np.ndarray(shape=(end - first + 1,), dtype="<u8", buffer=padded, strides=(1,))
    starts = offsets[:-1] - first
    lengths = np.diff(offsets)
    state = _mix(lengths.astype(np.uint64) ^ _M1)
    word_counts = (lengths + _WORD - 1) // _WORD
    for word in range(int(word_counts.max(initial=0))):
        rows = np.flatnonzero(word_counts > word)
        value = words_at[starts[rows] + _WORD * word]
        left = lengths[rows] - _WORD * word
        partial = left < _WORD
        value[partial] &= (np.uint64(1) << (left[partial] * 8).astype(np.uint64)) - np.uint64(1)
        state[rows] = _mix((state[rows] ^ value) * _M1)
    return state


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

    Fastest with ``hashes`` ascending too (:meth:`KeySet.contains` sorts them once for all runs):
    NumPy's binary search then starts each key where the last one ended, and reads a memory-mapped
    run in order instead of at random.

    >>> positions, found = find_sorted(np.array([3, 7, 9], dtype=np.uint64), np.array([7, 8, 10], dtype=np.uint64))
    >>> positions.tolist(), found.tolist()
    ([1, 2, 2], [True, False, False])
    """
    if len(sorted_hashes) == 0:
        return np.zeros(len(hashes), dtype=np.int64), np.zeros(len(hashes), dtype=bool)
    positions = np.minimum(np.searchsorted(sorted_hashes, hashes), len(sorted_hashes) - 1)
    return positions, np.asarray(sorted_hashes[positions]) == hashes


def _unsorted(results: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``results`` computed for ``hashes[order]``, put back in the order of ``hashes``."""
    restored = np.empty_like(results)
    restored[order] = results
    return restored


def merge_sorted_runs(runs: list[np.ndarray], out: np.ndarray, block_keys: int = MERGE_BLOCK_KEYS,
                      values: list[np.ndarray] | None = None, out_values: np.ndarray | None = None) -> None:
    """Merge ascending runs into ``out`` (as long as all of them), reading at most about
    ``block_keys`` keys at a time; with ``values`` (one array per run, in its key order), move
    them along into ``out_values``.

    Each step cuts at the smallest of the runs' block ends, so every run gives at most one block
    and the run that set the cut gives a whole one.

    >>> out, out_values = np.zeros(6, dtype=np.uint64), np.zeros(6, dtype=np.int64)
    >>> merge_sorted_runs([np.array([1, 4, 9], dtype=np.uint64), np.array([2, 3, 10], dtype=np.uint64)], out, 2,
    ...                   [np.array([10, 40, 90]), np.array([20, 30, 100])], out_values)
    >>> out.tolist(), out_values.tolist()
    ([1, 2, 3, 4, 9, 10], [10, 20, 30, 40, 90, 100])
    """
    block = max(1, block_keys // max(1, len(runs)))
    positions = [0] * len(runs)
    written = 0
    while True:
        live = [i for i, run in enumerate(runs) if positions[i] < len(run)]
        if not live:
            return
        cut = min(runs[i][min(positions[i] + block, len(runs[i])) - 1] for i in live)
        pieces, value_pieces = [], []
        for i in live:
            window = runs[i][positions[i]:positions[i] + block]
            taken = int(np.searchsorted(window, cut, side="right"))
            pieces.append(np.asarray(window[:taken]))
            if values is not None:
                value_pieces.append(np.asarray(values[i][positions[i]:positions[i] + taken]))
            positions[i] += taken
        keys = np.concatenate(pieces)
        if out_values is None:
            out[written:written + len(keys)] = np.sort(keys)
        else:
            order = np.argsort(keys, kind="stable")
            out[written:written + len(keys)] = keys[order]
            out_values[written:written + len(keys)] = np.concatenate(value_pieces)[order]
        written += len(keys)


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

    @property
    def values_path(self) -> Path:
        return self.path.with_suffix(".values.npy")


def hash_function_of(directory: Path) -> str | None:
    """The hash function a set's directory names; None for a set written before sets named it
    (BLAKE2b-64)."""
    try:
        return (Path(directory) / _HASH_FILE).read_text().strip()
    except FileNotFoundError:
        return None


class KeySet:
    """A set of uint64 hashes stored as sorted runs in one directory; with ``with_values``, a map
    from each hash to an int64 value. The directory's ``hash`` file names the function that hashed
    its keys (:data:`HASH_FUNCTION`, written when the set starts empty)."""

    def __init__(self, directory: Path, with_values: bool = False):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.with_values = with_values
        self._runs: list[_Run] = []
        self._arrays: list[np.ndarray] = []
        self._values: list[np.ndarray | None] = []
        self._load_runs()
        if not self._runs and self.hashed_by is None:
            self._mark_hash_function()

    @property
    def hashed_by(self) -> str | None:
        """The hash function of the set's keys (:func:`hash_function_of`)."""
        return hash_function_of(self.directory)

    def _mark_hash_function(self) -> None:
        write_atomically(self.directory / _HASH_FILE, lambda handle: handle.write(HASH_FUNCTION.encode()))

    def _load_runs(self) -> None:
        """Read the run files, oldest first, deleting runs that a completed merge covers, values
        whose run a crash did not write, and files a crash left half written."""
        for partial in self.directory.glob("run-*.part"):
            partial.unlink()
        runs = [run for path in self.directory.glob("run-*.npy") if (run := _Run.parse(path)) is not None]
        kept = []
        for run in runs:
            if any(other.covers(run) for other in runs):
                run.path.unlink()
                run.values_path.unlink(missing_ok=True)
            else:
                kept.append(run)
        for values in self.directory.glob("run-*.values.npy"):
            if not values.with_suffix("").with_suffix(".npy").exists():
                values.unlink()
        self._runs = sorted(kept, key=lambda run: run.first)
        self._arrays = [np.load(run.path, mmap_mode="r") for run in self._runs]
        self._values = [np.load(run.values_path, mmap_mode="r") if run.values_path.exists() else None
                        for run in self._runs]

    @property
    def has_values(self) -> bool:
        """Whether every run carries its values (false for a set written without them)."""
        return all(values is not None for values in self._values)

    def __len__(self) -> int:
        return int(sum(len(array) for array in self._arrays))

    @property
    def run_count(self) -> int:
        return len(self._runs)

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """A boolean mask: which of ``hashes`` are already in the set."""
        order = np.argsort(hashes)
        ascending = hashes[order]
        found = np.zeros(len(hashes), dtype=bool)
        for array in self._arrays:
            found |= find_sorted(array, ascending)[1]
        return _unsorted(found, order)

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """The value of each of ``hashes`` (int64), -1 for those not in the set."""
        order = np.argsort(hashes)
        ascending = hashes[order]
        found = np.full(len(hashes), -1, dtype=np.int64)
        for array, values in zip(self._arrays, self._values):
            positions, present = find_sorted(array, ascending)
            found[present] = values[positions[present]]
        return _unsorted(found, order)

    def add(self, hashes: np.ndarray, values: np.ndarray | None = None) -> None:
        """Add hashes (which the caller has already checked are new, and distinct when they come
        with ``values``) as a new run, then merge the newest runs while the run before them is no
        larger than they are together."""
        if len(hashes) == 0:
            return
        if self.with_values != (values is not None):
            raise ValueError("a set with values takes a value per hash; a plain set takes none")
        number = self._runs[-1].last + 1 if self._runs else 0
        run = _Run(number, number, self.directory / f"run-{number:06d}-{number:06d}.npy")
        hashes = np.asarray(hashes, dtype=np.uint64)
        if values is None:
            write_atomically(run.path, lambda handle: np.save(handle, sorted_distinct(hashes)))
        else:
            order = np.argsort(hashes, kind="stable")
            write_atomically(run.values_path, lambda handle: np.save(handle, np.asarray(values, np.int64)[order]))
            write_atomically(run.path, lambda handle: np.save(handle, hashes[order]))
        self._runs.append(run)
        self._arrays.append(np.load(run.path, mmap_mode="r"))
        self._values.append(np.load(run.values_path, mmap_mode="r") if values is not None else None)
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
        """Forget every key (used before a rebuild from the database, which hashes them with
        today's function)."""
        for path in self.directory.glob("run-*"):
            path.unlink()
        self._load_runs()
        self._mark_hash_function()

    def _merge(self, start: int) -> None:
        """Merge the runs from position ``start`` on into one that names their whole range (its
        values file, if any, is renamed into place before the run)."""
        inputs, arrays = self._runs[start:], self._arrays[start:]
        values = self._values[start:] if self.has_values else None
        merged = _Run(inputs[0].first, inputs[-1].last,
                      self.directory / f"run-{inputs[0].first:06d}-{inputs[-1].last:06d}.npy")
        total = sum(len(array) for array in arrays)

        def write_keys(key_handle) -> None:
            out = _npy_memmap(key_handle, total, np.uint64)
            if values is None:
                merge_sorted_runs(arrays, out, MERGE_BLOCK_KEYS)
            else:
                def write_values(value_handle) -> None:
                    out_values = _npy_memmap(value_handle, total, np.int64)
                    merge_sorted_runs(arrays, out, MERGE_BLOCK_KEYS, values, out_values)
                    out_values.flush()
                write_atomically(merged.values_path, write_values)
            out.flush()

        write_atomically(merged.path, write_keys)
        for run in inputs:
            run.path.unlink()
            run.values_path.unlink(missing_ok=True)
        self._load_runs()


def _npy_memmap(handle, length: int, dtype: type) -> np.memmap:
    """A writable memory map of a new ``.npy`` array of ``length`` items in the open file."""
    np.lib.format.write_array_header_1_0(
        handle, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (length,)})
    handle.flush()
    offset = handle.tell()
    handle.truncate(offset + length * np.dtype(dtype).itemsize)
    return np.memmap(handle, dtype=dtype, mode="r+", offset=offset, shape=(length,))


def write_atomically(path: Path, write) -> None:
    """Write a file under a temporary name with ``write(handle)``, sync it, then give it its name
    (a crash leaves the old file or the new one, never half of one)."""
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "w+b") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
