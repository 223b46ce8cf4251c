"""One task's runs: ``R`` in the pooled worker and one in each of ``K`` fresh workers, and their summary.

:func:`run_task` runs a task in a :class:`~harness.execute.worker_sets.WorkerSet` and returns its
:class:`TaskOutcome`: the task's record (the comparison of its repetitions, from the digests the workers
took, so repetitions whose digests agree are compared without reading an array), one line per run, and
repetition 0's arrays. It writes nothing: the caller (a :class:`~harness.execute.campaign.Campaign`, or a
cluster worker sending the outcome back) does.

A run that times out (its worker used the CPU limit, or slept past the wall limit: :mod:`harness.execute.
run_clock`) is tried again in its slot alone, with no other lane's run beside it (:mod:`harness.execute.solo`),
and twice the limit, before anything is concluded: an answer then makes the timeout an infrastructure note
(:attr:`TaskOutcome.notes`), never a finding; a hang alone too (the CPU limit spent, or the wall limit reached
asleep) is the ``timeout`` finding; a worker the machine starved alone too is "not judged: timed out twice".

Apart from the lanes that call it (:mod:`harness.execute.lanes`): ``replay``, ``shrink``, a Dask worker and
the in-process runs (:func:`outcome_of`) take a task's outcome the same way without the campaign's lanes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from harness.core.cost import oom_killed_twice, timed_out_twice
from harness.core.devices import parse_device
from harness.core.errors import WorkerError
from harness.core.records import TaskRecord, TensorComparison
from harness.core.vocabulary import INPUTS_TIMING
from harness.execute import admission
from harness.execute.answers import Answer, tensor_meta
from harness.execute.plan import Task
from harness.execute.run_clock import oom_kills
from harness.execute.settings import CampaignOptions
from harness.execute.solo import SOLO
from harness.execute.worker_sets import WorkerSet
from harness.generate.dimensions import size_case_runs
from harness.judge import comparator as compare
from harness.judge.sketch import sketch_all
from harness.judge.ulp import value_text
from harness.subjects.base import ErrorInfo, RunResult
from harness.subjects.registry import accepts_error, get_subject

__all__ = ["TaskOutcome", "run_task", "outcome_of"]


def _tensor_meta(arrays: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """What a run record says of each array (digest, dtype, shape, NaN/Inf counts): for results that did not
    come from a worker's answer, which carries the same, taken in the worker by the same function."""
    return tensor_meta(arrays)


@dataclass
class TaskOutcome:
    """What running one task produced, before anything is written: the task record, one line per run,
    repetition 0's arrays (empty when no run succeeded) and the time spent (for ``timings.json``)."""

    record: TaskRecord
    runs: list[dict[str, Any]]
    arrays: dict[str, np.ndarray]
    seconds: dict[str, float]

    @property
    def notes(self) -> tuple[str, ...]:
        """Infrastructure notes (:attr:`TaskRecord.notes`): a run that timed out beside others and answered
        alone (never a finding)."""
        return self.record.notes

    @property
    def array_bytes(self) -> int:
        """The bytes of :attr:`arrays`: what the outcome holds in memory until it is written."""
        return sum(a.nbytes for a in self.arrays.values())


def killed_for_memory(res: RunResult, kills_before: int | None) -> bool:
    """Whether a run's worker died of SIGKILL while the kernel's out-of-memory killer ended a process
    (:func:`~harness.execute.run_clock.oom_kills` grew since ``kills_before``): the machine's memory ran out,
    which other processes may have caused; such a run is tried again alone before anything is concluded."""
    if res.status != "crashed" or res.error is None or res.error.type != "WorkerCrash" or kills_before is None:
        return False
    now = oom_kills()
    return "SIGKILL" in res.error.message and now is not None and now > kills_before


def run_task(task: Task, workers: WorkerSet, settings: CampaignOptions) -> TaskOutcome:
    """Run one task R times in the pooled worker and once in each fresh worker; summarize the repetitions.

    Pure of files: the caller (a :class:`~harness.execute.campaign.Campaign`, or a cluster worker sending the
    outcome back) writes it.
    """
    device = parse_device(task.device)
    # a case too large for the limit (a user's --max-case-bytes, else the default): "needs N GiB"
    ok, reason = admission.availability(device, task.case, task.subject, settings.max_case_bytes)
    timeout = admission.timeout(task.case, task.subject, task.device, settings.timeout)
    refused = accepts_error(task.subject, task.case.id)
    if refused is not None:  # a plug-in's accepts() raised, crashed or hung on this case: its row says so
        res = RunResult(task.subject, task.case.id, task.device, task.context, "error",
                        error=ErrorInfo("PluginError", refused, "setup"))
        return outcome_of(task, [("pool", res)], None, [{"key": task.key, "rep": 0, "process": "parent", "pid": None,
                                                        "wall": 0.0, **res.meta(), "tensors": {}}])
    # a size case (a corner, a real model's shapes): fewer runs, none in a context that cannot change its bits
    repeats, fresh, left_out = size_case_runs(task.case, task.context, device.kind, settings.repeats, settings.fresh)
    if left_out is not None and ok:
        ok, reason = False, left_out
    # each fresh run in a fresh worker this task has not run in yet (which one: the first free, see WorkerSet.use)
    slots = ["pool"] * repeats + ["fresh"] * fresh
    if get_subject(task.subject).role == "oracle" or task.case.spec.get("relation") is not None:
        # The float64 oracles are references, not subjects under suspicion, and a relation's member is
        # compared with its base case, not with itself: two runs in one process show they are stable;
        # more would only cost time (the base case gets the full R + K).
        slots = ["pool"] * min(2, repeats)
    results: list[tuple[str, RunResult]] = []
    metas: list[dict[str, dict[str, Any]]] = []
    lines: list[dict[str, Any]] = []
    # inputs: the runs' seconds building the case's arrays in the workers (within transfer_and_overhead)
    seconds = {"subject": 0.0, "transfer_and_overhead": 0.0, "inputs": 0.0, "compare": 0.0, "runs": 0}
    notes: list[str] = []  # the timeouts that did not happen again alone: a busy machine, said in the report
    case_json = task.case.to_json()
    used: set[int] = set()

    def record(slot: str, pid: int | None, res: RunResult, meta: dict[str, dict[str, Any]], wall: float,
               **extra: Any) -> bool:
        """One run's line and result; False when the runs stop here (a skip is decided before anything runs:
        once is the whole story; a run the machine starved twice is one too)."""
        rep = len(results)
        seconds["runs"] += 1
        seconds["subject"] += res.subject_seconds
        seconds["transfer_and_overhead"] += max(wall - res.subject_seconds, 0.0)
        seconds["inputs"] += res.timings.get(INPUTS_TIMING, 0.0)
        if not ok or res.arrays.keys() != meta.keys():
            meta = _tensor_meta(res.arrays)
        metas.append(meta)
        lines.append({"key": task.key, "rep": rep, "process": slot, "pid": pid, "wall": wall, **res.meta(),
                      "tensors": meta, **extra})
        results.append((slot, res))
        return res.status != "skipped"

    def crashed(exc: WorkerError) -> RunResult:
        return RunResult(task.subject, task.case.id, task.device, task.context, "crashed",
                         error=ErrorInfo("WorkerError", str(exc), "setup"))

    def again(slot: str, pid: int | None, first: Answer, wall: float) -> bool:
        """A run that timed out, or whose worker the out-of-memory killer ended (:func:`killed_for_memory`), tried
        again in its slot alone (no other lane's run beside it: :data:`SOLO`) with twice the limit. An answer
        then makes the first an infrastructure note (the run line's ``retried``; ``notes``), never a finding; a
        second timeout that says the subject hangs (it spent the CPU limit, or slept to the wall limit with a
        core free) is recorded twice and ends the task's runs; one the machine starved again, or whose memory
        ran out again, is a ``skipped`` run whose reason says so (not judged: :func:`timed_out_twice`,
        :func:`oom_killed_twice`)."""
        seconds["retried"] = seconds.get("retried", 0.0) + 1
        t0 = time.perf_counter()
        kills = oom_kills()
        try:
            with workers.use_again(slot) as w, SOLO.alone():
                pid2 = w.pid
                second = w.run_answer(case_json, task.subject, task.device, task.context, 2 * timeout,
                                      case_id=task.case.id)
        except WorkerError as exc:
            return record(slot, None, crashed(exc), {}, time.perf_counter() - t0)
        wall2 = time.perf_counter() - t0
        memory = first.result.status == "crashed"  # the out-of-memory killer ended the first (the callers' test)
        before = {"status": first.result.status, "pid": pid, "wall": wall, "error": first.result.error.to_dict()
                  if first.result.error is not None else None,
                  "cpu": first.timing.to_dict() if first.timing is not None else None,
                  **({"killed_for_memory": True} if memory else {})}
        if memory:
            if killed_for_memory(second.result, kills):
                res = RunResult(task.subject, task.case.id, task.device, task.context, "skipped",
                                skip_reason=oom_killed_twice())
                return record(slot, pid2, res, {}, wall2, retried=before)
            if second.result.status in ("ok", "error"):
                notes.append(f"{task.subject} [{task.device}] {task.context} on case {task.case.id}: run "
                             f"{len(results)}'s worker was ended by the kernel's out-of-memory killer beside other "
                             f"runs; alone it answered {second.result.status} in {wall2:.1f} s: the machine's "
                             f"memory was short, not a finding")
                return record(slot, pid2, second.result, second.tensors, wall2, retried=before)
            record(slot, pid, first.result, {}, wall)
            record(slot, pid2, second.result, second.tensors, wall2, alone=True)
            return False  # alone it failed otherwise: both runs are the finding's
        if second.result.status != "timeout":
            why = first.timing.describe() if first.timing is not None else "no answer in time"
            notes.append(f"{task.subject} [{task.device}] {task.context} on case {task.case.id}: run {len(results)} "
                         f"timed out beside other runs ({why}); alone with a doubled limit it answered "
                         f"{second.result.status} in {wall2:.1f} s: a busy machine, not a finding")
            return record(slot, pid2, second.result, second.tensors, wall2, retried=before)
        if second.timing is not None and not second.timing.hang:
            res = RunResult(task.subject, task.case.id, task.device, task.context, "skipped",
                            skip_reason=timed_out_twice(2 * timeout, second.timing.share))
            return record(slot, pid2, res, {}, wall2, retried=before,
                          cpu=second.timing.to_dict())
        record(slot, pid, first.result, {}, wall,
               **({"cpu": first.timing.to_dict()} if first.timing is not None else {}))
        record(slot, pid2, second.result, {}, wall2, alone=True,
               **({"cpu": second.timing.to_dict()} if second.timing is not None else {}))
        return False  # it hangs alone too: the finding is made; more runs would only wait as long again

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
            timed_out: tuple[str, int | None, Answer, float] | None = None
            try:
                with workers.use("pool") as (slot, w), SOLO.shared():
                    pid = w.pid
                    kills = oom_kills()
                    for answer in w.run_answers(case_json, task.subject, task.device, task.context,
                                                timeout, n, case_id=task.case.id):
                        now = time.perf_counter()  # the worker ran this one while the last was taken in
                        if answer.result.status == "timeout" or killed_for_memory(answer.result, kills):
                            timed_out = (slot, pid, answer, now - t0)
                            break
                        go = record(slot, pid, answer.result, answer.tensors, now - t0)
                        t0 = now
                        if not go:
                            break
            except WorkerError as exc:
                go = record("pool", None, crashed(exc), {}, time.perf_counter() - t0)
            if timed_out is not None:
                go = again(*timed_out)
            if not go:
                break
        else:
            before = set(used)
            meta: dict[str, dict[str, Any]] = {}
            slot = f"fresh:{len(used)}"
            try:
                with workers.use(want, used) as (slot, w), SOLO.shared():  # marks the fresh worker it takes as used
                    pid = w.pid
                    kills = oom_kills()
                    answer = w.run_answer(case_json, task.subject, task.device, task.context, timeout,
                                          case_id=task.case.id)
                res, meta = answer.result, answer.tensors  # digests and NaN/Inf counts taken in the worker
            except WorkerError as exc:
                taken = used - before  # a fresh worker that could not run: the row names it, the next run tries another
                slot = f"fresh:{min(taken)}" if taken else slot
                pid = None
                res = crashed(exc)
            if res.status == "timeout" or (pid is not None and killed_for_memory(res, kills)):
                if not again(slot, pid, answer, time.perf_counter() - t0):
                    break
            elif not record(slot, pid, res, meta, time.perf_counter() - t0):
                break
    t0 = time.perf_counter()
    outcome = outcome_of(task, results, metas, lines)
    seconds["compare"] += time.perf_counter() - t0
    outcome.seconds.update(seconds)
    if notes:
        outcome.record = replace(outcome.record, notes=tuple(notes))
    return outcome


def outcome_of(task: Task, results: Sequence[tuple[str, RunResult]],
               metas: list[dict[str, dict[str, Any]]] | None = None,
               runs: list[dict[str, Any]] | None = None) -> TaskOutcome:
    """The outcome of a task from its run results (each labelled by its worker slot, 'pool' or 'fresh:k')."""
    results = list(results)
    ok_reps = [r for _, r in results if r.ok]
    return TaskOutcome(_summarize(task, results, metas), list(runs or []),
                       dict(ok_reps[0].arrays) if ok_reps else {}, {})


def _summarize(task: Task, results: list[tuple[str, RunResult]],
               metas: list[dict[str, dict[str, Any]]] | None = None) -> TaskRecord:
    if metas is None:
        metas = [_tensor_meta(r.arrays) for _, r in results]
    statuses = [r.status for _, r in results]
    ok_reps = [r for _, r in results if r.ok]
    errors = [r.error.to_dict() for _, r in results if r.error is not None]
    tensors: dict[str, TensorComparison] = {}
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
        compared = compare.compare_results(reps, rep_digests, counts)
        # rep 0's NaN/Inf counts, where its answer carried them: the sketch does not count them again
        sketches = dict(zip(compared, sketch_all([reps[0].get(n) for n in compared],
                                                 [counts.get(n) if n in ok_metas[0] else None for n in compared])))
        for name, c in compared.items():
            worst = None
            if not c.bitwise_identical and c.diff_reps:
                idx = c.max_ulp_index if c.max_ulp_index is not None else c.first_diff_index
                worst = (value_text(reps[0].get(name), idx),
                         value_text(reps[c.diff_reps[0]].get(name), idx))
            tensors[name] = replace(c, worst_values=worst, sketch=sketches[name])
    return TaskRecord(
        key=task.key, case_id=task.case.id, family=task.case.family, subject=task.subject,
        device=task.device, context=task.context, bad_input=task.case.bad,
        runs=len(results), ok_runs=len(ok_reps),
        statuses={s: statuses.count(s) for s in sorted(set(statuses))},
        # skipped: before anything ran, or a run the machine starved twice (its reason says which)
        status=("ok" if len(ok_reps) == len(results) else
                "skipped" if "skipped" in statuses else
                "error" if not ok_reps else "partial"),
        skip_reason=next((r.skip_reason for _, r in results if r.skip_reason), None),
        errors=tuple(errors[:1] + [e for e in errors[1:] if e["message"] != errors[0]["message"]][:3]),
        declared_warnings=tuple(sorted({w for _, r in results for w in r.declared_warnings})),
        subject_seconds=sum(r.subject_seconds for _, r in results),
        processes=tuple(sorted({slot for slot, _ in results})),
        tensors=tensors, array_file=None,
        rep_processes=tuple(slot for slot, r in results if r.ok), rep_digests=rep_digests)
