"""Runs for ``replay`` and ``shrink``: every subject call in the campaign's worker processes, never here.

A :class:`Runner` keeps one :class:`~harness.execute.worker_sets.WorkerSet` per start-up environment alive between
calls (``shrink`` runs dozens of candidates; each costs a run, not an interpreter), and runs a task exactly as
the campaign does (:func:`~harness.execute.task_runs.run_task`: R runs in the pooled worker, one in each fresh
one). :func:`measure_isolated` then measures those runs with the campaign's own judge
(:func:`~harness.judge.measure.measure_task`), so a replayed verdict and a campaign verdict cannot disagree. A
crash, a hang past the timeout or an exit in a worker is a row, as in a campaign.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Sequence

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU, Device
from harness.core.records import Measure, TaskRecord
from harness.execute.plan import Task, group_key
from harness.execute.settings import CampaignOptions
from harness.execute.task_runs import TaskOutcome, run_task
from harness.execute.worker_sets import WorkerSet
from harness.judge.contracts import Contracts
from harness.judge.measure import Reference, measure_task
from harness.subjects.base import RunResult
from harness.subjects.registry import get_subject, order_reference

__all__ = ["Runner", "Isolated", "measure_isolated", "setup_failure"]


class Runner:
    """Worker processes kept between runs (close it, or use it as a context manager)."""

    def __init__(self, *, plugins: Sequence[str] = (), timeout: float | None = None, fresh: int = 0,
                 max_case_bytes: int | None = None) -> None:
        self.settings = CampaignOptions(repeats=1, fresh=fresh, timeout=timeout, plugins=tuple(plugins), quiet=True,
                                         max_case_bytes=max_case_bytes)
        self._sets: dict[Any, WorkerSet] = {}
        self.runs = 0

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(self, case: Case, subject: str, device: Device, context: str, *, repeats: int = 1,
            fresh: int = 0) -> TaskOutcome:
        """``repeats`` runs in the pooled worker and one in each of ``fresh`` fresh workers (at most the
        Runner's own ``fresh``), measured run to run as the campaign measures them."""
        task = Task(case, subject, device.id, context)
        key = group_key(task)
        ws = self._sets.get(key)
        if ws is None:
            # no fresh interpreter until a run asks for one (each imports Chainer: a second of a core)
            ws = self._sets[key] = WorkerSet(get_context(context), dataclasses.replace(self.settings, fresh=0))
            if device.available:
                ws.start()
        settings = dataclasses.replace(self.settings, repeats=max(1, repeats),
                                       fresh=min(max(0, fresh), self.settings.fresh))
        if settings.fresh and device.available:
            ws.ensure_fresh(settings.fresh)
        outcome = run_task(task, ws, settings)
        self.runs += outcome.record.runs or 1
        return outcome

    def close(self) -> None:
        for ws in self._sets.values():
            ws.close()
        self._sets.clear()


@dataclass
class Isolated:
    """The runs of one task (the records of each repetition), its record and its measures."""

    results: list[RunResult]
    record: TaskRecord
    measures: list[Measure]
    arrays: dict[str, Any]
    #: The records of the runs it was compared with (other contexts, other devices), in that order.
    others: list[TaskRecord] = field(default_factory=list)


def _results(outcome: TaskOutcome) -> list[RunResult]:
    out = []
    for line in outcome.runs:
        out.append(RunResult(outcome.record.subject, outcome.record.case_id, outcome.record.device,
                             outcome.record.context, str(line.get("status", "")),
                             skip_reason=line.get("skip_reason")))
    return out


#: Errors of a worker that could not start (its interpreter, Chainer or a plug-in would not import).
_SETUP_ERRORS = ("WorkerError", "ImportError", "ModuleNotFoundError", "PluginError")


def setup_failure(record: TaskRecord) -> str | None:
    """The reason where no run could even start (the worker failed to import Chainer or a plug-in): a set-up
    problem of this machine, not a finding. None otherwise."""
    if record.ok_runs or record.status == "skipped" or not record.errors:
        return None
    if all(str(e.get("phase")) == "setup" and str(e.get("type")) in _SETUP_ERRORS for e in record.errors):
        e = record.errors[0]
        return f"{e.get('type')}: {e.get('message')}"
    return None


def measure_isolated(runner: Runner, contracts: Contracts, subject: str, case: Case, device: Device,
                     context: str = "default", repeats: int = 3, fresh: int = 0, *, contexts: Sequence[str] = (),
                     devices: Sequence[Device] = (), oracle: bool = True) -> Isolated:
    """R runs of ``subject`` on ``case`` (and one in each of ``fresh`` fresh processes) in workers, and every
    measure of them: run to run, against each of ``contexts`` and ``devices`` (one run each), against the oracle
    (``oracle``), or by the bad-input rule (a bad input runs once)."""
    rules = contracts.bad_rules(subject, device.kind, case.tags, context)
    contract = contracts.find(subject, device.kind, context)
    subj = get_subject(subject)
    bad = case.bad or bool(rules)
    main = runner.run(case, subject, device, context, repeats=1 if bad else repeats, fresh=0 if bad else fresh)
    record, arrays = main.record, main.arrays or None
    refs = []
    # A bad input is compared too: an accepted one like a valid case, an ``any`` rule's outcome (errors included)
    # with the same rule's outcome there -- so the record and its rules travel with the arrays.
    if record.status != "skipped" and (arrays is not None or bad):
        for other in contexts:
            o = runner.run(case, subject, device, other)
            refs.append(Reference("context", other, o.arrays or None, record=o.record,
                                  rules=contracts.bad_rules(subject, device.kind, case.tags, other)))
        for dev in devices:
            o = runner.run(case, subject, dev, context)
            refs.append(Reference("device", dev.id, o.arrays or None, record=o.record,
                                  rules=contracts.bad_rules(subject, dev.kind, case.tags, context)))
    oracle_pair = None
    if oracle and arrays is not None and subj.oracle is not None:
        osubj = get_subject(subj.oracle)
        if osubj.applies_to(case):  # valid cases, and bad inputs whose semantics the oracle documents
            o = runner.run(case, osubj.name, CPU, "default")
            oracle_pair = (osubj.name, o.arrays) if o.arrays else None
    order = None
    declared = order_reference(subject, device.kind)
    if declared is not None and arrays is not None and get_subject(declared[0]).applies_to(case):
        o = runner.run(case, declared[0], CPU, "default")
        order = (declared[0], o.arrays or None, declared[1])
    measures = measure_task(record, case, contract, role=subj.role, bad_rules=rules, arrays=arrays,
                            references=refs, oracle=oracle_pair, order=order,
                            known_defects=contracts.known_defects_for(subject, device.kind, case.tags, context))
    return Isolated(_results(main), record, measures, dict(arrays or {}),
                    [r.record for r in refs if r.record is not None])
