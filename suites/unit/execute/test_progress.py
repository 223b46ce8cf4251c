"""harness.execute.progress: time left is measured and weighted by the tasks' estimates; the line names the
task running now."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from harness.execute.progress import Progress, Running, tick_seconds


def test_time_left_comes_only_from_tasks_finished_after_the_first():
    p = Progress(100, quiet=True)
    p.t0, p.first, p.done, p.done_weight, p.first_weight = 0.0, 60.0, 1, 1.0, 1.0  # a minute of start-up
    assert p.left(61.0) is None and "time left: after a few tasks" in p.line(61.0)
    p.done = p.done_weight = Progress.MIN_FOR_ETA  # then two more tasks, one second each
    assert p.left(62.0) == pytest.approx(2.0 / 2 * 97) and "~97s left" in p.line(62.0)
    assert f"{p.done}/100 tasks" in p.line(62.0)


def test_time_left_is_weighted_by_the_estimates_of_the_tasks_left():
    weights = {"a": 1.0, "b": 1.0, "c": 1.0, "big": 10.0}
    p = Progress(4, quiet=True, weights=weights)
    rec = SimpleNamespace(status="ok", bad_input=False, tensors={})
    for key in ("a", "b", "c"):
        p.step(rec, key)
    # 2 units of work measured since the first task: the big one left is 10 units at that rate.
    seconds_per_unit = (p.last_done - p.first) / 2.0
    assert p.left(p.last_done) == pytest.approx(seconds_per_unit * 10.0)
    even = Progress(4, quiet=True)  # without estimates the big task would count as one
    for key in ("a", "b", "c"):
        even.step(rec, key)
    assert even.left(even.last_done) == pytest.approx((even.last_done - even.first) / 2.0)


def test_the_line_names_the_task_running_longest():
    running = Running()
    task = SimpleNamespace(key="k", subject="chainer.NStepLSTM", case=SimpleNamespace(id="abc123"))
    p = Progress(3, quiet=True, running=running)
    entered, leave = threading.Event(), threading.Event()

    def run() -> None:
        with running.track(task):
            entered.set()
            leave.wait(60)

    t = threading.Thread(target=run)
    t.start()
    entered.wait(60)
    assert "running chainer.NStepLSTM on case abc123" in p.line(p.t0)
    leave.set()
    t.join(60)
    assert "running" not in p.line(p.t0)


def test_tick_follows_the_environment_and_refuses_nonsense(monkeypatch):
    monkeypatch.setenv("HARNESS_PROGRESS_SECONDS", "0.5")
    assert tick_seconds(False) == 0.5
    for bad in ("x", "-1", "0", "nan"):
        monkeypatch.setenv("HARNESS_PROGRESS_SECONDS", bad)
        assert tick_seconds(False) == 10.0 and tick_seconds(True) == 1.0


def test_a_skipped_task_neither_measures_the_rate_nor_counts_as_work_left():
    p = Progress(4, quiet=True, weights={"a": 1.0, "big": 100.0, "b": 1.0, "c": 1.0})
    ok, skipped = (SimpleNamespace(status=s, bad_input=False, tensors={}) for s in ("ok", "skipped"))
    for key, rec in (("a", ok), ("big", skipped), ("b", ok), ("c", ok)):
        p.step(rec, key)
    assert p.total_weight == pytest.approx(3.0) and p.done_weight == pytest.approx(3.0)
    assert p.left(p.last_done) == pytest.approx(0.0)
