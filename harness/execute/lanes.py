"""A campaign's lanes: the tasks of each start-up environment run in several lanes at once on this machine.

:class:`LocalPool`, a campaign's default executor, groups the tasks by start-up environment
(:func:`~harness.execute.plan.group_key`) and gives each group :meth:`CampaignOptions.lanes` lanes, each
its own :class:`~harness.execute.worker_sets.WorkerSet`; :class:`_Lanes` runs one thread per lane, each
taking the next task not yet taken (as the machine's memory admits it), and hands the outcomes back in the
tasks' order. The next group's processes start while one group runs.

Apart from the campaign's files (:mod:`harness.execute.campaign`): an executor yields outcomes and writes
nothing, and a Dask cluster (:mod:`harness.execute.cluster`) is another executor of the same protocol.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator, Sequence

from harness.core.contexts import get_context
from harness.core.devices import parse_device
from harness.execute import admission
from harness.execute.machine_load import OutsideLoad
from harness.execute.plan import Task, group_key
from harness.execute.progress import RUNNING
from harness.execute.settings import CampaignOptions
from harness.execute.task_runs import TaskOutcome, run_task
from harness.execute.worker_sets import WorkerSet

__all__ = ["LocalPool", "MIN_TASKS_PER_LANE", "BESIDE_NICE"]


#: With ``jobs=0``, a group of tasks gets one lane per this many tasks (and at most
#: :func:`~harness.execute.settings.default_jobs`): a lane costs a pooled worker (a fork of the zygote) and a
#: thread, which a few short tasks do not repay.
MIN_TASKS_PER_LANE = 32

#: Nice levels the pooled workers of every lane but the first run below the campaign's process. The first lane's
#: subject then runs as it would alone: where its BLAS threads split a product over the cores, the sibling
#: thread gets a core when it wakes rather than waiting behind another lane's run; the other lanes take the CPU
#: time it leaves (its threads wait between products). A priority changes when a thread runs, never what it
#: computes: the thread counts and the splits are the context's. While other programs keep the machine busy, the
#: lowered lanes run at full priority (:class:`~harness.execute.machine_load.OutsideLoad`): below programs at
#: nice 0 they would starve.
BESIDE_NICE = 10


class LocalPool:
    """Runs task groups on this machine: per start-up environment, :meth:`CampaignOptions.lanes` lanes, each
    its own :class:`~harness.execute.worker_sets.WorkerSet`, taking the group's tasks in turn; outcomes come
    back in the tasks' order. Tasks on a usable GPU run in the first lane only, one at a time (two at once on
    one GPU would make every context a contention context), and a group under GPU contention runs in one lane.
    Every lane but the first runs its pooled worker :data:`BESIDE_NICE` levels below this process, but while
    other programs load the machine. The default executor of a :class:`~harness.execute.campaign.Campaign`."""

    #: A lane does not start a task more than this many tasks ahead of the oldest one not yet handed back (a
    #: long or hung run holds the order; the outcomes waiting behind it are held in memory, and are lost with
    #: this process if it dies before they are written). Many of a campaign's tasks take milliseconds: with too
    #: small a window the other lanes run out of tasks behind one long task and wait for it, idle.
    WINDOW = 1024
    #: Nor while the outcomes waiting behind the oldest hold more than this many bytes of arrays (their
    #: repetition 0's); the oldest itself may always start.
    WINDOW_BYTES = 256 * 2**20
    #: One lane starts at most this many tasks ahead: the next task runs while the caller takes in the last, and
    #: no more outcomes (each holding its repetition 0's arrays) wait in memory than that one.
    ONE_LANE_WINDOW = 1

    def __init__(self) -> None:
        self.stats: dict[str, float] = {"worker_startup": 0.0, "restarts": 0, "lanes_raised_for_load": 0}
        #: worker sets launched ahead of their group (:meth:`launch`, and the next group while one runs)
        self._ahead: dict[tuple[Any, ...], list[WorkerSet]] = {}
        self._load: OutsideLoad | None = None

    @staticmethod
    def _groups(tasks: Sequence[Task]) -> list[list[Task]]:
        by_group: dict[tuple[Any, ...], list[Task]] = {}
        for t in tasks:
            by_group.setdefault(group_key(t), []).append(t)
        return list(by_group.values())

    @staticmethod
    def _needs_workers(group: Sequence[Task]) -> bool:
        return any(parse_device(t.device).available for t in group)

    def _outside(self) -> OutsideLoad:
        """The meter of other programs' load that the lowered lanes follow (made once, when first needed)."""
        if self._load is None:
            self._load = OutsideLoad()
        return self._load

    def _sets(self, group: Sequence[Task], settings: CampaignOptions) -> list[WorkerSet]:
        sets = self._worker_sets(group, settings)
        if len(sets) > 1:
            for ws in sets[1:]:
                ws.load = self._outside()
        return sets

    @staticmethod
    def _worker_sets(group: Sequence[Task], settings: CampaignOptions) -> list[WorkerSet]:
        ctx = get_context(group[0].context)
        if ctx.contention:
            lanes = 1
        else:
            # Each lane starts its own workers (K of them new interpreters): by default a lane needs enough
            # tasks to pay for them; an explicit ``jobs`` is taken as given.
            most = len(group) if settings.jobs else -(-len(group) // MIN_TASKS_PER_LANE)
            lanes = max(1, min(settings.lanes(), most))
        first = WorkerSet(ctx, settings)
        return [first] + [WorkerSet(ctx, settings, shared=first, nice=BESIDE_NICE) for _ in range(lanes - 1)]

    def _launch_ahead(self, group: Sequence[Task], settings: CampaignOptions) -> None:
        key = group_key(group[0])
        if key not in self._ahead and self._needs_workers(group):
            self._ahead[key] = [ws.launch() for ws in self._sets(group, settings)]

    def launch(self, tasks: Sequence[Task], settings: CampaignOptions) -> None:
        """Start the first group's processes without waiting for them (:meth:`WorkerSet.launch`): they import
        Chainer while the caller does other work before :meth:`run` (with the same tasks) takes them."""
        groups = self._groups(tasks)
        if groups:
            self._launch_ahead(groups[0], settings)

    def discard(self) -> None:
        """Close the processes :meth:`launch` started that no :meth:`run` took (the caller gave up before)."""
        for sets in self._ahead.values():
            for ws in sets:
                ws.close()
        self._ahead.clear()

    def run(self, tasks: Sequence[Task], settings: CampaignOptions) -> Iterator[tuple[Task, TaskOutcome]]:
        groups = self._groups(tasks)
        try:
            for i, group in enumerate(groups):
                sets = self._ahead.pop(group_key(group[0]), None) or self._sets(group, settings)
                if i + 1 < len(groups):
                    # The next environment's processes import Chainer while this group runs: its start-up is
                    # hidden behind this group's tasks rather than added after them.
                    self._launch_ahead(groups[i + 1], settings)
                yield from self._run_group(group, sets, self._needs_workers(group), settings)
        finally:
            self.discard()  # launched for a group that never ran (the caller stopped early)

    def _run_group(self, ctx_tasks: list[Task], sets: list[WorkerSet], needs_workers: bool,
                   settings: CampaignOptions) -> Iterator[tuple[Task, TaskOutcome]]:
        ctx = get_context(ctx_tasks[0].context)
        contention = None
        try:
            if ctx.contention:
                from harness.execute.contention import Contention

                gpus = sorted({t.device for t in ctx_tasks if parse_device(t.device).available})
                contention = Contention([parse_device(g) for g in gpus]).start() if gpus else None
            # One lane runs in a thread of its own too, one task ahead of the caller: while the caller writes
            # a task's outcome (records, arrays, progress), the worker already runs the next task.
            window = self.WINDOW if len(sets) > 1 else self.ONE_LANE_WINDOW
            yield from _Lanes(ctx_tasks, sets, needs_workers, settings, window, self.WINDOW_BYTES).outcomes()
        finally:
            if contention is not None:
                contention.stop()
            for ws in sets:
                ws.close()
                self.stats["worker_startup"] += ws.startup_seconds
                self.stats["restarts"] += ws.restarts
                self.stats["lanes_raised_for_load"] += ws.raisings


class _Lanes:
    """One thread per :class:`~harness.execute.worker_sets.WorkerSet`; each takes the next task not yet taken
    and runs it. The threads spend their time waiting on their workers' pipes (the GIL is free then);
    :meth:`outcomes` hands the outcomes back in the tasks' order. A lane's exception stops the others and is
    raised by :meth:`outcomes`; so is the caller's, once every lane has stopped (their workers are closed
    first, so none waits long)."""

    def __init__(self, tasks: list[Task], sets: list[WorkerSet], needs_workers: bool,
                 settings: CampaignOptions, window: int, window_bytes: int = LocalPool.WINDOW_BYTES) -> None:
        self.tasks, self.sets, self.settings, self.window = tasks, sets, settings, window
        self.window_bytes = window_bytes
        self.waiting_bytes = 0  # the arrays of the outcomes in ``done``
        self.needs_workers = needs_workers
        self.cond = threading.Condition()
        #: tasks on a usable GPU: only lane 0 takes them
        self.gpu = [parse_device(t.device).kind == "gpu" and parse_device(t.device).available for t in tasks]
        self.taken = [False] * len(tasks)
        self.memory = admission.MemoryBudget()  # tasks that together would not fit this machine wait
        self.head = 0  # the next task handed back
        self.done: dict[int, TaskOutcome] = {}
        self.error: BaseException | None = None
        self.stop = False

    def _take(self, lane: int) -> int | None:
        """The first task not taken that ``lane`` may run, waiting while it lies beyond the window (of tasks, or
        of the waiting outcomes' bytes); None when there is none left for this lane (or the campaign stopped).
        Called with ``cond`` held."""
        while not self.stop:
            j = next((j for j in range(self.head, len(self.tasks))
                      if not self.taken[j] and (lane == 0 or not self.gpu[j])), None)
            if j is None:
                return None
            task = self.tasks[j]
            ahead = j - self.head
            in_window = ahead < self.window and (ahead == 0 or self.waiting_bytes < self.window_bytes)
            if in_window and self.memory.take(j, admission.host_bytes(task.case, task.subject, task.device)):
                self.taken[j] = True
                return j
            self.cond.wait()
        return None

    def _lane(self, lane: int, ws: WorkerSet) -> None:
        try:
            if self.needs_workers:
                ws.start()
            while True:
                with self.cond:
                    j = self._take(lane)
                if j is None:
                    return
                ws.follow()  # a lowered lane runs at full priority while other programs load the machine
                with RUNNING.track(self.tasks[j]):  # the progress line shows it while it runs
                    outcome = run_task(self.tasks[j], ws, self.settings)
                with self.cond:
                    self.memory.give(j)
                    self.done[j] = outcome
                    self.waiting_bytes += outcome.array_bytes
                    self.cond.notify_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread by outcomes()
            with self.cond:
                if self.error is None:
                    self.error = exc
                self.stop = True
                self.cond.notify_all()

    def outcomes(self) -> Iterator[tuple[Task, TaskOutcome]]:
        threads = [threading.Thread(target=self._lane, args=(k, ws), name=f"harness-lane-{k}", daemon=True)
                   for k, ws in enumerate(self.sets)]
        for t in threads:
            t.start()
        try:
            while self.head < len(self.tasks):
                with self.cond:
                    while self.head not in self.done and self.error is None:
                        self.cond.wait()
                    if self.error is not None:
                        raise self.error
                    outcome = self.done.pop(self.head)
                    self.waiting_bytes -= outcome.array_bytes
                    task = self.tasks[self.head]
                    self.head += 1
                    self.cond.notify_all()
                yield task, outcome
        finally:
            with self.cond:
                self.stop = True
                self.cond.notify_all()
            if any(t.is_alive() for t in threads):
                for ws in self.sets:  # a lane inside a run: end its workers so it returns now
                    ws.abort()
            for t in threads:
                t.join()
