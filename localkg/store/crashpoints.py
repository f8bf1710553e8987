"""Named points where a fault-injection test kills the writing process, as a kill -9 would.

The reliability tests must stop a real load at every stage (parse, stage, each flush step, the
end-of-load passes) and show that the next run recovers; monkeypatching a child's internals ties
them to private names, and a signal from outside cannot hit a stage. So the writer and the dump
loaders call :func:`crash_point` at each stage, and ``LOCALKG_CRASH_AT=name`` (or ``name:n``, the
n-th time) makes the process SIGKILL itself there. Unset, a call is one environment lookup.
"""
from __future__ import annotations

import os
import signal

ENV = "LOCALKG_CRASH_AT"
_passes: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Die here (SIGKILL) when :data:`ENV` names this point and this is the pass it counts."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    point, _, nth = wanted.partition(":")
    if point != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
