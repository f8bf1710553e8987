"""Reading ahead in a thread: order, errors after the items before them, and stopping early."""
from __future__ import annotations

import gzip
import threading
from pathlib import Path

import pytest

from localkg.errors import LoadError
from localkg.loaders.checkpoint import Position
from localkg.loaders.parallel import iter_chunks
from localkg.loaders.read_ahead import read_ahead


def test_items_come_in_order_and_an_error_after_the_items_before_it():
    def items():
        yield from range(50)
        raise ValueError("damaged")

    seen = []
    with pytest.raises(ValueError, match="damaged"):
        for item in read_ahead(items(), 3):
            seen.append(item)
    assert seen == list(range(50))


def test_closing_early_stops_the_thread_and_closes_the_source():
    closed = threading.Event()

    def items():
        try:
            number = 0
            while True:
                yield number
                number += 1
        finally:
            closed.set()

    def read_ahead_threads() -> set[threading.Thread]:
        return {thread for thread in threading.enumerate() if thread.name == "read-ahead"}

    before = read_ahead_threads()   # an earlier test's reader that the collector has not closed yet
    reader = read_ahead(items(), 2)
    assert [next(reader) for _ in range(3)] == [0, 1, 2]
    assert read_ahead_threads() - before
    reader.close()
    assert closed.is_set()
    assert not read_ahead_threads() - before


def test_a_truncated_gzip_read_ahead_yields_every_whole_line_then_the_load_error(tmp_path: Path):
    lines = [f"<s{n}>\t<p>\t<o{n}>\t.\n".encode() for n in range(20_000)]
    whole = gzip.compress(b"".join(lines))
    damaged = tmp_path / "cut.nt.gz"
    damaged.write_bytes(whole[: len(whole) * 2 // 3])
    direct, ahead = [], []
    with pytest.raises(LoadError) as direct_error:
        for chunk in iter_chunks([damaged], Position(), 4096):
            direct.append(chunk.data)
    with pytest.raises(LoadError) as ahead_error:
        for chunk in read_ahead(iter_chunks([damaged], Position(), 4096), 2):
            ahead.append(chunk.data)
    assert ahead == direct and len(direct) > 10
    assert str(ahead_error.value) == str(direct_error.value)
    assert b"".join(ahead).endswith(b".\n")


def test_a_dump_load_stopped_by_an_error_leaves_no_reader_running(tmp_path: Path):
    """The load closes its reader and parsers on the way out, not when the collector gets to the
    frame that the error's traceback keeps (a program that goes on after a failed load)."""
    from localkg.errors import TooManyRejectsError
    from localkg.loaders.freebase import load_freebase
    from localkg.store import KG

    lines = [f"<http://rdf.freebase.com/ns/m.{n}>\t<http://rdf.freebase.com/ns/film.film.genre>\t"
             f"<http://rdf.freebase.com/ns/m.g{n % 5}>\t.\n" for n in range(20_000)]
    lines[15_000] = "damaged line\n"
    source = tmp_path / "dump.nt"
    source.write_text("".join(lines))
    before = {thread for thread in threading.enumerate() if thread.name == "read-ahead"}
    with KG.create(tmp_path / "db") as kg:
        with pytest.raises(TooManyRejectsError) as stopped:
            load_freebase(kg, [source], workers=0, progress=False, max_rejects=0, chunk_bytes=64 << 10)
        assert stopped.traceback   # the frames stay referenced, as in a caller that keeps the error
        assert not {thread for thread in threading.enumerate() if thread.name == "read-ahead"} - before
