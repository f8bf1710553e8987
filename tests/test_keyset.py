"""The dedupe hash sets: membership across many adds, a logarithmic number of runs and rewrites,
merges in bounded memory, and recovery from a crash in the middle of a merge."""
from __future__ import annotations

import math
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from localkg.store import keyset
from localkg.store.keyset import KeySet, merge_sorted_runs


def disjoint_batches(count: int, size: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    keys = np.unique(rng.integers(0, 1 << 63, size=count * size + 1_000, dtype=np.uint64))
    rng.shuffle(keys)
    return [keys[i * size:(i + 1) * size] for i in range(count)]


def test_membership_after_many_adds_matches_a_python_set(tmp_path: Path) -> None:
    keys = KeySet(tmp_path / "keys")
    seen: set[int] = set()
    unseen = disjoint_batches(1, 2_000, seed=1)[0]
    for batch in disjoint_batches(100, 300):
        assert not keys.contains(batch).any()
        keys.add(batch)
        seen.update(batch.tolist())
        assert len(keys) == len(seen)
        assert keys.run_count <= math.log2(len(seen) / 300) + 1
    probe = np.concatenate([np.array(sorted(seen), dtype=np.uint64)[::7], unseen])
    expected = np.array([int(key) in seen for key in probe])
    assert (keys.contains(probe) == expected).all()
    reopened = KeySet(tmp_path / "keys")
    assert len(reopened) == len(seen) and (reopened.contains(probe) == expected).all()


def test_each_key_is_rewritten_a_logarithmic_number_of_times(tmp_path: Path, monkeypatch) -> None:
    """Merging every run whenever a few piled up rewrote the whole set each time (14x the keys
    for 256 adds); the binary-counter rule rewrites each key at most log2(adds) times."""
    rewritten = []
    real_merge = keyset.merge_sorted_runs

    def counting(runs, out, block_keys=keyset.MERGE_BLOCK_KEYS):
        rewritten.append(len(out))
        return real_merge(runs, out, block_keys)

    monkeypatch.setattr(keyset, "merge_sorted_runs", counting)
    keys = KeySet(tmp_path / "keys")
    batches = disjoint_batches(256, 50)
    for batch in batches:
        keys.add(batch)
    total = 256 * 50
    assert sum(rewritten) <= total * math.log2(256)
    assert keys.run_count == 1 and len(keys) == total


@pytest.mark.parametrize("block_keys", [1, 3, 64, 1 << 20])
def test_merge_sorted_runs_equals_sorting_everything(block_keys: int) -> None:
    rng = np.random.default_rng(block_keys)
    runs = [np.sort(rng.integers(0, 1_000, size=n).astype(np.uint64)) for n in (0, 1, 17, 250, 90)]
    runs = [np.unique(run) for run in runs]  # each run is a set; runs may share keys
    out = np.zeros(sum(len(run) for run in runs), dtype=np.uint64)
    merge_sorted_runs(runs, out, block_keys)
    assert out.tolist() == sorted(np.concatenate(runs).tolist())


def test_a_merge_holds_blocks_not_the_whole_set(tmp_path: Path, monkeypatch) -> None:
    """Four runs of 8 MB: merging them reads 64k keys (512 KB) at a time; concatenating them, as
    compaction once did, would allocate 32 MB at least."""
    monkeypatch.setattr(keyset, "MERGE_BLOCK_KEYS", 1 << 16)
    directory = tmp_path / "keys"
    directory.mkdir()
    for number, batch in enumerate(disjoint_batches(4, 1_000_000, seed=2)):
        np.save(directory / f"run-{number:06d}.npy", np.sort(batch))  # four runs, as no add leaves them
    keys = KeySet(directory)
    assert keys.run_count == 4
    tracemalloc.start()
    try:
        keys.compact()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert keys.run_count == 1 and len(keys) == 4_000_000
    assert peak < 8 << 20, peak
    merged = np.load(next(directory.glob("run-*.npy")))
    assert (merged[1:] > merged[:-1]).all()


def test_a_crash_after_a_merge_is_written_drops_the_runs_it_covers(tmp_path: Path) -> None:
    directory = tmp_path / "keys"
    keys = KeySet(directory)
    batches = disjoint_batches(3, 100)
    keys.add(batches[0])
    keys.add(batches[1])  # merged: run-000000-000001
    saved = tmp_path / "saved"
    shutil.copytree(directory, saved)
    keys.add(batches[2])  # run-000002-000002, not merged (the older run is larger)
    assert keys.run_count == 2
    keys.compact()  # run-000000-000002
    # Put the inputs back, as if the process died before deleting them, plus a half-written file.
    for path in saved.iterdir():
        shutil.copy(path, directory / path.name)
    np.save(directory / "run-000002-000002.npy", np.sort(batches[2]))
    (directory / "run-000003-000003.npy.part").write_bytes(b"\x93NUMPY")
    reopened = KeySet(directory)
    assert reopened.run_count == 1 and len(reopened) == 300
    assert sorted(path.name for path in directory.glob("run-*")) == ["run-000000-000002.npy"]
    assert reopened.contains(np.concatenate(batches)).all()


def test_runs_written_before_ranged_names_are_read_and_added_to(tmp_path: Path) -> None:
    """Databases loaded before this layout hold ``run-000000.npy``, ``run-000001.npy``, …"""
    directory = tmp_path / "keys"
    directory.mkdir()
    batches = disjoint_batches(3, 100)
    np.save(directory / "run-000000.npy", np.sort(batches[0]))
    np.save(directory / "run-000001.npy", np.sort(batches[1]))
    keys = KeySet(directory)
    assert len(keys) == 200 and keys.contains(batches[1]).all()
    keys.add(batches[2])
    assert len(keys) == 300 and keys.contains(np.concatenate(batches)).all()
    assert len(KeySet(directory)) == 300


def test_a_set_with_values_maps_each_key_to_its_value_across_merges_and_reopens(tmp_path: Path) -> None:
    keys = KeySet(tmp_path / "keys", with_values=True)
    expected: dict[int, int] = {}
    for number, batch in enumerate(disjoint_batches(40, 250, seed=3)):
        values = np.arange(len(batch)) + number * 1_000
        keys.add(batch, values)
        expected.update(zip(batch.tolist(), values.tolist()))
    assert keys.run_count < 40 and keys.has_values
    probe = np.concatenate([np.array(list(expected), dtype=np.uint64)[::3], disjoint_batches(1, 50, seed=4)[0]])
    wanted = [expected.get(int(key), -1) for key in probe]
    assert keys.lookup(probe).tolist() == wanted
    assert KeySet(tmp_path / "keys", with_values=True).lookup(probe).tolist() == wanted
    with pytest.raises(ValueError):
        keys.add(np.array([1], dtype=np.uint64))


def test_a_set_written_without_values_says_so(tmp_path: Path) -> None:
    KeySet(tmp_path / "keys").add(np.array([3, 1], dtype=np.uint64))
    assert not KeySet(tmp_path / "keys", with_values=True).has_values
