"""``localkg backup``: a consistent copy of a store, made while readers may have it open.

The copy is taken with the store open read-only, which Kùzu's file lock keeps every writer out of
while readers go on; so the files copied are the ones one clean state left. The copy gets its own
seal, whose CRC must equal the original's: a copy that differs from what it copied is refused.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from localkg.errors import BackupError
from localkg.store import schema, seal
from localkg.store.kg import KG


@dataclass(frozen=True)
class BackupReport:
    """What a backup copied."""

    source: Path
    target: Path
    files: int
    bytes: int


def backup_store(path: str | Path, out: str | Path) -> BackupReport:
    """Copy the store at ``path`` to the new directory ``out`` (which must not exist yet)."""
    path, out = Path(path), Path(out)
    if out.exists():
        raise BackupError(f"{out} already exists; name a new directory for the backup")
    if not out.parent.is_dir():
        raise BackupError(f"{out.parent} is not a directory; the backup goes into a new directory inside one")
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with KG.open(path, read_only=True):  # verifies the file, and keeps writers out while it is copied
        shutil.copytree(path, partial)
        original = seal.read_seal(path)
    (partial / schema.SEAL_FILE).unlink(missing_ok=True)
    seal.seal(partial)
    copied = seal.read_seal(partial)
    if original is not None and copied is not None and copied.crc32 != original.crc32:
        shutil.rmtree(partial)
        raise BackupError(f"the copy of {path / schema.GRAPH_FILE} differs from the original; nothing was kept")
    partial.rename(out)
    files = [file for file in out.rglob("*") if file.is_file()]
    return BackupReport(path, out, len(files), sum(file.stat().st_size for file in files))
