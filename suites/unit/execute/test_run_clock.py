"""A run's budget (harness.execute.run_clock): CPU time against the limit, a wall limit for a sleeper, and the
starved worker told from the hung one, on clocks the test drives (no timing)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from harness.execute.run_clock import STARVED_SHARE, WALL_FACTOR, ProcessClock, RunBudget, RunTime, Sample


class Clocks:
    """A wall clock and a worker's clock the test moves by hand."""

    def __init__(self) -> None:
        self.wall = 100.0
        self.sample = Sample(cpu=5.0, queued=1.0)

    def now(self) -> float:
        return self.wall

    def read(self) -> Sample:
        return self.sample

    def step(self, wall: float, cpu: float = 0.0, queued: float = 0.0, stopped: bool = False) -> None:
        self.wall += wall
        self.sample = Sample(self.sample.cpu + cpu, self.sample.queued + queued, stopped)


def budget(c: Clocks, limit: float = 10.0) -> RunBudget:
    return RunBudget(limit, c.read, now=c.now)


def run_until_ended(c: Clocks, b: RunBudget, **per_step: float | bool) -> RunTime:
    for _ in range(10_000):
        ended = b.check()
        if ended is not None:
            return ended
        c.step(**per_step)  # type: ignore[arg-type]
    raise AssertionError("the budget never ended the run")


def test_a_spinning_worker_ends_at_its_cpu_limit_and_is_a_hang() -> None:
    c = Clocks()
    t = run_until_ended(c, budget(c), wall=1.0, cpu=1.0)
    assert t.expired == "cpu" and t.hang and not t.starved
    assert t.cpu == pytest.approx(10.0) and t.wall == pytest.approx(10.0) and t.share == pytest.approx(1.0)


def test_a_sleeping_worker_ends_at_the_wall_limit_and_is_a_hang() -> None:
    c = Clocks()
    t = run_until_ended(c, budget(c), wall=1.0, cpu=0.001)
    assert t.expired == "wall" and t.wall == pytest.approx(10.0 * WALL_FACTOR)
    assert t.hang and not t.starved and t.cpu < 1.0


def test_a_worker_waiting_for_a_core_is_starved_not_hung() -> None:
    c = Clocks()
    # a tenth of a core, the rest of each second waiting on a run queue
    t = run_until_ended(c, budget(c), wall=1.0, cpu=0.1, queued=0.9)
    assert t.expired == "wall" and t.starved and not t.hang
    assert t.share == pytest.approx(0.1) and t.held_off >= STARVED_SHARE * (t.wall - t.cpu)


def test_a_stopped_worker_is_starved_not_hung() -> None:
    c = Clocks()
    t = run_until_ended(c, budget(c), wall=0.25, stopped=True)
    assert t.expired == "wall" and t.starved and not t.hang and t.cpu == 0.0


def test_a_slow_run_that_gets_its_share_goes_on_past_the_cpu_limit_in_wall_seconds() -> None:
    c = Clocks()
    b = budget(c)
    c.step(wall=25.0, cpu=9.0, queued=16.0)  # 25 s have passed, more than the 10 s limit: 9 s of CPU used
    assert b.check() is None


def test_an_unreadable_clock_counts_wall_seconds_as_cpu_seconds() -> None:
    c = Clocks()
    b = RunBudget(10.0, lambda: None, now=c.now)
    c.step(wall=10.0)
    t = b.check()
    assert t is not None and t.expired == "cpu" and t.hang


def test_the_description_names_the_limit_and_the_cpu_share() -> None:
    t = RunTime(limit=10.0, wall_limit=30.0, cpu=3.0, wall=30.0, held_off=27.0, expired="wall")
    text = t.describe()
    assert "wall limit of 30 s" in text and "CPU share 10%" in text and t.to_dict()["starved"] is True


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="the clock reads /proc (Linux)")
def test_the_process_clock_sees_a_stopped_process_and_its_cpu() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        first = ProcessClock(proc.pid)()
        assert first is not None and first.cpu >= 0 and not first.stopped
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            for _ in range(1000):  # the state changes when the signal is taken: look until it shows
                s = ProcessClock(proc.pid)()
                if s is not None and s.stopped:
                    break
            assert s is not None and s.stopped
        finally:
            os.kill(proc.pid, signal.SIGCONT)
    finally:
        proc.kill()
        proc.wait()
    assert ProcessClock(proc.pid)() is None  # gone: nothing to read
