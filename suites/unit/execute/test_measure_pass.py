"""The measure pass: a campaign measures each task as the tasks it is compared with finish (Measurer), to the
measures the pass after the runs gives over the same records (measure_campaign)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.core.records import jsonl_line
from harness.execute import measure_pass
from harness.execute.campaign import CampaignOptions
from harness.execute.driver import run_campaign
from harness.execute.measure_pass import Measurer, compared_with, key_of, measure_campaign
from harness.execute.relations import RELATIONS
from harness.judge.contracts import load_contracts
from harness.subjects.registry import get_subject

SUBJECTS = ("chainer.embed_id", "espnet.embed_id", "chainer.NStepLSTM", "control.nondeterministic")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A real campaign with every kind of reference: another context, the oracle, the order reference (the
    embeds' sequential reference) and relation members against their base cases."""
    out = str(tmp_path_factory.mktemp("measured"))
    cases = [Case("embed", s, {"vocab": 7, "width": 4, "ids_shape": [3, 5]}) for s in range(2)]
    cases += [Case("lstm", 5, {"n_layers": 1, "in_size": 3, "hidden": 2, "lengths": [3, 2, 1]})]
    return run_campaign(out, cases, [get_subject(n) for n in SUBJECTS], [CPU],
                        [get_context("default"), get_context("blas1")],
                        CampaignOptions(repeats=2, fresh=0, quiet=True, jobs=1),
                        relations=[RELATIONS["order"]])


def test_measures_taken_while_the_campaign_ran_are_those_of_the_pass_after_it_in_the_same_order(run) -> None:
    after = measure_campaign(run.directory, load_contracts(None), tasks=run.records, write=False, parts=1)
    assert len(after) > len(run.records)  # every task measured, some against several others
    assert {m.kind for m in after} >= {"repeat", "context", "oracle", "relation"}
    assert [m.to_dict() for m in run.measures] == [m.to_dict() for m in after]
    with open(os.path.join(run.directory, measure_pass.MEASURES_FILE), encoding="utf-8") as f:
        assert f.read() == "".join(jsonl_line(m) for m in after)


def test_a_task_is_measured_once_every_planned_task_it_is_compared_with_has_finished(run) -> None:
    contracts = load_contracts(None)
    recs = list(run.records.values())
    waits = [r for r in recs if any(key_of(o) != key_of(r) for o in recs
                                    if key_of(o) in _dependencies(r, run.cases, contracts))]
    assert waits, "no task of the campaign is compared with another"
    rec = waits[0]
    deps = [o for o in recs if key_of(o) in _dependencies(rec, run.cases, contracts)]
    m = Measurer(run.directory, contracts, run.cases, [key_of(r) for r in recs], write=False)
    m.add(rec)
    assert key_of(rec) not in m.measured  # its references have not finished
    for o in deps[:-1]:
        m.add(o)
    assert key_of(rec) not in m.measured
    m.add(deps[-1])
    assert key_of(rec) in m.measured
    # what was never planned is not waited for: the same record alone, in a plan of its own
    alone = Measurer(run.directory, contracts, run.cases, [key_of(rec)], write=False)
    alone.add(rec)
    assert key_of(rec) in alone.measured


def test_an_error_in_a_measure_is_raised_by_finish_once_the_runs_are_written(
        run, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> list[Any]:
        raise ValueError("a measure broke")

    monkeypatch.setattr(measure_pass, "_measure_one", broken)
    recs = list(run.records.values())
    m = Measurer(run.directory, load_contracts(None), run.cases, [key_of(r) for r in recs], write=False)
    for r in recs:
        m.add(r)  # the campaign goes on
    with pytest.raises(ValueError, match="a measure broke"):
        m.finish(run.records)


def _dependencies(rec: Any, cases: Any, contracts: Any) -> set[tuple[str, str, str, str]]:
    """The tasks the measure pass reads for ``rec`` (:func:`compared_with`), as the Measurer waits for them."""
    contract = contracts.find(rec.subject, rec.device_kind, rec.context)
    return set(measure_pass._dependencies(compared_with(rec, cases.get(rec.case_id), contract)))


def test_the_plan_runs_what_judges_a_context_first_so_its_tasks_are_measured_as_they_finish(run) -> None:
    """Within each context and device the oracles and order references come first: every other task of the
    default context finds them finished when it arrives, and waits only for tasks of the contexts it is compared
    with."""
    contracts = load_contracts(None)
    blocks: dict[tuple[str, str], list[str]] = {}
    for t in run.tasks:
        blocks.setdefault((t.context, t.device), []).append(get_subject(t.subject).role)
    assert any("oracle" in roles for roles in blocks.values())
    for roles in blocks.values():
        assert roles == sorted(roles, key=lambda r: r != "oracle")
    m = Measurer(run.directory, contracts, run.cases, [key_of(r) for r in run.records.values()], write=False)
    by_task = {(t.case.id, t.subject, t.device, t.context): t for t in run.tasks}
    at_once = 0
    for rec in sorted(run.records.values(), key=lambda r: run.tasks.index(by_task[key_of(r)])):
        m.add(rec)
        if rec.context == "default" and rec.case_id in {c.id for c in run.cases.values()
                                                        if c.spec.get("relation") is None}:
            waits = m.waiting.get(key_of(rec), set())
            assert key_of(rec) in m.measured or waits and all(w[3] != "default" for w in waits), (key_of(rec), waits)
            at_once += get_subject(rec.subject).role != "oracle" and key_of(rec) in m.measured
    assert at_once  # e.g. control.nondeterministic's default tasks, compared with no other context
