"""A worker set's priority (harness.execute.worker_sets): every thread of the process, not one; the lowered lanes
follow other programs' load."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from harness.core.cases import Case
from harness.execute.lanes import BESIDE_NICE, LocalPool
from harness.execute.plan import Task
from harness.execute.settings import CampaignOptions
from harness.execute.worker_sets import lower_priority

THREADED = ("import sys, threading, time\n"
            "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "print('up', flush=True)\n"
            "sys.stdin.read()\n")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads are listed in /proc on Linux only")
def test_every_thread_of_the_process_is_lowered() -> None:
    proc = subprocess.Popen([sys.executable, "-c", THREADED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        deadline = time.monotonic() + 30  # a bound on waiting for the second thread, not an assertion on time
        while len(os.listdir(f"/proc/{proc.pid}/task")) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        tids = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
        assert len(tids) >= 2
        lower_priority(proc.pid, 3)
        own = os.getpriority(os.PRIO_PROCESS, 0)
        assert [os.getpriority(os.PRIO_PROCESS, t) for t in tids] == [min(own + 3, 19)] * len(tids)
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_is_gone_is_no_error() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    lower_priority(proc.pid, 3)  # returns: a priority is never a reason for a run to fail
    with pytest.raises(ProcessLookupError):
        os.getpriority(os.PRIO_PROCESS, proc.pid)


def test_the_first_lane_runs_at_the_campaigns_priority_and_the_others_below_it() -> None:
    case = Case("embed", 1, {"vocab": 7, "width": 4, "ids_shape": [3]})
    group = [Task(case, "chainer.EmbedID", "cpu", "default")] * 3
    sets = LocalPool._worker_sets(group, CampaignOptions(repeats=1, fresh=0, quiet=True, jobs=3))
    assert [ws.nice for ws in sets] == [0, BESIDE_NICE, BESIDE_NICE]
    assert BESIDE_NICE > 0


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="process priorities are POSIX's")
def test_a_run_tried_again_alone_runs_at_the_campaigns_priority_even_in_a_lowered_lane() -> None:
    from harness.core.contexts import get_context
    from harness.execute.worker_sets import WorkerSet

    own = os.getpriority(os.PRIO_PROCESS, 0)
    ws = WorkerSet(get_context("default"), CampaignOptions(repeats=1, fresh=0, quiet=True, jobs=2), nice=BESIDE_NICE)
    try:
        with ws.use("pool") as (_, w):
            assert os.getpriority(os.PRIO_PROCESS, w.pid) == min(own + BESIDE_NICE, 19)
        with ws.use_again("pool") as again:
            assert os.getpriority(os.PRIO_PROCESS, again.pid) == own  # alone means at full priority
        assert os.getpriority(os.PRIO_PROCESS, again.pid) == min(own + BESIDE_NICE, 19)  # lowered after
    finally:
        ws.close()


class _Load:
    """Other programs' load as a test sets it (the :class:`~harness.execute.machine_load.OutsideLoad` protocol)."""

    def __init__(self, busy: bool) -> None:
        self.now = busy

    def busy(self) -> bool:
        return self.now


def _raising_allowed() -> bool:
    """Whether this process may raise a child's priority back (root, or RLIMIT_NICE)."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        lower_priority(proc.pid, 3)
        from harness.execute.worker_sets import set_priority

        return set_priority(proc.pid, 0)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="process priorities are POSIX's")
def test_a_lowered_lane_runs_at_full_priority_while_other_programs_load_the_machine_and_below_after(
        monkeypatch) -> None:
    from harness.core.contexts import get_context
    from harness.execute import worker_sets
    from harness.execute.worker_sets import WorkerSet

    own = os.getpriority(os.PRIO_PROCESS, 0)
    load = _Load(busy=False)
    ws = WorkerSet(get_context("default"), CampaignOptions(repeats=1, fresh=0, quiet=True, jobs=2),
                   nice=BESIDE_NICE, load=load)  # type: ignore[arg-type]
    try:
        ws.start()
        ws.follow()
        assert os.getpriority(os.PRIO_PROCESS, ws.pool.pid) == min(own + BESIDE_NICE, 19) and not ws.raised
        load.now = True
        ws.follow()
        with ws.use("pool") as (_, w):
            assert ws.raised and ws.raisings == 1 and os.getpriority(os.PRIO_PROCESS, w.pid) == own
        load.now = False
        ws.follow()
        assert not ws.raised and os.getpriority(os.PRIO_PROCESS, ws.pool.pid) == min(own + BESIDE_NICE, 19)
        # where raising is refused (no privileges), the lowered worker is replaced by one at full priority
        monkeypatch.setattr(worker_sets, "set_priority", lambda pid, steps: steps > 0)
        load.now = True
        lowered = ws.pool
        ws.follow()
        with ws.use("pool") as (_, w):
            assert w is not lowered and os.getpriority(os.PRIO_PROCESS, w.pid) == own
    finally:
        ws.close()


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="process priorities are POSIX's")
def test_a_lowered_run_already_going_is_raised_in_place_when_other_programs_load_the_machine() -> None:
    """A spinning run in a lowered lane, with the load there from its start: the worker's clock is looked at
    while it runs, and the lane's priority follows the load without waiting for the next task (where the system
    allows raising a priority; elsewhere the run stays below and its limits decide)."""
    from harness.core.contexts import get_context
    from harness.execute.worker_sets import WorkerSet

    case = Case("embed", 1, {"vocab": 7, "width": 4, "ids_shape": [3]})
    settings = CampaignOptions(repeats=1, fresh=0, quiet=True, jobs=2, plugins=("suites.plugins.stalls:SUBJECTS",))
    ws = WorkerSet(get_context("default"), settings, nice=BESIDE_NICE, load=_Load(busy=True))  # type: ignore[arg-type]
    try:
        ws.start()
        assert not ws.raised  # follow() was not asked: the load is seen during the run
        with ws.use("pool") as (_, w):
            answer = w.run_answer(case.to_json(), "stalls.spins", "cpu", "default", timeout=1.0)
        assert answer.result.status == "timeout"
        assert ws.raised == _raising_allowed() and ws.raisings == int(ws.raised)
    finally:
        ws.close()
