"""Other programs' load on the machine (harness.execute.machine_load): the cores' busy seconds less this process
tree's, averaged over a window; the campaign's own processes are never another program."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from harness.execute.machine_load import OutsideLoad, machine_busy_seconds, tree_cpu_seconds
from harness.execute.run_clock import ProcessClock

LINUX = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="the load is read from Linux's /proc")


class _Figures:
    """The machine's busy seconds, this tree's CPU seconds and the clock, set by the test; counts the looks."""

    def __init__(self) -> None:
        self.t, self.busy, self.ours, self.looks = 0.0, 100.0, 10.0, 0

    def machine(self) -> float:
        self.looks += 1
        return self.busy

    def advance(self, seconds: float, busy_cores: float, our_cores: float) -> None:
        self.t += seconds
        self.busy += seconds * busy_cores
        self.ours += seconds * our_cores


def _meter(f: _Figures, window: float = 5.0) -> OutsideLoad:
    return OutsideLoad(busy=f.machine, ours=lambda: f.ours, now=lambda: f.t, window=window, threshold=0.5)


def test_other_programs_cores_are_the_busy_seconds_less_the_campaigns_own():
    f = _Figures()
    load = _meter(f)
    f.advance(5.0, busy_cores=2.0, our_cores=0.5)
    assert load.cores() == pytest.approx(1.5) and load.busy()


def test_the_campaigns_own_load_is_never_another_programs():
    f = _Figures()
    load = _meter(f)
    f.advance(5.0, busy_cores=2.0, our_cores=2.0)
    assert load.cores() == 0.0 and not load.busy()
    f.advance(5.0, busy_cores=2.0, our_cores=2.2)  # a reaped child's seconds counted twice: never below 0
    assert load.cores() == 0.0


def test_before_a_window_has_passed_there_is_no_load_and_the_machine_is_read_once_a_window():
    f = _Figures()
    load = _meter(f)
    f.advance(1.0, busy_cores=2.0, our_cores=0.0)
    assert load.cores() == 0.0 and f.looks == 1  # read when made, not again within the window
    f.advance(4.0, busy_cores=2.0, our_cores=0.0)
    assert load.cores() == pytest.approx(2.0) and f.looks == 2
    f.advance(1.0, busy_cores=0.0, our_cores=0.0)
    assert load.cores() == pytest.approx(2.0) and f.looks == 2  # the last complete window's answer
    f.advance(5.0, busy_cores=0.0, our_cores=0.0)
    assert load.cores() == 0.0 and not load.busy()  # the next window: the machine was idle


def test_a_machine_that_cannot_be_read_has_no_load():
    load = OutsideLoad(busy=lambda: None, ours=lambda: 1.0, now=lambda: 100.0, window=0.0)
    assert load.cores() == 0.0 and not load.busy()


def test_the_busy_seconds_are_read_from_procs_first_line(tmp_path):
    stat = tmp_path / "stat"
    tick = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal guest guest_nice: idle and iowait are not busy
    stat.write_text(f"cpu  {tick} {2 * tick} {3 * tick} 1000000 500000 {4 * tick} {5 * tick} {6 * tick} 0 0\n"
                    "cpu0 1 1 1 1 1 1 1 1 0 0\n")
    assert machine_busy_seconds(str(stat)) == pytest.approx(21.0)
    stat.write_text("garbage\n")
    assert machine_busy_seconds(str(stat)) is None
    assert machine_busy_seconds(str(tmp_path / "missing")) is None


SPIN = ("import sys, time\n"
        "while time.process_time() < float(sys.argv[1]): pass\n"
        "print('spun', flush=True)\n"
        "sys.stdin.read()\n")


@LINUX
def test_a_childs_cpu_seconds_are_in_the_trees_while_it_lives_and_after_it_is_reaped():
    before = tree_cpu_seconds()
    assert before is not None
    proc = subprocess.Popen([sys.executable, "-c", SPIN, "0.5"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "spun"
        living = tree_cpu_seconds()
        assert living is not None and living - before >= 0.45
    finally:
        proc.communicate("")
    reaped = tree_cpu_seconds()
    assert reaped is not None and reaped >= living  # its seconds moved to this process's account


@LINUX
def test_a_spinning_process_outside_the_tree_is_other_programs_load():
    """A spinner that is not this process's descendant (its parent exited: a double fork) is counted as
    another program's: the meter's cores cover at least most of the CPU the spinner itself got."""
    launcher = ("import os, subprocess, sys\n"
                "quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                "p = subprocess.Popen([sys.executable, '-c', 'while True: pass'], start_new_session=True, **quiet)\n"
                "print(p.pid, flush=True)\n")
    out = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, check=True, timeout=60)
    pid = int(out.stdout.strip())

    def spinner_cpu() -> float:
        sample = ProcessClock(pid)()
        assert sample is not None, "the spinner is gone"
        return sample.cpu

    try:
        load = OutsideLoad(window=0.0)  # read at every call: the cores since it was made
        t0, cpu0 = time.monotonic(), spinner_cpu()
        while spinner_cpu() - cpu0 < 0.5:  # until the spinner has had half a second of CPU, however slow
            time.sleep(0.05)
        spun = (spinner_cpu() - cpu0) / (time.monotonic() - t0)
        assert load.cores() >= 0.8 * spun - 0.05, (load.cores(), spun)
    finally:
        os.kill(pid, 9)
