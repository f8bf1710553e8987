"""Fan an evaluation run's questions out to workers: this process, local processes, or Ray actors.

Every pool hands each question to whichever worker is free and yields its predictions line as
soon as it is answered. A worker owns an :class:`~localkg.evaluation.answering.Answerer` (its
own read-only store handle and models) and answers one question at a time, so the parent knows
which question each worker is on: a failure or a dead worker stops the run with an error that
names it. Local workers are started with ``spawn`` (forking a process that has Kùzu, torch or
llama.cpp loaded is unsafe), ignore Ctrl-C (the parent stops them, and they leave through the
normal exit) and exit when the parent dies. A pool outlives one run, so the cells of a grid that
share a store and a model reuse it.
"""
from __future__ import annotations

import dataclasses
import importlib
import multiprocessing
import os
import signal
import threading
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from localkg.errors import LocalKGError, WorkerError
from localkg.evaluation.answering import Answerer
from localkg.reasoners.base import get_reasoner

if TYPE_CHECKING:
    from localkg.datasets import Question
    from localkg.evaluation.config import EvalConfig

Outcome = tuple[str, Any]  # ("ok", predictions line) or ("error", message)
Task = tuple[str, "EvalConfig", "Question | None"]  # (module of the reasoner class, run, question or None: prepare)
OPENING = "opening the store, loading the models and building the reasoner"


def cpu_count() -> int:
    """The cores this process may use (its affinity where the OS tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def threads_per_worker(config: "EvalConfig", workers: int) -> int:
    """``--llm-threads`` when given, else an even share of the cores."""
    return config.llm_threads or max(1, cpu_count() // workers)


def serve_one(answerer: Answerer, task: Task) -> Outcome:
    """Answer one question in a worker; a failure comes back as a message, never as a traceback.

    The task names the module that registers the run's reasoner, which the worker imports first:
    a reasoner registered by the caller's own code (not one of localkg's) is then known there too.
    A task without a question only prepares the run (:meth:`Answerer.prepare`).
    """
    module, config, question = task
    try:
        importlib.import_module(module)
        if question is None:
            return "ok", answerer.prepare(config)
        return "ok", answerer.answer(config, question)
    except LocalKGError as error:
        return "error", str(error)
    except Exception as error:  # noqa: BLE001  (a worker must report, not die, whatever happens)
        return "error", f"{type(error).__name__}: {error}"


def limit_threads(threads: int) -> None:
    """Keep torch (the MiniLM scorer) to the worker's share of the cores."""
    import torch

    torch.set_num_threads(threads)


class Pool:
    """Workers that answer a run's questions; subclasses say how a question reaches a worker."""

    threads: int | None = None  # each worker's CPU share; None: this process as it is

    def answer_all(self, config: "EvalConfig", questions: Iterable["Question"]) -> Iterator[dict[str, Any]]:
        """Predictions lines in the order they finish (once :meth:`prepare` has prepared the run)."""
        config = self._worker_config(config)
        module = get_reasoner(config.reasoner).__module__
        pending = iter(questions)
        busy: dict[int, str] = {}  # what each busy worker is doing

        def feed(worker: int) -> None:
            question = next(pending, None)
            if question is not None:
                self._submit(worker, (module, config, question))
                busy[worker] = f"answering question {question.id} ({question.text[:80]!r})"

        for worker in range(self.size):
            feed(worker)
        while busy:
            worker, (status, value) = self._next_outcome(busy)
            del busy[worker]
            if status != "ok":
                raise WorkerError(value)
            yield value
            feed(worker)

    def _worker_config(self, config: "EvalConfig") -> "EvalConfig":
        """Absolute paths (a worker may run elsewhere) and the worker's llama.cpp threads."""
        def absolute(path: str | None) -> str | None:
            return str(Path(path).resolve()) if path else None

        return dataclasses.replace(config, db=absolute(config.db), model=absolute(config.model),
                                   llm_cache=absolute(config.llm_cache),
                                   llm_threads=config.llm_threads or self.threads)

    @property
    def size(self) -> int:
        raise NotImplementedError

    def prepare(self, config: "EvalConfig") -> dict[str, Any]:
        """Every worker opens the run's store, loads its models and builds its reasoner before the
        first question, so one that cannot stops the run at once (cheap where they are open).
        Returns what the reasoner settled on the store (``uses_record``), the same in every worker."""
        config = self._worker_config(config)
        busy = {worker: OPENING for worker in range(self.size)}
        for worker in busy:
            self._submit(worker, (get_reasoner(config.reasoner).__module__, config, None))
        settled: dict[str, Any] = {}
        while busy:
            worker, (status, value) = self._next_outcome(busy)
            del busy[worker]
            if status != "ok":
                raise WorkerError(f"cannot start the run{f' in worker {worker + 1}' if self.size > 1 else ''}: "
                                  f"{value}")
            settled[f"worker {worker + 1}"] = value
        return agreed_uses(settled)

    def _submit(self, worker: int, task: Task) -> None:
        raise NotImplementedError

    def _next_outcome(self, busy: dict[int, str]) -> tuple[int, Outcome]:
        """Wait for any busy worker; a worker that died raises :class:`WorkerError` saying what it was doing."""
        raise NotImplementedError

    def close(self, abort: bool = False) -> None:
        """Stop the workers; ``abort`` stops them at once, in the middle of a question."""

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        self.close(abort=kind is not None)


class InlinePool(Pool):
    """One worker: this process answers the questions (no start-up cost)."""

    def __init__(self) -> None:
        self._answerer = Answerer()
        self._outcome: Outcome | None = None

    @property
    def size(self) -> int:
        return 1

    def _submit(self, worker: int, task: Task) -> None:
        self._outcome = serve_one(self._answerer, task)

    def _next_outcome(self, busy: dict[int, str]) -> tuple[int, Outcome]:
        outcome, self._outcome = self._outcome, None
        return 0, outcome  # type: ignore[return-value]

    def close(self, abort: bool = False) -> None:
        self._answerer.close()


class ProcessPool(Pool):
    """N worker processes on this machine, each with its own store handle and models."""

    def __init__(self, workers: int, threads: int):
        self.threads = threads
        context = multiprocessing.get_context("spawn")
        self._processes: list[Any] = []
        self._connections: list[Connection] = []
        try:
            for number in range(workers):
                ours, theirs = context.Pipe()
                process = context.Process(target=_serve, args=(theirs, threads), name=f"localkg-eval-{number + 1}",
                                          daemon=True)
                process.start()
                theirs.close()
                self._processes.append(process)
                self._connections.append(ours)
        except BaseException:
            self.close(abort=True)
            raise

    @property
    def size(self) -> int:
        return len(self._processes)

    def _submit(self, worker: int, task: Task) -> None:
        try:
            self._connections[worker].send(task)
        except OSError:  # it died while idle; its sentinel tells the next wait
            pass

    def _next_outcome(self, busy: dict[int, str]) -> tuple[int, Outcome]:
        watched = {self._connections[w]: w for w in busy} | {self._processes[w].sentinel: w for w in busy}
        for ready in sorted(wait(list(watched)), key=lambda r: not isinstance(r, Connection)):  # answers first
            worker = watched[ready]
            if isinstance(ready, Connection):
                try:
                    return worker, ready.recv()
                except (EOFError, OSError):
                    pass
            process = self._processes[worker]
            process.join(5)
            raise WorkerError(f"worker {worker + 1} died (exit code {process.exitcode}) while {busy[worker]}; "
                              "the finished predictions are kept (rerun with --resume)")
        raise AssertionError("wait() returned nothing")

    def close(self, abort: bool = False) -> None:
        for process, connection in zip(self._processes, self._connections):
            if not abort and process.is_alive():
                try:
                    connection.send(None)
                except OSError:
                    pass
        for process in self._processes:
            if abort:
                process.terminate()
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join()
        for connection in self._connections:
            connection.close()
        self._processes, self._connections = [], []


def _serve(connection: Connection, threads: int) -> None:
    """A worker process: answer each task received until told to stop (None) or the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group; the parent decides
    signal.signal(signal.SIGTERM, _exit_cleanly)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), daemon=True).start()
    limit_threads(threads)
    answerer = Answerer()
    try:
        while True:
            try:
                task = connection.recv()
            except EOFError:
                break
            if task is None:
                break
            connection.send(serve_one(answerer, task))
    finally:
        answerer.close()


def _exit_cleanly(signum: int, frame: Any) -> None:
    """The parent's stop (``terminate``): leave through the normal exit, so what the worker made
    is released. A spawned worker's semaphores (tqdm's lock, made while the models load) are
    registered with multiprocessing's resource tracker, which otherwise warns of them as leaked."""
    raise SystemExit(128 + signum)


def _exit_with(parent_sentinel: int) -> None:
    """Workers must not outlive the parent: when it dies (even by SIGKILL), so does this one."""
    wait([parent_sentinel])
    os._exit(1)


def agreed_uses(settled: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What every worker's reasoner settled (by worker), which must be one thing: workers that
    read different checkpoints (another copy on another node) would mix two scorers in one run."""
    (first, uses), *others = settled.items()
    for where, other in others:
        if other != uses:
            raise WorkerError(f"the workers' reasoners did not settle the same: {first} uses {uses}, {where} uses "
                              f"{other}; give every node the same copy of the store's checkpoints")
    return uses
