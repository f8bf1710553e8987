"""How Kùzu's buffer pool bounds the write path.

A ``COPY`` needs pool memory for what it copies, and an update of stored nodes for the range of
nodes it matches, so the writer sizes its flushes and its update ranges to the pool
(:func:`flush_rows_for_pool`, :func:`update_span_for_pool`).
"""
from __future__ import annotations

POOL_BYTES_PER_FLUSHED_ROW = 256
POOL_BYTES_PER_UPDATED_NUMBER = 1024


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
