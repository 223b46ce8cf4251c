"""harness.execute.admission: a task is refused by what its case will cost, lanes share the machine's memory,
and a run's timeout follows the case's work unless the user gave one."""

from __future__ import annotations

import threading

import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.cost import BASE_TIMEOUT, estimate
from harness.core.devices import CPU
from harness.execute import admission
from harness.execute.campaign import CampaignOptions
from harness.execute.lanes import _Lanes
from harness.execute.plan import Task, plan
from harness.execute.task_runs import run_task
from harness.subjects.registry import get_subject

BIG = Case("lstm", 1, {"n_layers": 2, "hidden": 320, "in_size": 83, "lengths": [160, 150, 140, 130],
                       "bidirectional": True})
SMALL = Case("lstm", 1, {"n_layers": 1, "hidden": 8, "in_size": 4, "lengths": [3, 2]})


def test_a_task_over_the_limit_is_a_skipped_row_naming_what_it_needs(monkeypatch):
    monkeypatch.setenv("HARNESS_MAX_CASE_BYTES", str(1 << 30))
    ok, reason = admission.availability(CPU, BIG, "chainer.NStepBiLSTM")
    assert not ok and f"case {BIG.id} needs about" in reason and "GiB" in reason and "1,073,741,824" in reason
    assert admission.availability(CPU, SMALL, "chainer.NStepLSTM")[0]
    # In a campaign the task is a row that says so, decided before any worker is asked for (none is given).
    outcome = run_task(Task(BIG, "chainer.NStepBiLSTM", "cpu", "default"), None, CampaignOptions(quiet=True))
    assert outcome.record.status == "skipped" and "needs about" in outcome.record.skip_reason


def test_the_oracle_task_is_held_to_the_oracles_working_set(monkeypatch):
    cost = estimate(BIG)
    monkeypatch.setenv("HARNESS_MAX_CASE_BYTES", str((cost.peak_of("oracle.lstm") + cost.peak) // 2))
    assert admission.availability(CPU, BIG, "oracle.lstm")[0]
    assert not admission.availability(CPU, BIG, "chainer.NStepBiLSTM")[0]


def test_memory_budget_lets_tasks_in_together_only_when_they_fit():
    budget = admission.MemoryBudget(limit=100)
    assert budget.take("a", 60)
    assert not budget.take("b", 60)  # 120 > 100 together
    assert budget.take("c", 40)
    budget.give("a")
    budget.give("c")
    assert budget.take("b", 60)
    budget.give("b")
    assert budget.take("huge", 500)  # alone it is let in (the admission refuses what can never fit)


def test_a_lane_waits_while_the_other_lanes_task_leaves_no_room(monkeypatch):
    tasks = plan([BIG, SMALL], [get_subject("chainer.NStepBiLSTM"), get_subject("chainer.NStepLSTM")], [CPU],
                 [get_context("default")])
    tasks = [t for t in tasks if get_subject(t.subject).accepts(t.case)][:2]
    lanes = _Lanes(tasks, [None, None], False, CampaignOptions(quiet=True), window=8)
    refused = threading.Event()
    real_take = lanes.memory.take

    def take(key, nbytes):
        got = real_take(key, nbytes)
        if not got:
            refused.set()
        return got

    lanes.memory.limit = admission.host_bytes(BIG, "chainer.NStepBiLSTM", "cpu")  # room for the big one only
    monkeypatch.setattr(lanes.memory, "take", take)
    with lanes.cond:
        first = lanes._take(0)
    taken: list[int | None] = []

    def lane1() -> None:
        with lanes.cond:
            taken.append(lanes._take(1))

    t = threading.Thread(target=lane1)
    t.start()
    assert refused.wait(60)  # the second lane asked and was told to wait
    assert not taken and lanes.taken.count(True) == 1
    with lanes.cond:
        lanes.memory.give(first)
        lanes.cond.notify_all()
    t.join(60)
    assert taken == [1 - first]


def test_run_timeout_follows_the_work_and_an_explicit_one_wins():
    assert admission.timeout(SMALL, "chainer.NStepLSTM", "cpu", None) >= BASE_TIMEOUT
    assert admission.timeout(BIG, "chainer.NStepBiLSTM", "cpu", None) > admission.timeout(
        SMALL, "chainer.NStepLSTM", "cpu", None)
    assert admission.timeout(BIG, "chainer.NStepBiLSTM", "cpu", 7.5) == 7.5
    line = admission.time_bound(BIG, "chainer.NStepBiLSTM", "cpu", 3, 10.0)
    assert "3 run(s)" in line and "x 10 s of CPU time" in line and "30 s of CPU at most" in line


@pytest.mark.parametrize("settings_timeout", [None, 30.0])
def test_campaign_settings_take_no_timeout_as_scaled(settings_timeout):
    assert CampaignOptions(timeout=settings_timeout).timeout == settings_timeout


def test_the_in_process_gate_refuses_a_case_by_its_cost_without_running_it(monkeypatch):
    from harness.execute.inprocess import execute

    monkeypatch.setenv("HARNESS_MAX_CASE_BYTES", str(1 << 30))
    res = execute(get_subject("chainer.NStepBiLSTM"), BIG, CPU, get_context("default"))
    assert res.status == "skipped" and "needs about" in res.skip_reason and not res.arrays
