"""Runs in this process, measured exactly as a campaign's measure pass measures worker runs.

The pytest suites and ``replay`` use :func:`measure_here`: R runs of a subject on a case, the record the
campaign would write for them (:func:`harness.execute.task_runs.outcome_of`), and its measures from
:func:`harness.judge.measure.measure_task` -- the same judges, so an in-process verdict and a campaign verdict
on the same runs cannot disagree.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Sequence

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU, Device
from harness.core.kept import ArrayCache
from harness.core.records import Measure, TaskRecord
from harness.execute.plan import Task
from harness.execute.task_runs import outcome_of
from harness.judge.contracts import Contracts
from harness.judge.measure import Reference, measure_task
from harness.subjects.base import RunResult
from harness.subjects.base import execute as _execute
from harness.subjects.registry import get_subject

__all__ = ["Here", "measure_here", "oracle_arrays"]

#: Bytes of oracle outputs a process keeps for its in-process runs (the newest case's always).
ORACLE_BYTES = 512 << 20
_ORACLE_CACHE: ArrayCache[str] = ArrayCache()


@dataclass
class Here:
    """The runs, their record and their measures."""

    results: list[RunResult]
    record: TaskRecord
    measures: list[Measure]


#: The thread this process runs subjects in: (the process id it was started in, its executor). One thread for
#: every run, as a pooled worker has one (a GPU's cuBLAS handle is per thread); a forked child starts its own.
_RUNNER: tuple[int, ThreadPoolExecutor] | None = None
_RUNNER_NAME = "harness-in-process-run"


def execute(subject: Any, case: Case, device: Device, context: Any) -> RunResult:
    """:func:`harness.subjects.base.execute` on this process's run thread, so that the run starts at the stack
    depth it has in a campaign's worker. Chainer's debug mode records the Python stack at every function node
    it applies, and under pytest and Hypothesis that stack is some seventy frames deep: the same runs took
    half as long again. Everything a context applies (Chainer's configuration is per thread) it applies inside
    the run, so on that thread."""
    global _RUNNER
    from harness.core.cost import over_limit

    too_large = over_limit(case, device=device.id, subject=subject.name)
    if too_large is not None:  # refused by what it would cost, as a campaign refuses it: "not judged"
        return RunResult(subject.name, case.id, device.id, context.name, "skipped", skip_reason=too_large)
    if threading.current_thread().name.startswith(_RUNNER_NAME):
        return _execute(subject, case, device, context)  # a run that asks for a run: already on the thread
    if _RUNNER is None or _RUNNER[0] != os.getpid():
        _RUNNER = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix=_RUNNER_NAME))
    # what escapes the run (only a BaseException does: execute turns exceptions into error results) is
    # raised again here, in the caller's thread
    return _RUNNER[1].submit(_execute, subject, case, device, context).result()


def oracle_arrays(subject: str, case: Case) -> tuple[str, dict[str, Any]] | None:
    """``(oracle name, its arrays)`` for a subject's case (kept per case within :data:`ORACLE_BYTES`), None where
    no oracle applies or it failed."""
    name = get_subject(subject).oracle
    if name is None or not get_subject(name).applies_to(case):
        return None
    key = f"{name}|{case.id}"
    got = _ORACLE_CACHE.recent(key)
    if got is None:
        r = execute(get_subject(name), case, CPU, get_context("default"))
        got = dict(r.arrays) if r.ok else {}
        _ORACLE_CACHE.add(key, got, ORACLE_BYTES)
    return (name, got) if got else None


def measure_here(contracts: Contracts, subject: str, case: Case, device: Device, context: str = "default",
                 repeats: int = 3, *, contexts: Sequence[str] = (), devices: Sequence[Device] = ()) -> Here:
    """R runs of ``subject`` on ``case`` here, and every measure of them: run to run, against each of
    ``contexts`` and ``devices`` (run once each here), against the oracle, or by the bad-input rule.
    A bad input runs once."""
    rules = contracts.bad_rules(subject, device.kind, case.tags, context)
    contract = contracts.find(subject, device.kind, context)
    subj = get_subject(subject)
    bad = case.bad or bool(rules)
    ctx = get_context(context)
    results = [execute(subj, case, device, ctx) for _ in range(1 if bad else max(1, repeats))]
    record = outcome_of(Task(case, subject, device.id, context), [("pool", r) for r in results]).record
    arrays = next((r.arrays for r in results if r.ok), None)
    refs = []
    if results[0].status != "skipped" and arrays is not None and not bad:
        for other in contexts:
            o = execute(subj, case, device, get_context(other))
            refs.append(Reference("context", other, o.arrays if o.ok else None))
        for dev in devices:
            o = execute(subj, case, dev, ctx)
            refs.append(Reference("device", dev.id, o.arrays if o.ok else None))
    oracle = None if arrays is None else oracle_arrays(subject, case)  # None where the oracle does not apply
    measures = measure_task(record, case, contract, role=subj.role, bad_rules=rules, arrays=arrays,
                            references=refs, oracle=oracle,
                            known_defects=contracts.known_defects_for(subject, device.kind, case.tags, context))
    return Here(results, record, measures)
