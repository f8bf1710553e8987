"""A store's seal: what a clean close left in ``graph.kuzu``, checked before Kùzu reads the file.

Kùzu trusts its file. Zeroed pages can make it allocate without bound or spin, and random bytes can
crash the process with no Python exception and nothing said. So every open checks first. A
read-write close records the file's size, modification time and CRC-32 in ``DB/seal.json``; an
open that finds the file as sealed goes straight on. A file changed since (damaged, or copied) is
checked against the CRC. A store that no clean close sealed (made by an older localkg, or left by
a writer that died, whose WAL Kùzu replays on open) is first opened by a child process under a time
and memory limit, so that a hang or crash there becomes one clear error here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

from localkg.errors import DatabaseDamagedError, DatabaseLockedError
from localkg.store import schema

PROBE_SECONDS = 6.0  # a sound store opens in well under a second; a damaged one may never return
PROBE_WAL_BYTES_PER_SECOND = 50 << 20  # replaying a dead writer's WAL may take longer: time for it
PROBE_MEMORY_BYTES = 1536 << 20
PROBE_BUFFER_POOL_BYTES = 128 << 20
_CHUNK = 8 << 20
_LOCKED, _FAILED = 4, 3
# Runs in the child with only kuzu imported (no localkg: it starts fast and whatever the working
# directory holds). The queries touch the catalogue and each table's first pages.
_PROBE = """
import sys, kuzu
path, read_only, pool = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
try:
    database = kuzu.Database(path, read_only=read_only, buffer_pool_size=pool)
    connection = kuzu.Connection(database)
    for query in ("CALL show_tables() RETURN *", "MATCH (r:Relation) RETURN r.id, r.facts LIMIT 100",
                  "MATCH (n:Node) RETURN n.id, n.name LIMIT 100", "MATCH ()-[f:Fact]->() RETURN f.rel LIMIT 100"):
        connection.execute(query).get_all()
    connection.close()
    database.close()
except RuntimeError as error:
    text = str(error).strip()
    print(text.splitlines()[0] if text else type(error).__name__, file=sys.stderr)
    sys.exit(4 if "lock" in text.lower() else 3)
"""


@dataclass(frozen=True)
class Seal:
    """Size, modification time (ns) and CRC-32 of ``graph.kuzu`` as a clean close left it."""

    size: int
    mtime_ns: int
    crc32: int


def unseal(path: Path) -> None:
    """Drop the seal before a read-write open: until the close seals again, the file may change."""
    (path / schema.SEAL_FILE).unlink(missing_ok=True)


def seal(path: Path) -> None:
    """Record the state a clean read-write close left (nothing while a WAL is still beside it)."""
    graph = path / schema.GRAPH_FILE
    if _wal(path).exists() or not graph.exists():
        return
    before = graph.stat()
    record = Seal(before.st_size, before.st_mtime_ns, file_crc32(graph))
    target = path / schema.SEAL_FILE
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(record), sort_keys=True))
    tmp.replace(target)


def verify(path: Path, read_only: bool) -> None:
    """Raise :class:`DatabaseDamagedError` unless Kùzu can safely open the store at ``path``."""
    problem = damage(path, read_only)
    if problem is not None:
        raise DatabaseDamagedError(problem)


def damage(path: Path, read_only: bool = True, content: bool = False) -> str | None:
    """What is wrong with ``graph.kuzu`` (and its WAL) in one line, or None when it is sound.

    ``content``: compare the CRC even when size and time are as sealed (``check --full``).
    Raises :class:`DatabaseLockedError` when the probe finds another process holding the store.
    """
    graph = path / schema.GRAPH_FILE
    record = read_seal(path)
    if record is not None and not _wal(path).exists():
        now = graph.stat()
        if (now.st_size, now.st_mtime_ns) == (record.size, record.mtime_ns) and not content:
            return None
        if now.st_size != record.size:
            return _damaged(path, f"its size is {now.st_size:,} bytes, a clean close left {record.size:,}")
        if file_crc32(graph) != record.crc32:
            return _damaged(path, "its content differs from what the last clean close left (CRC-32)")
        return None
    return probe(path, read_only)


def probe(path: Path, read_only: bool) -> str | None:
    """Open the store in a child process with a time and memory limit; its failure in one line."""
    wal = _wal(path)
    limit = PROBE_SECONDS + (wal.stat().st_size / PROBE_WAL_BYTES_PER_SECOND if wal.exists() else 0.0)
    child = subprocess.Popen(
        [sys.executable, "-I", "-c", _PROBE, str(path / schema.GRAPH_FILE), "1" if read_only else "0",
         str(PROBE_BUFFER_POOL_BYTES)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started, why = time.monotonic(), None
    while child.poll() is None:
        if time.monotonic() - started > limit:
            why = f"Kùzu did not finish opening it within {limit:.0f} s"
        elif _rss(child.pid) > PROBE_MEMORY_BYTES:
            why = f"opening it took more than {PROBE_MEMORY_BYTES >> 20:,} MiB of memory"
        if why:
            child.kill()
            child.wait()
            return _damaged(path, why)
        time.sleep(0.02)
    message = (child.stderr.read() or "").strip()
    child.stderr.close()
    if child.returncode == 0:
        return None
    if child.returncode == _LOCKED:
        raise DatabaseLockedError(
            f"{path} is open in another process; Kùzu allows one process that writes, or any number "
            "that only read. Close the other process and try again.")
    if child.returncode == _FAILED:
        return _damaged(path, f"Kùzu cannot open it ({message.splitlines()[0] if message else 'no message'})")
    return _damaged(path, f"opening it crashed Kùzu ({_signal_name(child.returncode)})")


def read_seal(path: Path) -> Seal | None:
    """The seal of the store at ``path``; None when there is none or it cannot be read."""
    try:
        return Seal(**json.loads((path / schema.SEAL_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def file_crc32(file: Path) -> int:
    """CRC-32 of a whole file, read in large chunks."""
    crc = 0
    with open(file, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def way_back(path: Path) -> str:
    """How to get a sound store again: restore a backup, or load the recorded sources anew."""
    sources = _recorded_sources(path)
    load_again = (f"load its sources again into a new --db ({'; '.join(sources)})" if sources
                  else "load its sources again into a new --db")
    return f"Restore a copy made with `localkg backup`, or {load_again}"


def _damaged(path: Path, why: str) -> str:
    wal = _wal(path)
    files = f"{path / schema.GRAPH_FILE}" + (f" or its write-ahead log {wal.name}" if wal.exists() else "")
    return f"{files} is damaged: {why}. {way_back(path)}"


def _recorded_sources(path: Path) -> list[str]:
    try:
        manifest = json.loads((path / schema.MANIFEST_FILE).read_text(encoding="utf-8"))
        return [line for line in manifest.get("sources", []) if isinstance(line, str)]
    except (OSError, ValueError, AttributeError):
        return []


def _wal(path: Path) -> Path:
    return path / (schema.GRAPH_FILE + ".wal")


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _signal_name(returncode: int) -> str:
    import signal

    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"exit status {returncode}"
