"""Campaigns on a Dask cluster: the same protocol as :class:`~harness.execute.lanes.LocalPool`.

:class:`DaskExecutor` sends each :class:`~harness.execute.plan.Task` to a Dask worker, where it still
runs in harness worker *subprocesses* (:func:`~harness.execute.task_runs.run_task` with a
:class:`~harness.execute.worker_sets.WorkerSet`), so a segfault or a hang in a subject becomes a row and the
Dask worker lives on. Each Dask worker process keeps one ``WorkerSet`` per start-up environment
(:func:`~harness.execute.plan.group_key`): Chainer is imported once per Dask worker, not per task.
The outcomes stream back to the client in completion order, and :meth:`Campaign.run` writes each as it
arrives, so ``--resume`` after a lost cluster skips what was already written.

A Dask worker that dies mid-task is handled by the scheduler: the task is run again on another worker
(up to ``distributed.scheduler.allowed-failures`` times); the record says how many times it was started
(``attempts``), and names the ``host``, Dask worker and GPU it finally ran on.

:func:`connect` turns ``--cluster`` into a client: ``tcp://host:port`` (an existing scheduler),
``local`` (a :class:`distributed.LocalCluster` of worker processes on 127.0.0.1) or ``local-cuda``
(``dask_cuda.LocalCUDACluster``: one worker per GPU, each seeing its own GPU as device 0).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import re
import socket
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Iterator, Sequence, overload

from harness.core.errors import HarnessError, InvalidArgument, WorkerError
from harness.execute.plan import Task, group_key
from harness.execute.settings import CampaignOptions
from harness.execute.task_runs import TaskOutcome, run_task
from harness.execute.worker_sets import WorkerSet

__all__ = ["ClusterError", "DaskExecutor", "HarnessWorkerPlugin", "connect", "parse_cluster_spec",
           "worker_fingerprints", "close_worker_sets", "SPREADS"]

#: ``shard``: each task runs once somewhere; ``every``: every worker runs the whole corpus.
SPREADS = ("shard", "every")

_SPEC = re.compile(r"^(tcp|tls|ucx|inproc)://[^\s/]+(:\d+)?/?$")


class ClusterError(HarnessError):
    """The cluster cannot be reached or lost the workers a campaign was pinned to."""


# ==== on the Dask worker =========================================================================
# One cache per Dask worker process: the harness worker subprocesses of each start-up environment,
# with a lock each, so a Dask worker with several threads never sends two runs down one pipe at once.
_CACHE: dict[tuple[Any, ...], tuple[WorkerSet, threading.Lock, list[Any]]] = {}
_CACHE_LOCK = threading.Lock()


def _entry(task: Task, settings: CampaignOptions) -> tuple[WorkerSet, threading.Lock, list[Any]]:
    from harness.core.contexts import get_context

    # Plug-ins and the number of fresh workers change what a WorkerSet is; the timeout does not.
    key = (group_key(task), tuple(settings.plugins), settings.fresh)
    with _CACHE_LOCK:
        got = _CACHE.get(key)
        if got is None:
            ws = WorkerSet(get_context(task.context), CampaignOptions(
                repeats=settings.repeats, fresh=settings.fresh, timeout=settings.timeout,
                plugins=tuple(settings.plugins), quiet=True))
            got = _CACHE[key] = (ws, threading.Lock(), [])
    return got


def close_worker_sets() -> None:
    """Stop every cached harness worker subprocess of this process (Dask worker teardown, or exit)."""
    with _CACHE_LOCK:
        entries = list(_CACHE.values())
        _CACHE.clear()
    for ws, lock, contention in entries:
        with lock:
            for c in contention:
                c.stop()
            ws.close()


atexit.register(close_worker_sets)


class HarnessWorkerPlugin:
    """A Dask worker plug-in that closes the harness worker subprocesses when the Dask worker stops."""

    name = "harness-worker-sets"

    def setup(self, worker: Any) -> None:  # noqa: D401 - Dask's hook
        """Nothing to start: worker sets are made on the first task that needs them."""

    def teardown(self, worker: Any) -> None:
        """Close this process's worker sets."""
        close_worker_sets()


def _gpu_of(device_id: str) -> dict[str, Any] | None:
    """Which physical GPU ``gpu:N`` is on this worker (name, UUID from nvidia-smi; None on CPU)."""
    if not device_id.startswith("gpu"):
        return None
    from harness.core.nvsmi import query_gpus

    idx = int(device_id.split(":")[1])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    info: dict[str, Any] = {"device": device_id, "cuda_visible_devices": visible}
    smi = query_gpus()
    gpus = smi.get("gpus") or []
    # CUDA_VISIBLE_DEVICES (dask-cuda sets one per worker) renumbers devices: map back to nvidia-smi's index.
    order = [v.strip() for v in visible.split(",")] if visible else [str(g["index"]) for g in gpus]
    if idx < len(order):
        for g in gpus:
            if order[idx] in (str(g.get("index")), g.get("uuid")):
                info.update(name=g.get("name"), uuid=g.get("uuid"), index=g.get("index"))
    return info


_LOADED: set[tuple[str, ...]] = set()


def _load_plugins(plugins: tuple[str, ...]) -> None:
    """Register the campaign's plug-in subjects in this Dask worker too: run_task looks subjects up here
    (their role) before the harness worker subprocess, which loads them itself, runs them."""
    if plugins in _LOADED:
        return
    from harness.subjects.registry import load_entry_points, load_plugin

    load_entry_points()
    for p in plugins:
        load_plugin(p)
    _LOADED.add(plugins)


def task_to_wire(task: Task) -> tuple[str, str, str, str]:
    """A task as plain strings for the trip to a Dask worker: a :class:`Case` holds read-only
    ``mappingproxy`` fields, which do not pickle, so the case travels as its canonical JSON."""
    return task.case.to_json(), task.subject, task.device, task.context


def task_from_wire(wire: tuple[str, str, str, str]) -> Task:
    """The inverse of :func:`task_to_wire` (the case id is a digest of the JSON, so it is the same)."""
    from harness.core.cases import Case

    case_json, subject, device, context = wire
    return Task(Case.from_json(case_json), subject, device, context)


def run_remote(wire: tuple[str, str, str, str], settings: CampaignOptions) -> tuple[TaskOutcome, dict[str, float]]:
    """Run one task (as :func:`task_to_wire` gave it) on this Dask worker: the function the executor submits.

    Returns the outcome, its record naming where it ran, and the worker start-up seconds and restarts
    this task cost (for the executor's ``stats``).
    """
    from harness.core.devices import parse_device

    task = task_from_wire(wire)

    _load_plugins(tuple(settings.plugins))
    ws, lock, contention = _entry(task, settings)
    with lock:
        before = (ws.startup_seconds, ws.restarts)
        if ws.pool is None and parse_device(task.device).available:
            try:
                ws.start()
            except WorkerError:
                pass  # run_task starts each slot again and records the failure as a crashed run
        if ws.context.contention and not contention and parse_device(task.device).available:
            from harness.execute.contention import Contention

            contention.append(Contention([parse_device(task.device)]).start())
        ws.settings = dataclasses.replace(ws.settings, timeout=settings.timeout)  # this task's limit
        outcome = run_task(task, ws, settings)
        cost = {"worker_startup": ws.startup_seconds - before[0], "restarts": float(ws.restarts - before[1])}
    try:
        from distributed import get_worker

        address = get_worker().address
    except Exception:  # noqa: BLE001 - run outside a Dask worker (a test calling it directly)
        address = None
    outcome.record = dataclasses.replace(outcome.record, host=socket.gethostname(), dask_worker=address or "",
                                         gpu=_gpu_of(task.device))
    return outcome, cost


def _attempts(keys: Sequence[str], dask_scheduler: Any = None) -> dict[str, int]:
    """On the scheduler: how many times each task was started (1 + the worker deaths it was caught in)."""
    out = {}
    for k in keys:
        ts = dask_scheduler.tasks.get(k)
        out[k] = 1 + (int(getattr(ts, "suspicious", 0)) if ts is not None else 0)
    return out


# ==== on the client ================================================================================
class DaskExecutor:
    """Runs tasks on a Dask cluster; ``Campaign.run(tasks, executor=DaskExecutor(client))``.

    ``workers`` pins every task to those worker addresses (``allow_other_workers=False``): the
    ``every`` spread makes one executor per worker. ``retries`` re-runs a task whose remote function
    raised (a harness bug); a Dask worker's death is retried by the scheduler in any case.
    """

    def __init__(self, client: Any, workers: Sequence[str] | None = None, retries: int = 2,
                 poll_seconds: float = 2.0) -> None:
        self.client = client
        self.workers = list(workers) if workers else None
        self.retries = retries
        self.poll_seconds = poll_seconds
        self.stats: dict[str, float] = {"worker_startup": 0.0, "restarts": 0, "retried_tasks": 0}
        _register_plugin(client)

    def run(self, tasks: Sequence[Task], settings: CampaignOptions) -> Iterator[tuple[Task, TaskOutcome]]:
        """Submit every task, then yield ``(task, outcome)`` as each finishes (completion order)."""
        from distributed import wait

        if not tasks:
            return
        extra: dict[str, Any] = {}
        if self.workers:
            extra = {"workers": self.workers, "allow_other_workers": False}
        futures = {}
        for t in tasks:
            # pure=False: the same task in two campaigns (the every spread) must not share one result.
            f = self.client.submit(run_remote, task_to_wire(t), settings, pure=False, retries=self.retries,
                                   key=f"harness-{t.case.id[:12]}-{os.urandom(6).hex()}", **extra)
            futures[f] = t
        pending = set(futures)
        try:
            while pending:
                try:
                    done, pending = wait(list(pending), timeout=self.poll_seconds, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    # distributed.wait raises on a timeout instead of returning an empty done set: nothing
                    # finished within this poll, which is the normal case for a task longer than the poll.
                    done = set()
                pending = set(pending)
                if not done:
                    self._check_pinned()
                    continue
                tries = self.client.run_on_scheduler(_attempts, [f.key for f in done])
                for f in done:
                    try:
                        outcome, cost = f.result()
                    except Exception as exc:  # noqa: BLE001 - KilledWorker (too many deaths), a harness bug
                        msg = " ".join(str(exc).split())[:300]
                        raise ClusterError(f"task {futures[f].key} failed on the cluster: {type(exc).__name__}: "
                                           f"{msg}; what finished is written, rerun with --resume") from exc
                    n = int(tries.get(f.key, 1))
                    outcome.record = dataclasses.replace(outcome.record, attempts=n)
                    self.stats["retried_tasks"] += int(n > 1)
                    self.stats["worker_startup"] += cost["worker_startup"]
                    self.stats["restarts"] += cost["restarts"]
                    yield futures[f], outcome
                    f.release()
        finally:
            for f in pending:  # an interrupted campaign: leave nothing queued on the cluster
                f.cancel()

    def _check_pinned(self) -> None:
        if not self.workers:
            return
        alive = set(self.client.scheduler_info(n_workers=-1)["workers"])
        gone = [w for w in self.workers if w not in alive]
        if gone:
            raise ClusterError(f"worker {gone[0]} left the cluster: its tasks cannot run elsewhere in the "
                               f"'every' spread; what finished is written, rerun with --resume")


# Clients whose workers have the plug-in: registering it again under its name would tear the first one
# down (closing the worker sets another executor of the same client is using).
_REGISTERED: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _register_plugin(client: Any) -> None:
    if client in _REGISTERED:
        return
    client.register_plugin(_DaskPlugin(), name=HarnessWorkerPlugin.name)
    _REGISTERED.add(client)


def _make_dask_plugin() -> Any:
    try:
        from distributed.diagnostics.plugin import WorkerPlugin
    except ImportError:  # Dask not installed: connect() reports it
        return HarnessWorkerPlugin

    class _DaskPluginCls(HarnessWorkerPlugin, WorkerPlugin):
        """:class:`HarnessWorkerPlugin` as a Dask ``WorkerPlugin``."""

    _DaskPluginCls.__qualname__ = _DaskPluginCls.__name__ = "_DaskPlugin"
    return _DaskPluginCls


_DaskPlugin = _make_dask_plugin()


def worker_fingerprints(client: Any) -> dict[str, dict[str, Any]]:
    """The environment fingerprint taken on each Dask worker, by worker address (sorted)."""
    from harness.core.env import fingerprint

    got = client.run(fingerprint)
    return {k: got[k] for k in sorted(got)}


# ==== connecting ===================================================================================
@overload
def parse_cluster_spec(spec: str) -> str: ...
@overload
def parse_cluster_spec(spec: None) -> None: ...
def parse_cluster_spec(spec: str | None) -> str | None:
    """``local``, ``local-cuda`` or a scheduler address (``tcp://host:8786``); anything else is a
    one-line :class:`InvalidArgument` before anything starts."""
    if spec is None:
        return None
    s = spec.strip()
    if s in ("local", "local-cuda") or _SPEC.match(s):
        return s
    raise InvalidArgument(f"cluster={spec!r} is not 'local', 'local-cuda' or a scheduler address like "
                          f"tcp://host:8786")


@dataclass
class Connection:
    """A client and whatever :func:`connect` started for it; ``close()`` stops both."""

    client: Any
    cluster: Any = None

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def connect(spec: str, n_workers: int = 2, timeout: float = 30.0) -> Connection:
    """A Dask client for ``--cluster``: a scheduler address, ``local`` (``n_workers`` worker processes
    with one thread each on 127.0.0.1) or ``local-cuda`` (one worker per GPU; needs ``dask-cuda``)."""
    spec = parse_cluster_spec(spec) or ""
    if n_workers < 1:
        raise InvalidArgument(f"cluster-workers={n_workers} must be >= 1")
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise ClusterError(f"cluster={spec!r} needs dask[distributed] ({exc})") from None
    if spec in ("local", "local-cuda"):
        with _environment_kept():
            return _local(spec, n_workers, timeout, Client, LocalCluster)
    try:
        return Connection(Client(spec, timeout=timeout))
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"cluster={spec!r} cannot be reached: {' '.join(str(exc).split())[:200]}") from None


@contextlib.contextmanager
def _environment_kept() -> Iterator[None]:
    """Start local Dask workers with this process's environment, and leave it as it was.

    Dask's nanny sets ``OMP/MKL/OPENBLAS_NUM_THREADS=1`` (its ``pre-spawn-environ``) and a random
    ``PYTHONHASHSEED`` in the *starting* process's ``os.environ``: harness workers started later here would
    inherit one BLAS thread and a fixed hash seed, and the BLAS thread count changes bits (the ``blas1``
    context exists for that). The harness sets thread counts itself, per context, so the Dask workers keep
    the machine's defaults, as the local pool does."""
    import dask

    saved = dict(os.environ)
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": {}}):
            yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _local(spec: str, n_workers: int, timeout: float, Client: Any, LocalCluster: Any) -> "Connection":
    if spec == "local":
        # One thread per worker: one task at a time each, as in the local pool; no memory limit, since
        # the harness's own worker subprocesses are outside the Dask worker's accounting anyway.
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address="127.0.0.1:0", memory_limit=0)
        return Connection(Client(cluster, timeout=timeout), cluster)
    if spec == "local-cuda":
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            raise ClusterError("cluster='local-cuda' needs dask-cuda, which is not installed "
                               "(pip install dask-cuda)") from None
        cluster = LocalCUDACluster(threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0")
        return Connection(Client(cluster, timeout=timeout), cluster)
    raise ClusterError(f"cluster={spec!r} is not a local cluster")


def wait_for_workers(client: Any, n: int = 1, timeout: float = 60.0) -> list[str]:
    """Block until the cluster has ``n`` workers; their addresses, sorted."""
    try:
        client.wait_for_workers(n, timeout=timeout)
    except (TimeoutError, OSError) as exc:
        raise ClusterError(f"the cluster has fewer than {n} worker(s) after {timeout:g} s: {exc}") from None
    return sorted(client.scheduler_info(n_workers=-1)["workers"])
