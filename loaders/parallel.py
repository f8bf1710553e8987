"""The dump-load engine: chunks of lines parsed in worker processes, written in order, checkpointed.

The main process decompresses each file and cuts it into chunks of whole lines (in a thread that
reads ahead: ``read_ahead.py``); ``spawn``ed workers parse chunks into :class:`ColumnBatch`
columns (at most two chunks per worker in flight, so memory stays bounded); the main process
hands them in file order to the store's :class:`GraphWriter` and checkpoints after each batch
(``checkpoint.py``), so ``resume=True`` continues after the last staged batch. A truncated or corrupt compressed file stops the load
with :class:`LoadError` after every complete line before the damage; Ctrl-C keeps what was
staged. docs/loading.md describes the engine in full.

Formats (``freebase.py``, ``wikidata.py``) implement :class:`DumpFormat`: ``parse`` runs in
workers and must be picklable; ``absorb`` and ``finish`` run in the main process.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from collections import Counter, deque
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from localkg.errors import LoadError
from localkg.loaders.checkpoint import Checkpoint, CheckpointStore, Position, load_identity, load_key
from localkg.loaders.memory import arrow_uses_system_allocator, return_free_memory
from localkg.loaders.read_ahead import read_ahead
from localkg.loaders.rejects import RERUN_DUMP, RejectLog
from localkg.loaders.report import LoadReport
from localkg.loaders.sources import compressed_position, open_binary
from localkg.store.batch import ColumnBatch, FactBatch
from localkg.store.crashpoints import crash_point
from localkg.store.pool import buffer_pool_errors

CHUNK_BYTES = 16 << 20
BATCH_BYTES = 64 << 20
READ_BYTES = 1 << 16
IN_FLIGHT_PER_WORKER = 2
READ_AHEAD_CHUNKS = 2  # chunks decompressed ahead in a thread while the main process stages
_DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, ValueError)
_PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)


@dataclass
class Chunk:
    """Whole lines of one file, with where they start and end (``data`` is empty once dispatched)."""

    file: int
    number: int
    first_line: int
    data: bytes
    end_offset: int
    end_line: int
    compressed: int
    size: int = 0


@dataclass
class ChunkResult:
    """What a worker made of one chunk (``parse`` fills a :class:`FactBatch` or makes a
    :class:`ColumnBatch`; :func:`parse_chunk` hands the writer columns)."""

    batch: FactBatch | ColumnBatch
    lines: int = 0
    attributes: int = 0
    filtered: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    details: Counter = field(default_factory=Counter)
    rejects: list[tuple[int, str, str | bytes]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)

    def reject(self, line_number: int, reason: str, raw: str | bytes) -> None:
        self.rejects.append((line_number, reason, raw))


class DumpFormat:
    """A dump format: how to cut, parse and finish. Subclasses are picklable dataclasses."""

    name = "dump"

    def options(self) -> dict[str, Any]:
        """The options that make two loads the same load (saved with the checkpoint)."""
        raise NotImplementedError

    def cut(self, data: bytearray, limit: int) -> int:
        """Where a chunk ends in ``data``, at most ``limit`` bytes in (0: no whole line there)."""
        return cut_after_last_line(data, limit)

    def parse(self, chunk: Chunk) -> ChunkResult:
        raise NotImplementedError

    def absorb(self, result: ChunkResult, state: dict[str, Any]) -> bool:
        """Fold a chunk's format state into the load's (main process); True if it changed."""
        return False

    def finish(self, kg: Any, writer: Any, state: dict[str, Any]) -> dict[str, int]:
        """Work that needs the whole input (main process, after the last chunk); returns details."""
        return {}


def split_lines(chunk: Chunk, result: ChunkResult, decode: bool = True) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, line)`` for the chunk's usable lines; count them; reject blank lines
    and (with ``decode``) invalid UTF-8. Lines come without their line break."""
    data = chunk.data
    count = count_lines(data)
    result.lines += count
    number = chunk.first_line
    raw_lines: list[bytes] = []
    if not decode:
        lines: list[Any] = data.split(b"\n")
    else:
        try:  # one decode of the chunk; the bytes are split only to find a damaged line
            lines = data.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            raw_lines = data.split(b"\n")
            lines = [_decode_or_none(raw) for raw in raw_lines]
    for index in range(count):
        line = lines[index]
        if line is None:
            result.reject(number + index, "invalid UTF-8", raw_lines[index])
            continue
        if line[-1:] in ("\r", b"\r"):
            line = line[:-1]
        if not line:
            result.reject(number + index, "blank line", "")
            continue
        yield number + index, line


def count_lines(data: bytes) -> int:
    """Lines in ``data``, the last one counted whether or not a line break ends it.

    >>> count_lines(b"a\\nb\\n"), count_lines(b"a\\nb"), count_lines(b"")
    (2, 2, 0)
    """
    return data.count(b"\n") + (len(data) > 0 and not data.endswith(b"\n"))


def lang_rank(langs: Sequence[str], lang: str) -> int | None:
    """Where a language tag stands in ``langs``: 0 for the first language, 1 for its regional
    variants (``en-gb`` for ``en``), 2 for the second language …; None when it is not wanted."""
    lang = lang.lower()
    for position, wanted in enumerate(langs):
        if lang == wanted:
            return 2 * position
        if lang.startswith(wanted + "-"):
            return 2 * position + 1
    return None


def _decode_or_none(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


# ---------------------------------------------------------------- reading
def cut_after_last_line(data: bytearray, limit: int) -> int:
    """End a chunk after the last newline within ``limit`` bytes (0: none there)."""
    return data.rfind(b"\n", 0, limit) + 1


def iter_chunks(paths: Sequence[Path], start: Position, chunk_bytes: int,
                cut: Callable[[bytearray, int], int] = cut_after_last_line) -> Iterator[Chunk]:
    """Whole-line chunks of about ``chunk_bytes`` from ``start``; damage raises LoadError after the
    lines before it."""
    done_compressed = sum(Path(p).stat().st_size for p in paths[:start.file])
    number = start.chunk
    for index in range(start.file, len(paths)):
        path = Path(paths[index])
        offset, line = (start.offset, start.line) if index == start.file else (0, 0)
        buffer = bytearray()
        eof = False
        with open_binary(path) as handle:
            try:
                if offset:
                    handle.seek(offset)
                read = getattr(handle, "read1", handle.read)  # small reads: damage loses at most one
                while not eof:
                    piece = read(READ_BYTES)
                    eof = not piece
                    buffer += piece
                    while buffer and (eof or len(buffer) >= chunk_bytes):
                        if eof and len(buffer) <= chunk_bytes:
                            end = len(buffer)
                        else:
                            end = cut(buffer, chunk_bytes) or buffer.find(b"\n", chunk_bytes) + 1
                            if not end:  # one line longer than a chunk: read on, or take the rest at the end
                                if not eof:
                                    break
                                end = len(buffer)
                        data = bytes(buffer[:end])
                        del buffer[:end]
                        lines = count_lines(data)
                        yield Chunk(index, number, line + 1, data, offset + end, line + lines,
                                    done_compressed + compressed_position(handle), end)
                        number, offset, line = number + 1, offset + end, line + lines
            except _DECOMPRESSION_ERRORS as error:
                end = buffer.rfind(b"\n") + 1
                if end:
                    data = bytes(buffer[:end])
                    lines = count_lines(data)
                    yield Chunk(index, number, line + 1, data, offset + end, line + lines,
                                done_compressed + compressed_position(handle), end)
                    line += lines
                raise LoadError(f"{path}: the file is truncated or corrupt after line {line} ({error}); "
                                "every complete line before it was loaded") from None
        done_compressed += path.stat().st_size


# ---------------------------------------------------------------- parsing in workers
_WORKER_FORMAT: DumpFormat | None = None


def _start_worker(fmt: DumpFormat, parent: int) -> None:
    global _WORKER_FORMAT
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process handles Ctrl-C and stops the pool
    arrow_uses_system_allocator()
    _WORKER_FORMAT = fmt


def die_with_parent(parent: int) -> None:
    """Make this worker process end when ``parent`` does, however it ends (kill -9 included).

    A worker blocks on its pool's pipe, whose writing end the other workers hold too, so a
    parent killed without shutting the pool down left them (and multiprocessing's resource
    tracker, which waits for them) alive indefinitely. On Linux the kernel sends SIGKILL on the
    parent's death (``PR_SET_PDEATHSIG``); elsewhere a thread polls the parent.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)
        return
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def parse_chunk(fmt: DumpFormat, chunk: Chunk) -> ChunkResult:
    """Parse ``chunk`` and turn its batch into columns (if ``parse`` did not make columns itself),
    so the per-row work stays off the writer."""
    result = fmt.parse(chunk)
    if isinstance(result.batch, FactBatch):
        result.batch = result.batch.columns()
    return result


def _parse_in_worker(chunk: Chunk) -> ChunkResult:
    assert _WORKER_FORMAT is not None
    return_free_memory()  # what the previous chunk's parse freed
    return parse_chunk(_WORKER_FORMAT, chunk)


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def parse_in_order(fmt: DumpFormat, chunks: Iterator[Chunk], workers: int) -> Iterator[tuple[Chunk, ChunkResult]]:
    """Parse chunks (in ``workers`` processes, or here when 0) and yield results in input order.

    A LoadError from reading is raised only after the chunks read before it have been yielded.
    A worker that dies (or cannot start, e.g. a script without ``if __name__ == "__main__"``)
    raises ``BrokenProcessPool`` instead of hanging.
    """
    if workers <= 0:
        for chunk in chunks:
            yield replace(chunk, data=b""), parse_chunk(fmt, chunk)
        return
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker, initargs=(fmt, os.getpid()))
    pending: deque = deque()
    failure: LoadError | None = None
    try:
        try:
            for chunk in chunks:
                pending.append((replace(chunk, data=b""), pool.submit(_parse_in_worker, chunk)))
                del chunk
                if len(pending) >= IN_FLIGHT_PER_WORKER * workers:
                    meta, job = pending.popleft()
                    yield meta, job.result()
        except LoadError as error:
            failure = error
        while pending:
            meta, job = pending.popleft()
            yield meta, job.result()
        if failure is not None:
            raise failure
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------- the load
#: The way out of a write that overflows Kùzu's buffer pool (``localkg.store.pool``) in a dump load:
#: the failed flush is rolled back whole and its staged batches stay on disk, so the load resumes
#: after its last checkpoint.
RESUME_WITH_A_LARGER_POOL = ("run the same command again with --resume and a larger --buffer-pool-mb: the load "
                             "continues after its last checkpoint")


def load_dump(kg: Any, paths: Sequence[str | Path], fmt: DumpFormat, *, resume: bool = False,
              workers: int | None = None, max_rejects: int | None = None, progress: bool = True,
              chunk_bytes: int | None = None, batch_bytes: int | None = None) -> LoadReport:
    """Load dump files into ``kg`` with ``fmt``; see the module docstring.

    ``chunk_bytes`` of text is the unit a worker parses; ``batch_bytes`` (several chunks) is the
    unit staged and checkpointed (its columns are held in memory until then).
    """
    from tqdm import tqdm

    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.is_file():
            raise LoadError(f"cannot read {path}: no such file")
    started = time.perf_counter()
    store = CheckpointStore(kg.path, fmt.name)
    identity = load_identity(paths, fmt.options())
    checkpoint = store.resume_from(identity) if resume else None
    if checkpoint is None:
        checkpoint = Checkpoint(fmt.name, identity)
        report = LoadReport(fmt.name, [str(p) for p in paths])
    else:
        report = LoadReport.from_json(checkpoint.report) if checkpoint.report else LoadReport(
            fmt.name, [str(p) for p in paths])
        report.resumed = True
        if checkpoint.complete:
            report.seconds = 0.0
            return report
    changed_before = report.facts_loaded > 0 or report.nodes_added > 0
    workers = default_workers() if workers is None else max(0, int(workers))
    rejects = RejectLog(kg.path, max_rejects, counted=report.rejected, how_to_go_on=RERUN_DUMP)
    done = checkpoint.position
    if done != Position():
        rejects.written_through(report.facts_loaded, str(paths[done.file]), done.line)
    total = sum(p.stat().st_size for p in paths)
    bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=f"load {fmt.name}",
               disable=not progress, smoothing=0.1)
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    batch_bytes = max(batch_bytes or BATCH_BYTES, chunk_bytes)
    lines_here = 0
    try:
        with buffer_pool_errors(RESUME_WITH_A_LARGER_POOL), kg.writer() as writer:
            key = load_key(identity)
            report.add_recovered(writer.recovered, key, (done.file, done.line))
            parts: list[ColumnBatch] = []
            parsed: list[tuple[Chunk, ChunkResult]] = []
            state_changed = False

            def write_batch() -> None:
                """Stage the gathered chunks and record the checkpoint, then flush if enough has
                gathered (so a crash in the flush resumes after this batch, which it finds staged)."""
                nonlocal parts, parsed, state_changed, lines_here
                meta = parsed[-1][0]
                origin = {"load": key, "through": [meta.file, meta.end_line]}
                report.add_written(writer.stage(ColumnBatch.concat(parts), origin))
                for _, result in parsed:
                    report.add_parsed(result)
                    lines_here += result.lines
                rejects.flush()
                checkpoint.position = Position(meta.file, meta.end_offset, meta.end_line, meta.number + 1)
                checkpoint.report = report.to_json()
                store.save(checkpoint, state_changed)
                crash_point("checkpointed")
                rejects.written_through(report.facts_loaded, str(paths[meta.file]), meta.end_line)
                parts, parsed, state_changed = [], [], False
                writer.flush_when_full()
                return_free_memory()
                bar.update(max(0, meta.compressed - bar.n))
                elapsed = time.perf_counter() - started
                bar.set_postfix_str(f"{report.lines_read:,} lines, {lines_here / max(elapsed, 1e-9):,.0f} lines/s",
                                    refresh=False)

            damaged: LoadError | None = None
            # closed on the way out, also when an error stops the load: the parsers' pool shuts down
            # and the read-ahead thread stops with its file, even while a traceback keeps this frame
            with closing(read_ahead(iter_chunks(paths, checkpoint.position, chunk_bytes, fmt.cut),
                                    READ_AHEAD_CHUNKS)) as chunks, \
                    closing(parse_in_order(fmt, chunks, workers)) as results:
                while True:
                    try:
                        meta, result = next(results)
                    except StopIteration:
                        break
                    except LoadError as error:  # a damaged file: load what was read before the damage
                        damaged = error
                        break
                    crash_point("parsed")
                    for number, reason, raw in result.rejects:  # past --max-rejects: stops before the batch is staged
                        rejects.reject(str(paths[meta.file]), number, reason, raw)
                    state_changed = fmt.absorb(result, checkpoint.state) or state_changed
                    parts.append(result.batch)
                    result.batch = FactBatch()
                    parsed.append((meta, result))
                    if sum(m.size for m, _ in parsed) >= batch_bytes:
                        write_batch()
            if parsed:
                write_batch()
            writer.flush()
            if damaged is not None:
                raise damaged
            bar.set_postfix_str(f"{report.lines_read:,} lines; applying updates of stored nodes", refresh=True)
            writer.apply_updates()  # finish reads node attributes
            report.details.update(fmt.finish(kg, writer, checkpoint.state))
            changed_here = writer.totals.facts_added or writer.totals.nodes_added or writer.totals.nodes_updated
        if not changed_here and (changed_before or report.details.get("cvt_nodes_marked")):
            kg.update_manifest(generation=kg.generation + 1)  # a killed earlier run never bumped it
        report.complete = True
        checkpoint.complete = True
    finally:
        rejects.close()
        bar.close()
        report.seconds = round(time.perf_counter() - started, 3)
        report.rejects_file = str(rejects.path) if report.rejected else ""
        checkpoint.report = report.to_json()
        if checkpoint.complete:
            store.save(checkpoint, False)
    return report
