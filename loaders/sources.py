"""Opening input files: plain, gzip or bzip2, with one-line errors for bad files.

Compression is detected from the file's magic bytes, not its name, so a
misnamed file still loads. A truncated or corrupt compressed stream raises
:class:`LoadError` naming the file and how far it got.
"""
from __future__ import annotations

import bz2
import gzip
import io
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator

from localkg.errors import LoadError

_GZIP = b"\x1f\x8b"
_BZIP2 = b"BZh"
POSITION_EVERY = 1024


def open_binary(path: str | Path) -> BinaryIO:
    """Open ``path`` for reading bytes, decompressing gzip or bzip2 transparently."""
    path = Path(path)
    try:
        raw = open(path, "rb")
    except OSError as error:
        raise LoadError(f"cannot read {path}: {error.strerror or error}") from None
    magic = raw.read(3)
    raw.seek(0)
    if magic[:2] == _GZIP:
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if magic == _BZIP2:
        return bz2.BZ2File(raw)  # type: ignore[return-value]
    return raw


def iter_lines(path: str | Path, start_line: int = 0) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_bytes)`` from line 1, skipping lines before ``start_line``.

    Decompression errors (a truncated ``.gz``, a damaged block) become :class:`LoadError`
    after every complete line before the damage has been yielded.
    """
    for number, line, _ in iter_lines_with_position(path, start_line):
        yield number, line


def iter_lines_with_position(path: str | Path, start_line: int = 0) -> Iterator[tuple[int, bytes, int]]:
    """:func:`iter_lines` with the bytes read so far of the file itself (compressed, for a
    compressed file: what a progress bar over the file's size counts), updated every
    :data:`POSITION_EVERY` lines."""
    path = Path(path)
    number = position = 0
    handle = open_binary(path)
    try:
        with handle:
            for number, line in enumerate(handle, start=1):
                if number % POSITION_EVERY == 0:
                    position = compressed_position(handle)
                if number > start_line:
                    yield number, line, position
    except (EOFError, OSError, zlib.error, ValueError) as error:
        raise LoadError(f"{path}: the file is truncated or corrupt after line {number} ({error})") from None


def compressed_position(handle: BinaryIO) -> int:
    """Bytes consumed from the underlying (compressed) file, for progress and ETA."""
    inner = getattr(handle, "fileobj", None) or getattr(handle, "_fp", None) or handle
    try:
        return inner.tell()
    except (OSError, ValueError, io.UnsupportedOperation):
        return 0
