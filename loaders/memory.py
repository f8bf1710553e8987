"""Keeping a long load's resident memory down where the C allocator is glibc's.

Kùzu runs each ``COPY`` on a pool of threads, and glibc gives every thread its
own malloc arena; memory freed in one arena is not reused by another and is
rarely returned to the system, so the writer's resident size climbs with
every write. Two standard glibc controls bound that: at most
:data:`ARENAS` arenas for the process (``mallopt(M_ARENA_MAX)``, which must
run before the database starts its threads), and ``malloc_trim(0)`` after
each write, which hands the free heap pages back. Both are no-ops where the C
library is not glibc. Arrow's default allocator (mimalloc) keeps what the
writer's tables freed; the system allocator hands it back at the same trim.
:func:`open_for_loading` sets both up and opens the store, for `localkg load`
and for a program that loads alike. The effect is in docs/architecture.md
(the write path).
"""
from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localkg.store.kg import KG

ARENAS = 2
_M_ARENA_MAX = -8  # glibc's malloc.h


@lru_cache(maxsize=1)
def _glibc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt, libc.malloc_trim  # glibc has both; musl and macOS's libc do not
    except (OSError, AttributeError):
        return None
    return libc


def limit_allocator_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas for this process (call before opening the database); True if set."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(_M_ARENA_MAX, arenas))


def arrow_uses_system_allocator() -> None:
    """Make Arrow allocate with the C library's malloc, so freed tables are trimmed with the rest."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def return_free_memory() -> None:
    """Give the allocator's free pages back to the system (after a write)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def open_for_loading(path: str | Path, buffer_pool_bytes: int) -> "KG":
    """The store at ``path`` (made when missing), opened for a bulk load with the load's own
    buffer pool: malloc arenas capped before Kùzu starts its threads, and Arrow on the system
    allocator, so that :func:`return_free_memory` after each write hands the freed memory back."""
    from localkg.store.kg import KG

    limit_allocator_arenas()
    arrow_uses_system_allocator()
    return KG.open(path, create=True, buffer_pool_bytes=buffer_pool_bytes)
