"""How Kùzu's buffer pool bounds the write path, and what a write that overflows it says.

A ``COPY`` needs pool memory for what it copies, and an update of stored nodes for the range of
nodes it matches, so the writer sizes its flushes and its update ranges to the pool
(:func:`flush_rows_for_pool`, :func:`update_span_for_pool`). A write transaction also needs
memory that grows with the tables it writes into, so a pool that holds the first flushes of a
load may not hold the last. Kùzu then fails with "buffer pool is full" and rolls the
transaction back whole; the staged batches stay on disk for the next writer. Every writer action
turns that failure into :class:`BufferPoolFullError` (:func:`buffer_pool_errors`), for the CLI
and for a program that writes through ``KG.writer()`` alike. (Retrying in smaller writes on the
same connection is not an option: kuzu 0.11.3 aborts the process on the next rollback.)
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from localkg.errors import BufferPoolFullError

POOL_BYTES_PER_FLUSHED_ROW = 256
POOL_BYTES_PER_UPDATED_NUMBER = 1024
KUZU_POOL_FULL = "buffer pool is full"  # Kùzu's words for it
WRITE_AGAIN = ("open the store with a larger buffer pool and write again: the next writer first flushes what "
               "this one staged (`localkg check --db DB --repair --buffer-pool-mb N` does just that)")


def flush_rows_for_pool(buffer_pool_bytes: int) -> int:
    """How many staged nodes and facts one flush may copy with this Kùzu buffer pool.

    A ``COPY`` needs buffer-pool memory for what it copies: with a 256 MiB pool a flush of 1.1M
    rows of a Freebase dump fits, one of 4M rows does not ("buffer pool is full").

    >>> flush_rows_for_pool(1 << 30)  # the dump loads' default pool
    4194304
    """
    return max(1, buffer_pool_bytes // POOL_BYTES_PER_FLUSHED_ROW)


def update_span_for_pool(buffer_pool_bytes: int) -> int:
    """How many sequence numbers one transaction of updates of stored nodes may cover with this
    Kùzu buffer pool.

    Matched within a range of numbers, an update builds a hash table over the range's nodes and
    holds the node groups it changes until the checkpoint: about 250 bytes of pool per number on
    a 5.1M-node store (a range of 1M numbers: +254 MB); a quarter of that leaves room.

    >>> update_span_for_pool(1 << 30)  # the dump loads' default pool
    1048576
    """
    return max(1, buffer_pool_bytes // POOL_BYTES_PER_UPDATED_NUMBER)


@contextmanager
def buffer_pool_errors(way_out: str = WRITE_AGAIN) -> Iterator[None]:
    """Kùzu's "buffer pool is full" inside the block as :class:`BufferPoolFullError`, whose
    message names ``way_out``; a caller that knows a better way out (a load that resumes) wraps
    the writer's actions in its own, which restates the error with it.

    >>> with buffer_pool_errors("try a larger one"):
    ...     raise RuntimeError("Buffer manager exception: Unable to allocate memory! The buffer pool is full!")
    Traceback (most recent call last):
    ...
    localkg.errors.BufferPoolFullError: Kùzu's buffer pool is too small for this write; try a larger one
    """
    try:
        yield
    except BufferPoolFullError:
        raise BufferPoolFullError(_too_small(way_out)) from None
    except RuntimeError as error:
        if KUZU_POOL_FULL not in str(error):
            raise
        raise BufferPoolFullError(_too_small(way_out)) from None


def _too_small(way_out: str) -> str:
    return f"Kùzu's buffer pool is too small for this write; {way_out}"
