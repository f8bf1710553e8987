"""The evaluation workers as Ray actors: ``localkg eval ... --ray [ADDRESS]``.

Each actor holds one :class:`~localkg.evaluation.answering.Answerer` (one read-only store
handle, one model) and reserves its CPU share (``--llm-threads``, default 1). ``local`` starts a
Ray runtime on this machine for the run, its dashboard off and every port bound to the
loopback address; ``auto`` or ``ray://HOST:PORT`` joins a cluster the user started. Nothing
but questions and predictions lines travels: each node opens the store and the model from its
own disk, at the path the driver names, so that path must hold them on every node (a shared
filesystem, or a copy). Ray is an optional dependency (``pip install 'localkg[ray]'``).
"""
from __future__ import annotations

import logging
import os
import re
import socket
import sys
import tempfile
from typing import TYPE_CHECKING, Any

from localkg.errors import DatabaseNotFoundError, EvaluationError, LocalKGError, ModelNotFoundError, WorkerError
from localkg.evaluation.answering import Answerer
from localkg.evaluation.workers import Outcome, Pool, Task, agreed_uses, cpu_count, limit_threads, serve_one

if TYPE_CHECKING:
    from localkg.evaluation.config import EvalConfig

log = logging.getLogger(__name__)

LOCAL = "local"
# Read when Ray is imported: with it off, a local runtime takes 127.0.0.1 as its node address
# and binds every server to it instead of the machine's routable address.
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def check_address(address: str) -> str:
    """``local``, ``auto``, ``ray://HOST:PORT`` or ``HOST:PORT``; anything else is refused."""
    if address in (LOCAL, "auto") or re.fullmatch(r"(ray://)?[\w.\-]+:\d+", address):
        return address
    raise EvaluationError(f"--ray takes local, auto, ray://HOST:PORT or HOST:PORT, not {address!r}")


def _ray(address: str) -> Any:
    if address == LOCAL:
        if "ray" in sys.modules and os.environ.get(LOOPBACK_ONLY) != "0":
            log.warning("Ray was imported before localkg started its local runtime, so the runtime listens on "
                        "this machine's network address, not only on 127.0.0.1 (set %s=0 before importing Ray)",
                        LOOPBACK_ONLY)
        os.environ.setdefault(LOOPBACK_ONLY, "0")
    try:
        import ray
    except ImportError:
        raise EvaluationError("--ray needs Ray: pip install 'localkg[ray]'") from None
    return ray


class _Worker:
    """One Ray actor: a worker of :mod:`localkg.evaluation.workers` on some node."""

    def __init__(self, threads: int):
        limit_threads(threads)
        self.answerer = Answerer()

    def prepare(self, config: "EvalConfig") -> tuple[str, dict[str, Any] | None, str | None]:
        """This node's name, what the run's reasoner settled here, and why this node cannot serve
        the run (one line, None when it can)."""
        import ray

        node = f"{socket.gethostname()} ({ray.util.get_node_ip_address()})"
        try:
            return node, self.answerer.prepare(config), None
        except Exception as error:  # noqa: BLE001  (reported to the driver with the node's name)
            return node, None, node_problem(node, config, error)

    def answer(self, task: Task) -> Outcome:
        return serve_one(self.answerer, task)


def node_problem(node: str, config: "EvalConfig", error: Exception) -> str:
    """Why ``node`` cannot serve the run, in one line that points at the likely cause: localkg is
    not installed there as it is here, or the store or model is not at the path named."""
    if isinstance(error, ImportError):
        return (f"node {node} cannot import localkg: {type(error).__name__}: {error}. Every node needs localkg "
                "installed, the same version, with [ray] (docs/evaluation.md)")
    if isinstance(error, (DatabaseNotFoundError, ModelNotFoundError, FileNotFoundError)):
        return (f"node {node} cannot open what the run needs (store {config.db}): {error}. Every node must "
                "read the store and the model at the same path as this machine: a shared filesystem, or a copy "
                "there (docs/evaluation.md)")
    cause = str(error) if isinstance(error, LocalKGError) else f"{type(error).__name__}: {error}"
    return f"node {node} cannot start the run: {cause}"


def last_line(error: Exception) -> str:
    """The exception a Ray error carries, without Ray's header lines."""
    return [line for line in str(error).splitlines() if line.strip()][-1]


class RayPool(Pool):
    """``workers`` actors (None: as many as the cluster's CPUs allow), ``threads`` CPUs each."""

    def __init__(self, address: str, workers: int | None, threads: int):
        self.threads = threads
        self._ray = ray = _ray(check_address(address))
        try:
            with tempfile.TemporaryDirectory(prefix="localkg-ray-") as nothing:
                # Ray puts the driver's working directory first on its workers' sys.path unless the job
                # has a working_dir of its own: run from a checkout, they would import its localkg/
                # (which has no indexes/ or loaders/) instead of the installed package. An empty one
                # leaves them the installed package.
                options = {"log_to_driver": False, "configure_logging": False, "runtime_env": {"working_dir": nothing}}
                if address == LOCAL:
                    ray.init(num_cpus=workers * threads if workers else cpu_count(), include_dashboard=False,
                             **options)
                else:
                    ray.init(address=address, **options)
            count = workers or max(1, int(ray.cluster_resources().get("CPU", 1)) // threads)
            actor = ray.remote(num_cpus=threads, max_restarts=0)(_Worker)
            self._actors = [actor.remote(threads) for _ in range(count)]
        except BaseException:
            ray.shutdown()
            raise
        self._running: dict[Any, int] = {}

    @property
    def size(self) -> int:
        return len(self._actors)

    def prepare(self, config: "EvalConfig") -> dict[str, Any]:
        """Every actor opens the store, loads the models and builds the reasoner; a node that
        cannot is named. Returns what the reasoner settled, which every node must agree on."""
        config = self._worker_config(config)
        try:
            prepared = self._ray.get([actor.prepare.remote(config) for actor in self._actors])
        except self._ray.exceptions.RayError as error:  # an actor that could not even start
            raise WorkerError(f"a Ray actor could not start: {last_line(error)}") from None
        settled = {}
        for node, uses, problem in prepared:
            if problem:
                raise WorkerError(problem)
            settled[f"node {node}"] = uses
        return agreed_uses(settled)

    def _submit(self, worker: int, task: Task) -> None:
        self._running[self._actors[worker].answer.remote(task)] = worker

    def _next_outcome(self, busy: dict[int, str]) -> tuple[int, Outcome]:
        (done,), _ = self._ray.wait(list(self._running), num_returns=1)
        worker = self._running.pop(done)
        try:
            return worker, self._ray.get(done)
        except self._ray.exceptions.RayError as error:
            raise WorkerError(f"Ray actor {worker + 1} failed while {busy[worker]}: {last_line(error)}; "
                              "the finished predictions are kept (rerun with --resume)") from None

    def close(self, abort: bool = False) -> None:
        self._running = {}
        self._ray.shutdown()
