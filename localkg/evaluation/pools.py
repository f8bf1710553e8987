"""Which pool answers a run's questions: inline, local worker processes, or Ray actors.

Apart from ``workers`` (the local processes) and ``ray_runner`` (the actors), so that neither
of them imports the other: both build on ``workers.Pool`` and only this module chooses.
"""
from __future__ import annotations

from localkg.errors import EvaluationError
from localkg.evaluation.config import EvalConfig
from localkg.evaluation.workers import InlinePool, Pool, ProcessPool, cpu_count, threads_per_worker


def resolve_workers(value: str) -> int | None:
    """``--workers``: a positive number, or ``auto`` (None: decided from the cores and threads)."""
    if value == "auto":
        return None
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise EvaluationError(f"--workers takes a positive number or auto, not {value!r}")


def open_pool(config: EvalConfig) -> Pool:
    """The pool ``config.workers`` and ``config.ray`` ask for (workers None: ``auto``)."""
    if config.ray is not None:
        from localkg.evaluation.ray_runner import RayPool

        return RayPool(config.ray, config.workers, config.llm_threads or 1)
    workers = config.workers or max(1, cpu_count() // (config.llm_threads or 1))
    if workers == 1:
        return InlinePool()
    return ProcessPool(workers, threads_per_worker(config, workers))

