"""Damaged store files: every command that opens the store ends within seconds, with bounded memory,
one clear line and a non-zero exit; nothing hangs, eats memory or dies of a signal.

The store is damaged at 28 places: zeroed pages, random bytes, truncation and appended bytes in a
sealed ``graph.kuzu``; the same in one that no clean close sealed; a dead writer's WAL with random
bytes, zeros or cut short; a damaged ``manifest.json`` and ``seal.json``. Each command runs as its
own process (a crash inside Kùzu would take a test process with it), and its peak RSS, with its
probe's, is polled from ``/proc``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from localkg.loaders.triples import load_triples
from localkg.store import KG, schema
from localkg.store.backup import backup_store
from localkg.store.seal import read_seal

PAGE = 4096
SECONDS = 10.0
RSS_BYTES = 2 << 30
WRITER_DIES = """
import os, sys, kuzu
connection = kuzu.Connection(kuzu.Database(sys.argv[1]))
for i in range(300):
    connection.execute("CREATE (n:Node {id: $id, name: $id, kind: 'entity', seq: 900000})", {"id": f"late{i}"})
os._exit(0)
"""


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sealed store of 20,000 facts, closed cleanly."""
    folder = tmp_path_factory.mktemp("sound")
    triples = folder / "kb.tsv"
    triples.write_text("".join(f"entity {i}\trelation_{i % 7}\tentity {(i * 31) % 5_000}\n" for i in range(20_000)))
    with KG.open(folder / "db", create=True) as kg:
        kg.record_source("triples", [triples])
        load_triples(kg, [triples])
    return folder / "db"


@pytest.fixture(scope="module")
def with_wal(sound: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sound store after a writer died before its WAL was checkpointed."""
    db = tmp_path_factory.mktemp("wal") / "db"
    shutil.copytree(sound, db)
    (db / schema.SEAL_FILE).unlink()  # a localkg writer drops the seal when it opens
    subprocess.run([sys.executable, "-c", WRITER_DIES, str(db / schema.GRAPH_FILE)], check=True, timeout=60)
    assert (db / (schema.GRAPH_FILE + ".wal")).stat().st_size > 0
    return db


def overwrite(file: Path, offset: int, data: bytes) -> None:
    with open(file, "r+b") as handle:
        handle.seek(offset)
        handle.write(data)


def zero(pages: int, count: int = 8):
    return lambda file: overwrite(file, pages * PAGE, bytes(count * PAGE))


def scramble(pages: int, count: int = 8):
    return lambda file: overwrite(file, pages * PAGE, os.urandom(count * PAGE))


def truncate(keep: float | int):
    def damage(file: Path) -> None:
        size = file.stat().st_size
        os.truncate(file, int(size * keep) if isinstance(keep, float) else keep if keep >= 0 else size + keep)
    return damage


def last_pages(damage_at):
    """Damage the last 8 pages of the file."""
    def damage(file: Path) -> None:
        damage_at(file.stat().st_size // PAGE - 8)(file)
    return damage


def append(file: Path) -> None:
    with open(file, "ab") as handle:
        handle.write(os.urandom(3 * PAGE))


def write(text: bytes):
    return lambda file: file.write_bytes(text)


GRAPH, WAL = schema.GRAPH_FILE, schema.GRAPH_FILE + ".wal"
# (name, file damaged, damage, the store is sealed, a command must find it damaged)
CASES = [
    *[(f"graph zeroed at page {p}", GRAPH, zero(p), True, True) for p in (0, 1, 2, 10, 50, 100)],
    ("graph zeroed in its last pages", GRAPH, last_pages(zero), True, True),
    *[(f"graph random at page {p}", GRAPH, scramble(p), True, True) for p in (0, 1, 10, 100)],
    ("graph random in its last pages", GRAPH, last_pages(scramble), True, True),
    ("graph truncated to nothing", GRAPH, truncate(0), True, True),
    ("graph truncated to one page", GRAPH, truncate(PAGE), True, True),
    ("graph truncated to half", GRAPH, truncate(0.5), True, True),
    ("graph without its last page", GRAPH, truncate(-PAGE), True, True),
    ("graph with bytes appended", GRAPH, append, True, True),
    ("unsealed graph zeroed at page 100", GRAPH, zero(100), False, True),
    ("unsealed graph random at page 100", GRAPH, scramble(100), False, True),
    ("unsealed graph truncated to half", GRAPH, truncate(0.5), False, True),
    ("unsealed graph truncated to one page", GRAPH, truncate(PAGE), False, True),
    ("manifest truncated", schema.MANIFEST_FILE, truncate(0.5), True, True),
    ("manifest random bytes", schema.MANIFEST_FILE, write(b"\x8f\x00\xff" * 40), True, True),
    ("manifest empty", schema.MANIFEST_FILE, write(b""), True, True),
    ("manifest a JSON list", schema.MANIFEST_FILE, write(b"[1, 2, 3]"), True, True),
    ("seal random bytes", schema.SEAL_FILE, write(b"\x00\x01garbage"), True, False),
]
WAL_CASES = [  # Kùzu replays a WAL up to a record it cannot read: opening may succeed, or fail clearly
    ("WAL random bytes", WAL, lambda file: overwrite(file, file.stat().st_size // 3, os.urandom(8192))),
    ("WAL zeroed", WAL, lambda file: overwrite(file, file.stat().st_size // 3, bytes(8192))),
    ("WAL cut short", WAL, truncate(0.4)),
]
COMMANDS = {
    "stats": ["stats"],
    "check": ["check", "--sample", "200"],  # its id lookups, one query each, are not what is timed here
    "query": ["query", "MATCH (n:Node) RETURN count(*)"],
}


def run(*args: str) -> tuple[int, str, str, float, int]:
    """Run ``localkg ARGS`` as its own process: exit status, stdout, stderr, seconds, and the peak RSS
    in bytes of it and its children (the probe), polled from ``VmHWM``: ``wait4``'s maximum would
    start at the forking test process's own RSS, which the suite's loaded models make large."""
    started, peak = time.monotonic(), 0
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen([sys.executable, "-m", "localkg", *args], stdout=out, stderr=err,
                                 stdin=subprocess.DEVNULL, text=True)
        while child.poll() is None:
            peak = max(peak, *(_high_water(pid) for pid in _family(child.pid)))
            if time.monotonic() - started > SECONDS * 3:
                child.kill()
                child.wait()
                pytest.fail(f"localkg {' '.join(args)} still ran after {SECONDS * 3:.0f} s")
            time.sleep(0.01)
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return child.returncode, out.read(), err.read(), seconds, peak


def _family(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    family, todo = [], [pid]
    while todo:
        current = todo.pop()
        family.append(current)
        try:
            todo += [int(c) for c in Path(f"/proc/{current}/task/{current}/children").read_text().split()]
        except OSError:
            pass
    return family


def _high_water(pid: int) -> int:
    """The process's peak RSS so far (since its exec), in bytes; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def damaged_copy(source: Path, folder: Path, file: str, damage, sealed: bool) -> Path:
    db = folder / "db"
    shutil.copytree(source, db)
    if not sealed:
        (db / schema.SEAL_FILE).unlink(missing_ok=True)
    damage(db / file)
    return db


def assert_clean_end(command: str, result: tuple[int, str, str, float, int], must_fail: bool) -> None:
    code, out, err, seconds, rss = result
    assert code >= 0, f"{command} died of signal {-code}"
    assert "Traceback" not in err, err
    assert seconds < SECONDS, f"{command} took {seconds:.1f} s"
    assert rss < RSS_BYTES, f"{command} peaked at {rss >> 20} MiB"
    if must_fail:
        assert code == 1, (command, out, err)
        lines = [line for line in (out + err).splitlines() if line.startswith(("Error:", "problem:"))]
        assert lines and "damaged" in lines[0], (command, out, err)
        if command != "check":
            assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("name, file, damage, sealed, must_fail", CASES, ids=[case[0] for case in CASES])
def test_every_command_ends_clearly_on_a_damaged_store(sound: Path, tmp_path: Path, name: str, file: str, damage,
                                                       sealed: bool, must_fail: bool) -> None:
    db = damaged_copy(sound, tmp_path, file, damage, sealed)
    for command, args in COMMANDS.items():
        result = run(args[0], "--db", str(db), *args[1:])
        assert_clean_end(command, result, must_fail)
        if not must_fail:
            assert result[0] == 0, result


@pytest.mark.parametrize("name, file, damage", WAL_CASES, ids=[case[0] for case in WAL_CASES])
def test_a_damaged_wal_opens_or_fails_clearly(with_wal: Path, tmp_path: Path, name: str, file: str, damage) -> None:
    db = damaged_copy(with_wal, tmp_path, file, damage, sealed=False)
    for command, args in COMMANDS.items():
        code, out, err, seconds, rss = result = run(args[0], "--db", str(db), *args[1:])
        assert_clean_end(command, result, must_fail=False)
        if code != 0:  # a clear line: the damage, or (check) what the dead writer left
            assert (out + err).startswith(("Error:", "problem:")), (out, err)


def test_ask_and_append_stop_on_a_damaged_store(sound: Path, tmp_path: Path) -> None:
    db = damaged_copy(sound, tmp_path, GRAPH, scramble(10), sealed=True)
    more = tmp_path / "more.tsv"
    more.write_text("a\tb\tc\n")
    ask = ["ask", "--db", str(db), "who is entity 3", "--topic", "entity 3", "--reasoner", "tog"]
    for command, args in {"ask": ask,
                          "load": ["load", "triples", str(more), "--db", str(db)],
                          "backup": ["backup", "--db", str(db), "--out", str(tmp_path / "copy")]}.items():
        assert_clean_end(command, run(*args), must_fail=True)
    assert not (tmp_path / "copy").exists()


def test_a_clean_close_seals_and_an_unchanged_store_opens_without_a_probe(sound: Path, tmp_path: Path) -> None:
    record = read_seal(sound)
    assert record is not None and record.size == (sound / GRAPH).stat().st_size
    with KG.open(sound, read_only=True) as kg:
        assert kg.stats().facts == 20_000
    assert read_seal(sound) == record  # a reader leaves the seal alone


def test_the_damage_message_names_the_way_back(sound: Path, tmp_path: Path) -> None:
    db = damaged_copy(sound, tmp_path, GRAPH, zero(10), sealed=True)
    code, out, err, *_ = run("stats", "--db", str(db))
    assert "localkg backup" in err and "localkg load triples" in err and "kb.tsv" in err


def test_check_full_compares_the_whole_file_with_its_seal(sound: Path, tmp_path: Path) -> None:
    db = damaged_copy(sound, tmp_path, GRAPH, scramble(100), sealed=True)
    stat = (sound / GRAPH).stat()
    os.utime(db / GRAPH, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # size and time as sealed: only the CRC tells
    code, out, err, *_ = run("check", "--db", str(db), "--full")
    assert code == 1 and "damaged" in out and "CRC" in out


def test_backup_is_a_sound_store_of_its_own(sound: Path, tmp_path: Path) -> None:
    with KG.open(sound, read_only=True) as reader:  # a reader may stay open
        report = backup_store(sound, tmp_path / "copy")
        assert reader.stats().facts == 20_000
    assert report.files >= 3
    assert read_seal(tmp_path / "copy").crc32 == read_seal(sound).crc32
    with KG.open(tmp_path / "copy", read_only=True) as kg:
        assert kg.stats().facts == 20_000
    code, out, err, *_ = run("backup", "--db", str(sound), "--out", str(tmp_path / "copy"))
    assert code == 1 and "already exists" in err
