"""The one campaign driver: plan -> campaign directory -> runs -> measure pass.

``report``, ``gate``, ``audit`` and the bench all run a campaign through :func:`run_campaign`; only what they
do with the records and measures afterwards differs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from harness.core.cases import Case
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.core.records import Measure, TaskRecord
from harness.execute.campaign import Campaign, CampaignOptions
from harness.execute.measure_pass import Measurer, campaign_cases, measure_campaign
from harness.execute.plan import Task, plan
from harness.subjects.base import Subject

__all__ = ["CampaignRun", "run_campaign", "load_run"]


@dataclass
class CampaignRun:
    """What a campaign produced: its plan, records (old and new on a resume) and measures, and its stats."""

    directory: str
    tasks: list[Task]
    records: dict[str, TaskRecord]
    measures: list[Measure] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    #: Every case the campaign ran (the corpus and the relations' members), by id.
    cases: dict[str, Case] = field(default_factory=dict)
    #: The model cases' trajectories between contexts, where the caller compared them
    #: (:func:`harness.execute.trajectories.campaign_trajectories`)
    trajectories: list[Any] = field(default_factory=list)


def run_campaign(directory: str, cases: Sequence[Case], subjects: Sequence[Subject], devices: Sequence[Device],
                 contexts: Sequence[Context], settings: CampaignOptions, *, meta: Mapping[str, Any] | None = None,
                 contracts: Any = None, resume: bool = False, executor: Any = None,
                 oracle_contexts: tuple[str, ...] = ("default",), relations: Sequence[Any] = (),
                 while_starting: Callable[[], None] | None = None) -> CampaignRun:
    """Plan every applicable task, run those not finished yet into ``directory`` (writing ``corpus.jsonl`` and
    ``campaign.json`` first unless ``resume``), then measure them all under ``contracts`` (the shipped
    contracts file when None) into ``measures.jsonl``. ``executor`` runs the tasks (default: the local pool).
    ``relations`` (:class:`~harness.execute.relations.Relation`) add each case's members to the corpus (once:
    a resumed corpus already holds them); they run in the default context. ``while_starting``: the caller's
    own work (a report imports its plotting library), started on a thread once the first workers are launched,
    beside the first runs; what it raises is raised once the runs are written, before the measure pass."""
    if contracts is None:
        from harness.judge.contracts import load_contracts

        contracts = load_contracts(None)
    cases = list(cases)
    if relations and not resume:
        from harness.execute.relations import members

        cases = cases + [m.case for c in cases for m in members(c, relations)]
    tasks = plan(cases, subjects, devices, contexts, oracle_contexts=oracle_contexts, contracts=contracts)
    campaign = Campaign(directory, settings)
    if not resume:
        campaign.write_inputs(cases, {"subjects": [s.name for s in subjects], "devices": [d.id for d in devices],
                                      "contexts": [c.name for c in contexts], "contracts": str(contracts.path),
                                      "relations": [r.name for r in relations], **dict(meta or {})})
    beside = None
    if while_starting is not None:
        if executor is None:
            from harness.execute.lanes import LocalPool

            executor = LocalPool()
        launch = getattr(executor, "launch", None)  # a cluster's executor starts its workers elsewhere
        if launch is not None:
            launch(tasks, settings)
        beside = _Beside(while_starting)
    by_id = {c.id: c for c in cases}
    # Each task is measured as soon as the tasks it is compared with have finished, beside the next runs.
    measurer = Measurer(directory, contracts, campaign_cases(directory) if resume else by_id,
                        [(t.case.id, t.subject, t.device, t.context) for t in tasks], held=campaign.held)
    try:
        records = campaign.run(tasks, executor=executor, on_record=measurer.add)
    except BaseException:
        if beside is not None:
            beside.thread.join()  # the runs' own error is the one raised
            discard = getattr(executor, "discard", None)
            if discard is not None:  # launched above, and not taken by runs that stopped before they began
                discard()
        raise
    if beside is not None:
        beside.join()  # what it raised is raised now, once the runs are written
    t0 = time.perf_counter()
    measures = measurer.finish(records)
    campaign.held.clear()
    campaign.stats["measuring"] = time.perf_counter() - t0
    return CampaignRun(directory, tasks, records, measures, campaign.stats, by_id)


class _Beside:
    """The caller's ``while_starting`` work on a thread beside the campaign's first runs: the lanes' threads
    wait on their workers' pipes, so the work (a report's matplotlib import, half a second) no longer holds
    the first tasks back. :meth:`join` waits for it and raises what it raised."""

    def __init__(self, fn: Callable[[], None]) -> None:
        import threading

        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), name="harness-while-starting", daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread by join()
            self.error = exc

    def join(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


def load_run(directory: str, contracts: Any = None) -> CampaignRun:
    """The :class:`CampaignRun` of a campaign directory, rebuilt from its files (for offline use): the records,
    the cases, and the measures (the measure pass runs now, once, where it has not run: an interrupted
    campaign, records made elsewhere)."""
    import os

    from harness.core.record_files import record_file
    from harness.execute.campaign import load_tasks
    from harness.execute.measure_pass import load_measures

    records = load_tasks(directory)
    if record_file(os.path.join(directory, "measures.jsonl")) is not None:
        measures = load_measures(directory)
    elif records:
        if contracts is None:
            from harness.judge.contracts import load_contracts

            contracts = load_contracts(None)
        measures = measure_campaign(directory, contracts, tasks=records)
    else:
        measures = []
    return CampaignRun(directory, [], records, measures, {}, campaign_cases(directory) if records else {})
