"""The worker processes of one start-up environment, as a campaign's lanes use them.

A :class:`WorkerSet` holds one pooled worker (forked from the environment's zygote) and ``K`` fresh ones
(brand-new interpreters); the lanes of one environment each have their own pooled worker and share the
fresh ones, a fresh run holding its worker meanwhile (:class:`_Busy`). A worker that died is started again
by the next run that asks for it. :func:`start_early` starts the first environment's zygote before the
corpus is built.

Apart from the lanes (:mod:`harness.execute.lanes`) and the runs of one task
(:mod:`harness.execute.task_runs`), which both take a set of workers: ``replay`` and ``shrink``
(:mod:`harness.execute.isolated`) and a Dask worker (:mod:`harness.execute.cluster`) keep sets of their own.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from harness.core.case_limits import MAX_CASE_BYTES_ENV
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.core.errors import WorkerError
from harness.execute.settings import CampaignOptions
from harness.execute.worker import Worker
from harness.execute.zygote import prestart_zygote

if TYPE_CHECKING:
    from harness.execute.machine_load import OutsideLoad

__all__ = ["WorkerSet", "start_early", "lower_priority", "set_priority"]


def start_early(contexts: Sequence[Context], devices: Sequence[Device]) -> None:
    """Start the zygote of the first group's environment now, before the corpus is built: it imports Chainer
    (half a second of a core) while the caller builds cases on the other, rather than beside the fresh
    interpreters, which all start at the campaign's launch. The plan is context-major, so the first group is
    the first context's that applies to a device available here (a group of skipped rows needs no worker);
    nothing starts where there is none. The campaign forks its pooled workers from it."""
    for ctx in contexts:
        if any(d.available and ctx.applies_to(d.kind) for d in devices):
            prestart_zygote(ctx.env)
            return


def set_priority(pid: int, steps: int) -> bool:
    """Every thread of process ``pid`` ``steps`` nice levels below this process's (Linux's ``setpriority`` names
    one thread: each one in ``/proc/<pid>/task`` is set; threads started later inherit their starter's). False
    where the system refuses (raising a priority needs privileges) or the process is gone: a priority is never a
    reason for a run to fail."""
    try:
        level = os.getpriority(os.PRIO_PROCESS, 0) + int(steps)
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")] if os.path.isdir(f"/proc/{pid}/task") else [pid]
        for tid in tids:
            os.setpriority(os.PRIO_PROCESS, tid, level)
    except (OSError, AttributeError, ValueError):
        return False
    return True


def lower_priority(pid: int, steps: int) -> None:
    """:func:`set_priority`, whatever the system says."""
    set_priority(pid, steps)


class _Busy:
    """Which fresh workers of an environment run a task now; a lane waits here for one its task has not used."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.now: set[int] = set()

    @contextmanager
    def take(self, n: int, used: set[int], stopped: Callable[[], bool]) -> Iterator[int]:
        with self.cond:
            while True:
                if stopped():
                    raise WorkerError("the campaign was stopped")
                k = next((k for k in range(n) if k not in used and k not in self.now), None)
                if k is not None:
                    self.now.add(k)
                    break
                if all(k in used for k in range(n)):
                    raise WorkerError(f"no fresh worker left for this task (it ran in all {n})")
                self.cond.wait()
        try:
            yield k
        finally:
            self._release(k)

    def _release(self, k: int) -> None:
        """Fresh worker ``k`` is free again: the lanes waiting for one are told."""
        with self.cond:
            self.now.discard(k)
            self.cond.notify_all()

    @contextmanager
    def take_this(self, k: int, stopped: Callable[[], bool]) -> Iterator[int]:
        """Fresh worker ``k`` itself, waiting while another lane runs in it."""
        with self.cond:
            while k in self.now:
                if stopped():
                    raise WorkerError("the campaign was stopped")
                self.cond.wait()
            self.now.add(k)
        try:
            yield k
        finally:
            self._release(k)

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()


@dataclass
class WorkerSet:
    """The worker processes of one start-up environment: one pooled worker and ``settings.fresh`` fresh ones.

    The lanes of one environment each have their own pooled worker but share the first lane's fresh workers
    (``shared``): K new interpreters per environment, not K per lane (each costs a Chainer import, the
    largest fixed cost of a campaign). A fresh run holds its worker (:class:`_Busy`), so two lanes never run in
    one worker at once; each task still runs once in each fresh worker, a process that is not the pooled one."""

    context: Context
    settings: CampaignOptions
    pool: Worker | None = None
    fresh: list[Worker] = field(default_factory=list)
    restarts: int = 0
    startup_seconds: float = 0.0
    aborted: bool = False
    #: the set whose fresh workers this one runs in (None: its own)
    shared: "WorkerSet | None" = None
    #: which fresh workers are running a task now (shared with the lanes that share them)
    busy: "_Busy" = field(default_factory=lambda: _Busy())
    #: two lanes' threads may launch the shared fresh workers at once: one does
    launching: threading.Lock = field(default_factory=threading.Lock)
    #: nice levels the pooled worker runs below this process (:func:`lower_priority`): 0 in the first lane
    nice: int = 0
    #: other programs' load on the machine (:class:`~harness.execute.machine_load.OutsideLoad`): while they
    #: keep it busy, a lowered pooled worker runs at full priority (:meth:`follow`); None: never
    load: "OutsideLoad | None" = None
    #: whether the pooled worker runs at full priority now although :attr:`nice` lowers it (:meth:`follow`)
    raised: bool = False
    #: how many times :attr:`raised` became true (the campaign's ``timings.json`` counts them)
    raisings: int = 0

    @property
    def steps(self) -> int:
        """Nice levels the pooled worker runs below this process now."""
        return 0 if self.raised else self.nice

    def _new(self, label: str) -> Worker:
        # The pooled worker is forked from its environment's zygote (a fork, not an import); a fresh one is
        # a brand-new interpreter, its own hash seed and imports (see harness.execute.worker).
        return Worker(env=self.env(), plugins=self.settings.plugins, label=label, fork=label == "pool").start()

    def env(self) -> dict[str, str]:
        """The workers' environment overrides: the context's, and a user's case limit (``--max-case-bytes``), which
        the worker holds the arrays it builds to (:func:`harness.core.case_limits.max_case_bytes_default`)."""
        env = dict(self.context.env)
        if self.settings.max_case_bytes is not None:
            env[MAX_CASE_BYTES_ENV] = str(self.settings.max_case_bytes)
        return env

    def launch(self) -> "WorkerSet":
        """Start the processes without waiting for them: the fresh workers, and the environment's zygote (the
        pooled worker is forked from it in :meth:`start`). They import Chainer meanwhile."""
        if self.shared is not None:
            owner = self.shared.launch()
            self.fresh, self.busy = owner.fresh, owner.busy  # the same objects: a restart shows in every lane
            return self
        with self.launching:
            if not self.fresh:
                self.fresh = [self._new(f"fresh:{k}") for k in range(self.settings.fresh)]
                prestart_zygote(self.env())
        return self

    def start(self) -> None:
        """The pooled worker ready (launching every worker first where :meth:`launch` was not called). The
        fresh ones are waited for by the first run that takes each (:meth:`worker`): a task's pooled runs
        come first, so they run while the fresh interpreters still import Chainer."""
        self.launch()
        if self.pool is None:
            self.pool = self._new("pool")
        self.pool.wait_ready()
        self._prioritize(self.pool)
        self.startup_seconds += self.pool.startup_seconds

    def _prioritize(self, w: Worker) -> None:
        if self.nice and w.pid is not None:
            w.watch = self._watch
            lower_priority(w.pid, self.steps)

    def follow(self) -> None:
        """Before a task: a lowered lane (:attr:`nice`) runs at this process's priority while other programs
        keep the machine busy (:attr:`load`), and below it again once they stop. Beside programs at nice 0 a
        worker at nice 10 gets a few percent of a core: its runs would wait out their wall limits. Where raising
        the priority is refused (it needs privileges), the pooled worker is replaced by one at full priority."""
        if not self.nice or self.load is None:
            return
        busy = self.load.busy()
        if busy == self.raised:
            return
        self.raised = busy
        self.raisings += int(busy)
        w = self.pool
        if w is not None and w.alive and w.pid is not None and not set_priority(w.pid, self.steps):
            w.kill()  # the next run forks a new one, at the priority wanted (see worker())

    def _watch(self) -> None:
        """While a lowered pooled worker runs (:meth:`Worker.run_answers` calls it between two looks at its
        clock): where other programs load the machine, raise it in place, where the system allows; otherwise
        the run goes on below them, and its wall limit, then a run alone at full priority, decide."""
        w = self.pool
        if (self.nice and not self.raised and self.load is not None and w is not None and w.pid is not None
                and self.load.busy() and set_priority(w.pid, 0)):
            self.raised = True
            self.raisings += 1

    def ensure_fresh(self, n: int) -> None:
        """At least ``n`` fresh workers, started now where fewer run (a :class:`~harness.execute.isolated.Runner`
        starts them only for the first run that asks for them: a shrink of a cross-context finding never does)."""
        while len(self.fresh) < n:
            w = self._new(f"fresh:{len(self.fresh)}")
            self.fresh.append(w)
            w.wait_ready()
            self.startup_seconds += w.startup_seconds

    @contextmanager
    def use(self, slot: str, used: set[int] | None = None) -> Iterator[tuple[str, Worker]]:
        """A worker for one run, and its slot: the pooled one for ``"pool"``; for ``"fresh"``, the first fresh
        worker that is free and not in ``used`` (the ones this task ran in already; the one taken is added),
        waiting while every such one runs another lane's task, and held meanwhile."""
        if slot == "pool":
            yield slot, self.worker(slot)
            return
        with self.busy.take(len(self.fresh), used if used is not None else set(), lambda: self.aborted) as k:
            if used is not None:
                used.add(k)
            yield f"fresh:{k}", self.worker(f"fresh:{k}")

    @contextmanager
    def use_again(self, slot: str) -> Iterator[Worker]:
        """The worker of ``slot`` (``"pool"``, ``"fresh:k"``) once more, a new one where it died: a run that timed
        out is tried again in the slot it ran in (held meanwhile, as :meth:`use` holds it). It runs at this
        process's priority: a lane's pooled worker that runs below it (:attr:`nice`) is replaced by one that does
        not, lowered again after. Another lane is paused meanwhile, but the machine's other processes are not:
        at nice 10 beside programs at nice 0 a worker gets a few percent of a core, and "alone" would mean
        starved again."""
        if slot == "pool":
            if self.steps and self.pool is not None and self.pool.alive:
                self.pool.kill()  # a lowered priority cannot be raised again without privileges
            w = self.worker(slot, lowered=False)
            try:
                yield w
            finally:
                self._prioritize(w)
            return
        with self.busy.take_this(int(slot.split(":")[1]), lambda: self.aborted):
            yield self.worker(slot)

    def worker(self, slot: str, lowered: bool = True) -> Worker:
        """The worker of ``slot``, a new one where it died (a new pooled one ``lowered`` by :attr:`nice`)."""
        if self.aborted:
            raise WorkerError("the campaign was stopped")
        w = self.pool if slot == "pool" else self.fresh[int(slot.split(":")[1])]
        if w is None or not w.alive:
            self.restarts += 1
            w = self._new(slot)
            w.wait_ready()
            self.startup_seconds += w.startup_seconds
            if slot == "pool":
                self.pool = w
                if lowered:
                    self._prioritize(w)
            else:
                self.fresh[int(slot.split(":")[1])] = w
        elif slot != "pool" and w.pid is None:
            # launched with the set, not waited for yet: the run holding it now (see use()) waits, once
            w.wait_ready()
            self.startup_seconds += w.startup_seconds
        return w

    def abort(self) -> None:
        """From another thread: end the workers' processes now (signals only; :meth:`close` still cleans
        up), and restart none: the thread using them gets a ``crashed`` row at once and stops."""
        self.aborted = True
        self.busy.wake()
        for w in [self.pool, *self.fresh]:
            proc = None if w is None else w.proc
            if proc is not None and proc.poll() is None:
                proc.kill()

    def close(self) -> None:
        # the lane that owns the fresh workers closes them (after every lane has stopped)
        workers = [w for w in [self.pool, *(self.fresh if self.shared is None else ())] if w is not None]
        for w in workers:  # ask every worker to stop first, then wait: they exit in parallel
            w.request_stop()
        for w in workers:
            w.close()
