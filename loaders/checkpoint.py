"""Resume state of a dump load: where the last committed chunk ended.

A full Freebase or Wikidata load runs for hours; a crash, a reboot or Ctrl-C
must not mean starting over. After every chunk that the writer has
committed, the loader saves ``DB/checkpoints/<format>.json`` atomically
(write, fsync, rename): which file, how many decompressed bytes and lines of
it are done, the chunk number, the report so far and small format state
(Freebase's schema names). ``--resume`` reopens the files, skips what is
done and goes on. If the process dies between a commit and the save, the
resumed load repeats one chunk and the writer's dedupe drops what it had
already added, so nothing is duplicated.

A checkpoint belongs to one load: the same files in the same order with the
same options. Each file is recognised by its resolved path and a fingerprint
of its first decompressed bytes, not by size or time, so a truncated
download that has been replaced by the complete file can still be resumed.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from localkg.errors import ResumeError
from localkg.loaders.sources import open_binary
from localkg.store import schema

FINGERPRINT_BYTES = 1 << 16


@dataclass
class Position:
    """How far a load got: files before ``file`` are done, and ``offset`` bytes / ``line`` lines of it."""

    file: int = 0
    offset: int = 0
    line: int = 0
    chunk: int = 0


@dataclass
class Checkpoint:
    """The saved state of one load (see the module docstring)."""

    format: str
    identity: dict[str, Any]
    position: Position = field(default_factory=Position)
    report: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    complete: bool = False


def load_identity(paths: Sequence[Path], options: dict[str, Any]) -> dict[str, Any]:
    """What makes two loads the same load: the files (path and content fingerprint) and the options."""
    return {"files": [{"path": str(Path(p).resolve()), "fingerprint": fingerprint(Path(p))} for p in paths],
            "options": options}


def load_key(identity: Any) -> str:
    """A short name for one load (its identity as JSON, digested), which its staged writes carry
    as their origin (``LoadReport.add_recovered``)."""
    return hashlib.blake2b(json.dumps(identity, sort_keys=True).encode(), digest_size=8).hexdigest()


def fingerprint(path: Path) -> str:
    """BLAKE2b of the first 64 KiB of decompressed content (stable across recompression and appends)."""
    with open_binary(path) as handle:
        try:
            head = handle.read(FINGERPRINT_BYTES)
        except (EOFError, OSError, ValueError):
            head = b""
    return hashlib.blake2b(head, digest_size=16).hexdigest()


class CheckpointStore:
    """Reads and atomically writes the checkpoint of one load format in a database directory."""

    def __init__(self, db_path: Path, format: str):
        self.directory = Path(db_path) / schema.CHECKPOINTS_DIR
        self.path = self.directory / f"{format}.json"
        self.state_path = self.directory / f"{format}.state.json"
        self.format = format

    def read(self) -> Checkpoint | None:
        if not self.path.exists():
            return None
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            state = json.loads(self.state_path.read_text(encoding="utf-8")) if self.state_path.exists() else {}
            return Checkpoint(data["format"], data["identity"], Position(**data["position"]), data["report"],
                              state, data["complete"])
        except (ValueError, KeyError, TypeError) as error:
            raise ResumeError(f"the checkpoint {self.path} is unreadable ({error}); load without --resume") from None

    def resume_from(self, identity: dict[str, Any]) -> Checkpoint | None:
        """The checkpoint to continue, None when there is none; refuse one that belongs to another load."""
        checkpoint = self.read()
        if checkpoint is None:
            return None
        if checkpoint.identity != identity:
            return self._mismatch(checkpoint, identity)
        return checkpoint

    def _mismatch(self, checkpoint: Checkpoint, identity: dict[str, Any]) -> None:
        saved_files = [f["path"] for f in checkpoint.identity.get("files", [])]
        files = [f["path"] for f in identity["files"]]
        if saved_files != files:
            why = f"it is for {', '.join(saved_files)}"
        elif checkpoint.identity.get("options") != identity["options"]:
            why = f"it was made with other options ({checkpoint.identity.get('options')})"
        else:
            why = "the beginning of a file has changed since"
        raise ResumeError(f"cannot resume from {self.path}: {why}. Load without --resume to start over "
                          "(already loaded facts are not duplicated).")

    def save(self, checkpoint: Checkpoint, state_changed: bool = True) -> None:
        """Save after a commit. The format state (which can be megabytes of schema names, and
        changes rarely) goes to its own file, rewritten only when it changed, before the position."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if state_changed or not self.state_path.exists():
            _write_atomically(self.state_path, checkpoint.state)
        data = asdict(checkpoint)
        del data["state"]
        _write_atomically(self.path, data)


def _write_atomically(path: Path, value: Any) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(value, handle, ensure_ascii=False)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
