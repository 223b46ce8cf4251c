"""The campaign: plan case x subject x device x context, run each R times in a pooled worker and K times
in other processes, compare the repetitions, and stream everything to disk as it happens.

Per start-up environment (contexts that set environment variables, or GPU contention, get
their own; the others share) the runner starts one *pool* worker (reused; forked from the environment's
zygote, which imported Chainer once, so a replacement costs a fork) and ``K`` *fresh* workers, each a
brand-new interpreter with its own imports, memory pool, caches, BLAS thread pool and hash seed. Every task
runs ``R`` times in the pool worker and once in each fresh worker, so state that survives inside one
process cannot hide run-to-run variation. A worker that dies, hangs or answers garbage is replaced and the
run is recorded as ``crashed`` / ``timeout``. Workers take the digests and NaN/Inf counts of their arrays
themselves; the comparison of repetitions whose digests agree reads no array.

Files under the campaign directory (each line flushed as it exists):

- ``runs.jsonl``: one line per run (status, error, timings, declared warnings, tensor digests);
- ``tasks.jsonl``: one line per finished task: the comparison of its repetitions;
- ``arrays/<task>.npz``: repetition 0's arrays, for cross-device, cross-context and oracle measures;
- ``corpus.jsonl`` and ``campaign.json``: what was asked, so ``--resume`` continues it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from harness.core.cases import Case
from harness.core.contexts import Context, get_context
from harness.core.corpus_files import load_corpus, write_corpus
from harness.core.devices import Device, parse_device
from harness.core.errors import InvalidArgument, WorkerError
from harness.core.fileio import atomic_json, atomic_npz, npz_key, npz_members
from harness.core.records import TaskRecord, TensorStats, read_records, read_tasks, repair_jsonl
from harness.core.rundir import corpus_stamp, npz_sound, runs_short
from harness.execute import admission
from harness.execute.answers import tensor_meta
from harness.execute.progress import RUNNING, Progress
from harness.execute.settings import CampaignSettings, default_jobs  # re-exported: the settings live apart (no NumPy)
from harness.execute.worker import Worker
from harness.execute.zygote import prestart_zygote
from harness.judge import bitwise as compare
from harness.judge.bits import value_text
from harness.judge.sketch import tensor_sketch
from harness.subjects.base import ErrorInfo, RunResult, Subject
from harness.subjects.registry import accepts_error, get_subject, prepare_accepts

__all__ = ["Task", "plan", "Campaign", "CampaignSettings", "WorkerSet", "TaskOutcome", "run_task", "outcome_of", "LocalPool",
           "group_key", "default_jobs", "shard", "parse_shard", "task_key", "load_tasks", "start_early"]


@dataclass(frozen=True)
class Task:
    """One case x subject x device x context."""

    case: Case
    subject: str
    device: str
    context: str

    @property
    def key(self) -> str:
        return task_key(self.case.id, self.subject, self.device, self.context)


def task_key(case_id: str, subject: str, device: str, context: str) -> str:
    """The stable key of a task, used in file names and for resume."""
    return f"{case_id}|{subject}|{device}|{context}"


def array_file(key: str) -> str:
    """The file name under ``arrays/`` that holds a task's repetition-0 arrays."""
    return hashlib.sha256(key.encode()).hexdigest()[:20] + ".npz"


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``i/n`` (1-based) -> (i, n); None passes through (the rule: :func:`harness.core.argcheck.shard`)."""
    from harness.core.argcheck import shard as check_shard

    return check_shard("shard", text)


def shard(cases: Sequence[Case], i: int, n: int) -> list[Case]:
    """The cases of shard ``i`` of ``n``: decided by each case's id, so any machine splits alike."""
    return [c for c in cases if int(c.id, 16) % n == i - 1]


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


def plan(cases: Iterable[Case], subjects: Iterable[Subject], devices: Iterable[Device],
         contexts: Iterable[Context], oracle_contexts: tuple[str, ...] = ("default",),
         relation_contexts: tuple[str, ...] = ("default",), contracts: Any = None) -> list[Task]:
    """Every applicable task, in a stable order. Oracle subjects run only in ``oracle_contexts``
    (they are float64 NumPy and deterministic; once is enough to measure error against them),
    and only on the devices they support; other subjects get a task on every device asked for,
    so an unavailable GPU shows up as ``skipped`` rows, never as a silent absence. The members of
    invariance relations (:mod:`harness.execute.relations`) run in ``relation_contexts`` only: the
    relation compares them with their base case in the same context. With ``contracts``, what judges a subject
    (its oracle, its declared order's reference) is added wherever a contract line asks for it."""
    cases, devices, contexts = list(cases), list(devices), list(contexts)
    subjects = _with_judges(subjects, contracts, devices, contexts)
    prepare_accepts(subjects, cases)  # plug-in subjects: asked in child processes, once per plug-in
    tasks = []
    for ctx in contexts:
        for dev in devices:
            if not ctx.applies_to(dev.kind):
                continue
            for subj in subjects:
                is_oracle = subj.role == "oracle"
                if is_oracle and (ctx.name not in oracle_contexts or dev.kind not in subj.devices):
                    continue
                if dev.kind not in subj.devices:
                    continue
                for case in cases:
                    if case.spec.get("relation") is not None and ctx.name not in relation_contexts:
                        continue
                    if subj.applies_to(case):
                        tasks.append(Task(case, subj.name, dev.id, ctx.name))
    return tasks


def _with_judges(subjects: Iterable[Subject], contracts: Any, devices: Sequence[Device],
                 contexts: Sequence[Context]) -> list[Subject]:
    """The subjects asked for, plus what judges them where a contract line asks for it: the oracle of a subject
    whose line says ``oracle = "within"``, whatever ``--subjects`` names (a run without the oracle said "all
    contracts hold" having judged nothing), and the reference of a declared accumulation order."""
    from harness.subjects.registry import SUBJECTS, order_reference

    out = list(subjects)
    if contracts is None:
        return out
    names = {s.name for s in out}
    for s in list(out):
        if s.role != "subject":
            continue
        lines = [contracts.find(s.name, d.kind, c.name) for d in devices for c in contexts]
        judges = [s.oracle] if any(ln is not None and ln.oracle == "within" for ln in lines) else []
        judges += [ref[0] for d in devices if (ref := order_reference(s.name, d.kind))]
        for j in judges:
            if j and j not in names and j in SUBJECTS:
                out.append(SUBJECTS[j])
                names.add(j)
    return out


#: With ``jobs=0``, a group of tasks gets one lane per this many tasks (and at most :func:`default_jobs`):
#: a lane costs a pooled worker (a fork of the zygote) and a thread, which a few short tasks do not repay.
MIN_TASKS_PER_LANE = 32


def _tensor_meta(arrays: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """What a run record says of each array (digest, dtype, shape, NaN/Inf counts): for results that did not
    come from a worker's answer, which carries the same, taken in the worker by the same function."""
    return tensor_meta(arrays)


def load_tasks(directory: str) -> dict[str, TaskRecord]:
    """The finished task records of a campaign directory, by key (a torn last line is ignored; a malformed
    line is a one-line :class:`~harness.core.errors.RecordError` naming the file and line)."""
    return read_tasks(os.path.join(directory, "tasks.jsonl"))


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
            with self.cond:
                self.now.discard(k)
                self.cond.notify_all()

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
    settings: CampaignSettings
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

    def _new(self, label: str) -> Worker:
        # The pooled worker is forked from its environment's zygote (a fork, not an import); a fresh one is
        # a brand-new interpreter, its own hash seed and imports (see harness.execute.worker).
        return Worker(env=dict(self.context.env), plugins=self.settings.plugins, label=label,
                      fork=label == "pool").start()

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
                prestart_zygote(self.context.env)
        return self

    def start(self) -> None:
        """The pooled worker ready (launching every worker first where :meth:`launch` was not called). The
        fresh ones are waited for by the first run that takes each (:meth:`worker`): a task's pooled runs
        come first, so they run while the fresh interpreters still import Chainer."""
        self.launch()
        if self.pool is None:
            self.pool = self._new("pool")
        self.pool.wait_ready()
        self.startup_seconds += self.pool.startup_seconds

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

    def worker(self, slot: str) -> Worker:
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


@dataclass
class TaskOutcome:
    """What running one task produced, before anything is written: the task record, one line per run,
    repetition 0's arrays (empty when no run succeeded) and the time spent (for ``timings.json``)."""

    record: TaskRecord
    runs: list[dict[str, Any]]
    arrays: dict[str, np.ndarray]
    seconds: dict[str, float]


def group_key(task: Task) -> tuple[Any, ...]:
    """Tasks with the same key can share one :class:`WorkerSet`: contexts that differ only in what is applied
    at run time (BLAS threads, Chainer config) share workers; environment variables or GPU contention do not."""
    c = get_context(task.context)
    return (c.env, c.contention)


def run_task(task: Task, workers: WorkerSet, settings: CampaignSettings) -> TaskOutcome:
    """Run one task R times in the pooled worker and once in each fresh worker; summarize the repetitions.

    Pure of files: the caller (a :class:`Campaign`, or a cluster worker sending the outcome back) writes it.
    """
    device = parse_device(task.device)
    ok, reason = admission.availability(device, task.case, task.subject)  # a case too large: "needs N GiB"
    timeout = admission.timeout(task.case, task.subject, task.device, settings.timeout)
    refused = accepts_error(task.subject, task.case.id)
    if refused is not None:  # a plug-in's accepts() raised, crashed or hung on this case: its row says so
        res = RunResult(task.subject, task.case.id, task.device, task.context, "error",
                        error=ErrorInfo("PluginError", refused, "setup"))
        return outcome_of(task, [("pool", res)], None, [{"key": task.key, "rep": 0, "process": "parent", "pid": None,
                                                        "wall": 0.0, **res.meta(), "tensors": {}}])
    # each fresh run in a fresh worker this task has not run in yet (which one: the first free, see WorkerSet.use)
    slots = ["pool"] * settings.repeats + ["fresh"] * settings.fresh
    if get_subject(task.subject).role == "oracle" or task.case.spec.get("relation") is not None:
        # The float64 oracles are references, not subjects under suspicion, and a relation's member is
        # compared with its base case, not with itself: two runs in one process show they are stable;
        # more would only cost time (the base case gets the full R + K).
        slots = ["pool"] * min(2, settings.repeats)
    results: list[tuple[str, RunResult]] = []
    metas: list[dict[str, dict[str, Any]]] = []
    lines: list[dict[str, Any]] = []
    seconds = {"subject": 0.0, "transfer_and_overhead": 0.0, "compare": 0.0, "runs": 0}
    case_json = task.case.to_json()
    used: set[int] = set()

    def record(slot: str, pid: int | None, res: RunResult, meta: dict[str, dict[str, Any]], wall: float) -> bool:
        """One run's line and result; False when the runs stop here (a skip is decided before anything runs:
        once is the whole story)."""
        rep = len(results)
        seconds["runs"] += 1
        seconds["subject"] += res.subject_seconds
        seconds["transfer_and_overhead"] += max(wall - res.subject_seconds, 0.0)
        if not ok or res.arrays.keys() != meta.keys():
            meta = _tensor_meta(res.arrays)
        metas.append(meta)
        lines.append({"key": task.key, "rep": rep, "process": slot, "pid": pid, "wall": wall, **res.meta(),
                      "tensors": meta})
        results.append((slot, res))
        return res.status != "skipped"

    def crashed(exc: WorkerError) -> RunResult:
        return RunResult(task.subject, task.case.id, task.device, task.context, "crashed",
                         error=ErrorInfo("WorkerError", str(exc), "setup"))

    while len(results) < len(slots):
        want = slots[len(results)]
        t0 = time.perf_counter()
        if not ok:
            res = RunResult(task.subject, task.case.id, task.device, task.context, "skipped", skip_reason=reason)
            if not record(want, None, res, {}, time.perf_counter() - t0):
                break
        elif want == "pool":
            # The task's pooled runs asked for at once: the worker runs them back to back while this process
            # takes in each answer; one that ends the worker ends the stream, and the rest go to its successor.
            n = slots.count("pool") - len(results)  # the pooled slots come first: every run so far was one
            go = True
            try:
                with workers.use("pool") as (slot, w):
                    pid = w.pid
                    for answer in w.run_answers(case_json, task.subject, task.device, task.context,
                                                timeout, n, case_id=task.case.id):
                        now = time.perf_counter()  # the worker ran this one while the last was taken in
                        go = record(slot, pid, answer.result, answer.tensors, now - t0)
                        t0 = now
                        if not go:
                            break
            except WorkerError as exc:
                go = record("pool", None, crashed(exc), {}, time.perf_counter() - t0)
            if not go:
                break
        else:
            before = set(used)
            meta: dict[str, dict[str, Any]] = {}
            slot = f"fresh:{len(used)}"
            try:
                with workers.use(want, used) as (slot, w):  # marks the fresh worker it takes as used
                    pid = w.pid
                    answer = w.run_answer(case_json, task.subject, task.device, task.context, timeout,
                                          case_id=task.case.id)
                res, meta = answer.result, answer.tensors  # digests and NaN/Inf counts taken in the worker
            except WorkerError as exc:
                taken = used - before  # a fresh worker that could not run: the row names it, the next run tries another
                slot = f"fresh:{min(taken)}" if taken else slot
                pid = None
                res = crashed(exc)
            if not record(slot, pid, res, meta, time.perf_counter() - t0):
                break
    t0 = time.perf_counter()
    outcome = outcome_of(task, results, metas, lines)
    seconds["compare"] += time.perf_counter() - t0
    outcome.seconds.update(seconds)
    return outcome


def outcome_of(task: Task, results: Sequence[tuple[str, RunResult]],
               metas: list[dict[str, dict[str, Any]]] | None = None,
               runs: list[dict[str, Any]] | None = None) -> TaskOutcome:
    """The outcome of a task from its run results (each labelled by its worker slot, 'pool' or 'fresh:k')."""
    results = list(results)
    ok_reps = [r for _, r in results if r.ok]
    return TaskOutcome(_summarize(task, results, metas), list(runs or []),
                       dict(ok_reps[0].arrays) if ok_reps else {}, {})


class LocalPool:
    """Runs task groups on this machine: per start-up environment, :meth:`CampaignSettings.lanes` lanes, each
    its own :class:`WorkerSet`, taking the group's tasks in turn; outcomes come back in the tasks' order.
    Tasks on a usable GPU run in the first lane only, one at a time (two at once on one GPU would make every
    context a contention context), and a group under GPU contention runs in one lane. The default executor
    of a :class:`Campaign`."""

    #: A lane does not start a task more than this many tasks ahead of the oldest one not yet handed back
    #: (a hung run holds the order; the outcomes waiting behind it are held in memory).
    WINDOW = 64

    def __init__(self) -> None:
        self.stats: dict[str, float] = {"worker_startup": 0.0, "restarts": 0}
        #: worker sets launched ahead of their group (:meth:`launch`, and the next group while one runs)
        self._ahead: dict[tuple[Any, ...], list[WorkerSet]] = {}

    @staticmethod
    def _groups(tasks: Sequence[Task]) -> list[list[Task]]:
        by_group: dict[tuple[Any, ...], list[Task]] = {}
        for t in tasks:
            by_group.setdefault(group_key(t), []).append(t)
        return list(by_group.values())

    @staticmethod
    def _needs_workers(group: Sequence[Task]) -> bool:
        return any(parse_device(t.device).available for t in group)

    @staticmethod
    def _worker_sets(group: Sequence[Task], settings: CampaignSettings) -> list[WorkerSet]:
        ctx = get_context(group[0].context)
        if ctx.contention:
            lanes = 1
        else:
            # Each lane starts its own workers (K of them new interpreters): by default a lane needs enough
            # tasks to pay for them; an explicit ``jobs`` is taken as given.
            most = len(group) if settings.jobs else -(-len(group) // MIN_TASKS_PER_LANE)
            lanes = max(1, min(settings.lanes(), most))
        first = WorkerSet(ctx, settings)
        return [first] + [WorkerSet(ctx, settings, shared=first) for _ in range(lanes - 1)]

    def _launch_ahead(self, group: Sequence[Task], settings: CampaignSettings) -> None:
        key = group_key(group[0])
        if key not in self._ahead and self._needs_workers(group):
            self._ahead[key] = [ws.launch() for ws in self._worker_sets(group, settings)]

    def launch(self, tasks: Sequence[Task], settings: CampaignSettings) -> None:
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

    def run(self, tasks: Sequence[Task], settings: CampaignSettings) -> Iterator[tuple[Task, TaskOutcome]]:
        groups = self._groups(tasks)
        try:
            for i, group in enumerate(groups):
                sets = self._ahead.pop(group_key(group[0]), None) or self._worker_sets(group, settings)
                if i + 1 < len(groups):
                    # The next environment's processes import Chainer while this group runs: its start-up is
                    # hidden behind this group's tasks rather than added after them.
                    self._launch_ahead(groups[i + 1], settings)
                yield from self._run_group(group, sets, self._needs_workers(group), settings)
        finally:
            self.discard()  # launched for a group that never ran (the caller stopped early)

    def _run_group(self, ctx_tasks: list[Task], sets: list[WorkerSet], needs_workers: bool,
                   settings: CampaignSettings) -> Iterator[tuple[Task, TaskOutcome]]:
        ctx = get_context(ctx_tasks[0].context)
        contention = None
        try:
            if ctx.contention:
                from harness.execute.contention import Contention

                gpus = sorted({t.device for t in ctx_tasks if parse_device(t.device).available})
                contention = Contention([parse_device(g) for g in gpus]).start() if gpus else None
            if len(sets) == 1:
                if needs_workers:
                    sets[0].start()
                for task in ctx_tasks:
                    with RUNNING.track(task):  # the progress line shows it while it runs
                        outcome = run_task(task, sets[0], settings)
                    yield task, outcome
            else:
                yield from _Lanes(ctx_tasks, sets, needs_workers, settings, self.WINDOW).outcomes()
        finally:
            if contention is not None:
                contention.stop()
            for ws in sets:
                ws.close()
                self.stats["worker_startup"] += ws.startup_seconds
                self.stats["restarts"] += ws.restarts


class _Lanes:
    """One thread per :class:`WorkerSet`; each takes the next task not yet taken and runs it. The threads
    spend their time waiting on their workers' pipes (the GIL is free then); :meth:`outcomes` hands the
    outcomes back in the tasks' order. A lane's exception stops the others and is raised by :meth:`outcomes`;
    so is the caller's, once every lane has stopped (their workers are closed first, so none waits long)."""

    def __init__(self, tasks: list[Task], sets: list[WorkerSet], needs_workers: bool,
                 settings: CampaignSettings, window: int) -> None:
        self.tasks, self.sets, self.settings, self.window = tasks, sets, settings, window
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
        """The first task not taken that ``lane`` may run, waiting while it lies beyond the window; None when
        there is none left for this lane (or the campaign stopped). Called with ``cond`` held."""
        while not self.stop:
            j = next((j for j in range(self.head, len(self.tasks))
                      if not self.taken[j] and (lane == 0 or not self.gpu[j])), None)
            if j is None:
                return None
            task = self.tasks[j]
            if j - self.head < self.window and self.memory.take(j, admission.host_bytes(task.case, task.subject,
                                                                                        task.device)):
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
                with RUNNING.track(self.tasks[j]):  # the progress line shows it while it runs
                    outcome = run_task(self.tasks[j], ws, self.settings)
                with self.cond:
                    self.memory.give(j)
                    self.done[j] = outcome
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


#: At most this many bytes of repetition-0 arrays a campaign keeps in memory for its measure pass.
HELD_BYTES = 512 << 20


class Campaign:
    """Runs a plan into a directory, resumably. ``run`` returns the task records (old and new)."""

    def __init__(self, directory: str, settings: CampaignSettings) -> None:
        self.dir = directory
        self.settings = settings
        os.makedirs(os.path.join(directory, "arrays"), exist_ok=True)
        self.stats: dict[str, float] = {"worker_startup": 0.0, "subject": 0.0, "compare": 0.0,
                                        "transfer_and_overhead": 0.0, "runs": 0, "restarts": 0}
        #: The arrays files this run wrote, still in memory (up to :data:`HELD_BYTES`), by name: the measure
        #: pass that follows reads them here rather than from the files it was just written to.
        self.held: dict[str, dict[str, np.ndarray]] = {}
        self._held_bytes = 0

    # ---- files ------------------------------------------------------------------------
    def write_inputs(self, cases: Sequence[Case], meta: dict[str, Any]) -> None:
        """Record the corpus and the settings (for replay and ``--resume``)."""
        write_corpus(cases, os.path.join(self.dir, "corpus.jsonl"))
        meta = {**meta, "corpus": corpus_stamp(cases), "repeats": self.settings.repeats, "fresh": self.settings.fresh,
                "timeout": self.settings.timeout, "plugins": list(self.settings.plugins)}
        atomic_json(os.path.join(self.dir, "campaign.json"), meta)

    # ---- running ---------------------------------------------------------------------
    def run(self, tasks: Sequence[Task], executor: Any = None) -> dict[str, TaskRecord]:
        """Run the tasks not finished yet with ``executor`` (default a :class:`LocalPool`), writing each
        outcome as it arrives: its runs to ``runs.jsonl``, its record to ``tasks.jsonl``, its arrays."""
        done = self.repair()
        todo = [t for t in tasks if t.key not in done]
        progress = Progress(len(todo), self.settings.quiet,  # weighted by what each task will cost
                            admission.weights(todo, self.settings.repeats, self.settings.fresh)).start()
        executor = executor if executor is not None else LocalPool()
        with open(os.path.join(self.dir, "runs.jsonl"), "a", encoding="utf-8") as runs_f, \
                open(os.path.join(self.dir, "tasks.jsonl"), "a", encoding="utf-8") as tasks_f:
            try:
                for task, outcome in executor.run(todo, self.settings):
                    rec = self.write_outcome(task, outcome, runs_f, tasks_f)
                    done[task.key] = rec
                    progress.step(rec, task.key)
            finally:
                progress.stop()
                for k, v in getattr(executor, "stats", {}).items():
                    self.stats[k] = self.stats.get(k, 0.0) + v
        return done

    def repair(self) -> dict[str, TaskRecord]:
        """Before appending (a resume): the finished task records, with ``tasks.jsonl`` and ``runs.jsonl``
        rewritten clean: torn lines dropped wherever they are (their tasks rerun), and the run lines of tasks
        that did not finish dropped too (they rerun, and would otherwise be in the file twice). A finished
        report's compressed files come back plain."""
        tasks_path = os.path.join(self.dir, "tasks.jsonl")
        repair_jsonl(tasks_path)
        done = load_tasks(self.dir)
        # A task whose repetition-0 arrays are gone or cut down (a finished report keeps only its findings'
        # worst tensors: harness.outputs.report.prune_arrays) runs again: measured without them, its verdicts
        # would say "not judged" where the first report judged.
        lost = {k for k, r in done.items() if not arrays_complete(self.dir, r)}
        lost |= runs_short(done.values(), (obj for _, obj in read_records(os.path.join(self.dir, "runs.jsonl"))))
        if lost:
            repair_jsonl(tasks_path, keep=lambda line: isinstance(line, dict) and line.get("key") not in lost)
            done = {k: r for k, r in done.items() if k not in lost}
        repair_jsonl(os.path.join(self.dir, "runs.jsonl"),
                     keep=lambda line: isinstance(line, dict) and line.get("key") in done)
        return done

    def write_outcome(self, task: Task, outcome: TaskOutcome, runs_f: Any, tasks_f: Any) -> TaskRecord:
        """Write one task's outcome (runs first, then arrays, then the record that names them)."""
        for line in outcome.runs:
            runs_f.write(json.dumps(line, sort_keys=True) + "\n")
        runs_f.flush()
        rec = outcome.record
        if outcome.arrays:
            fname = array_file(task.key)
            atomic_npz(os.path.join(self.dir, "arrays", fname), outcome.arrays)
            rec = dataclasses.replace(rec, array_file=fname)
            size = sum(a.nbytes for a in outcome.arrays.values())
            if self._held_bytes + size <= HELD_BYTES:
                self.held[fname] = dict(outcome.arrays)
                self._held_bytes += size
        tasks_f.write(json.dumps(rec.to_dict(), sort_keys=True) + "\n")
        tasks_f.flush()
        for k, v in outcome.seconds.items():
            self.stats[k] = self.stats.get(k, 0.0) + v
        return rec


def _summarize(task: Task, results: list[tuple[str, RunResult]],
               metas: list[dict[str, dict[str, Any]]] | None = None) -> TaskRecord:
    if metas is None:
        metas = [_tensor_meta(r.arrays) for _, r in results]
    statuses = [r.status for _, r in results]
    ok_reps = [r for _, r in results if r.ok]
    errors = [r.error.to_dict() for _, r in results if r.error is not None]
    tensors: dict[str, TensorStats] = {}
    rep_digests: dict[str, tuple[str | None, ...]] = {}
    if ok_reps:
        reps = [r.arrays for r in ok_reps]
        names = sorted({k for a in reps for k in a})
        # Per repetition, so the judge can tell run-to-run (pool) from across-process (fresh) drift.
        ok_metas = [m for m, (_, r) in zip(metas, results) if r.ok]
        # Digests already taken for runs.jsonl: reuse them rather than hash every array again.
        rep_digests = {k: tuple(m[k]["digest"] if k in m else None for m in ok_metas) for k in names}
        # NaN/Inf counts of the first repetition holding the name, as recorded: nothing is counted again.
        counts = {}
        for k in names:
            first = next((m[k] for m in ok_metas if k in m), None)
            if first is not None and "nan" in first:
                counts[k] = (int(first["nan"]), int(first["inf"]))
            elif first is not None and np.dtype(first["dtype"]).kind not in "fc":
                counts[k] = (0, 0)  # no NaN in integers; complex ones are counted by the comparator
        for name, c in compare.compare_results(reps, rep_digests, counts).items():
            worst = None
            if not c.bitwise_identical and c.diff_reps:
                idx = c.max_ulp_index if c.max_ulp_index is not None else c.first_diff_index
                worst = (value_text(reps[0].get(name), idx),
                         value_text(reps[c.diff_reps[0]].get(name), idx))
            tensors[name] = TensorStats.from_comparison(c, worst, sketch=tensor_sketch(reps[0].get(name)))
    return TaskRecord(
        key=task.key, case_id=task.case.id, family=task.case.family, subject=task.subject,
        device=task.device, context=task.context, bad_input=task.case.bad,
        runs=len(results), ok_runs=len(ok_reps),
        statuses={s: statuses.count(s) for s in sorted(set(statuses))},
        status=("ok" if len(ok_reps) == len(results) else
                "skipped" if statuses and statuses[0] == "skipped" else
                "error" if not ok_reps else "partial"),
        skip_reason=next((r.skip_reason for _, r in results if r.skip_reason), None),
        errors=tuple(errors[:1] + [e for e in errors[1:] if e["message"] != errors[0]["message"]][:3]),
        declared_warnings=tuple(sorted({w for _, r in results for w in r.declared_warnings})),
        subject_seconds=sum(r.subject_seconds for _, r in results),
        processes=tuple(sorted({slot for slot, _ in results})),
        tensors=tensors, array_file=None,
        rep_processes=tuple(slot for slot, r in results if r.ok), rep_digests=rep_digests)


def arrays_complete(directory: str, rec: TaskRecord) -> bool:
    """Whether a task's arrays file holds every array of its repetition 0 (the names its record's digests give
    for the first successful repetition); True for a task that kept no arrays."""
    if not rec.array_file:
        return True
    path = os.path.join(directory, "arrays", rec.array_file)
    members = npz_members(path) if npz_sound(path) else None  # damaged: the task runs again
    if members is None:
        return False
    return all(npz_key(k) in members for k, d in rec.rep_digests.items() if d and d[0] is not None)


def load_arrays(directory: str, fname: str | None) -> dict[str, np.ndarray]:
    """Repetition 0's arrays of a task (empty when the task produced none)."""
    if not fname:
        return {}
    with np.load(os.path.join(directory, "arrays", fname), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def resume_inputs(directory: str) -> tuple[list[Case], dict[str, Any]]:
    """The corpus and settings of an earlier campaign, for ``--resume``."""
    meta_path = os.path.join(directory, "campaign.json")
    if not os.path.exists(meta_path):
        raise InvalidArgument(f"resume={directory!r} holds no campaign.json: nothing to resume")
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    return load_corpus(os.path.join(directory, "corpus.jsonl")), meta
