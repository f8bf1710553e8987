"""Reading ahead: the next items of an iterator made in a background thread while the caller works.

A dump load's main process both decompresses the input into chunks (``parallel.iter_chunks``) and
stages what the workers parsed. zlib and bz2 release the GIL while they decompress, so a thread
that reads the next chunks overlaps the decompression with staging instead of taking turns with it.
"""
from __future__ import annotations

import queue
import threading
from typing import Iterator, TypeVar

T = TypeVar("T")
_END = object()
_POLL_SECONDS = 0.1


def read_ahead(items: Iterator[T], depth: int) -> Iterator[T]:
    """Yield ``items`` in order, with up to ``depth`` of them made ahead in a thread.

    An exception the iterator raises is raised here, after the items made before it. Closing
    this generator early (an error or Ctrl-C in the caller) stops the thread and closes ``items``,
    so a file it holds open is closed too.

    >>> list(read_ahead(iter(range(5)), 2))
    [0, 1, 2, 3, 4]
    """
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if not _put(ready, (item, None), stop):
                    return
            _put(ready, (_END, None), stop)
        except BaseException as error:  # handed to the consumer, which raises it in its thread
            _put(ready, (_END, error), stop)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, error = ready.get()
            if item is _END:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        thread.join()


def _put(ready: queue.Queue, entry: tuple, stop: threading.Event) -> bool:
    """Put ``entry`` once there is room; False if the consumer stopped first."""
    while not stop.is_set():
        try:
            ready.put(entry, timeout=_POLL_SECONDS)
            return True
        except queue.Full:
            continue
    return False
