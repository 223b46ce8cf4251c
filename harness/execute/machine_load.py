"""How much of the machine other programs use: the CPU the cores spent, less what this process and its
descendants (the campaign's workers, their BLAS threads, the zygotes) spent, over the last few seconds.

A campaign runs every lane but the first below itself (:data:`harness.execute.lanes.BESIDE_NICE`), so that the
first lane's subject runs as it would alone. Beside other programs at full priority that is starvation: a worker
at nice 10 beside two busy programs at nice 0 gets a few percent of a core, and its run waits out its wall limit.
:class:`OutsideLoad` tells the lanes when that is so (:meth:`OutsideLoad.busy`), and they run at full priority
while it lasts (:meth:`harness.execute.worker_sets.WorkerSet.follow`). The campaign's own load cannot be mistaken
for another program's: its processes' CPU seconds are taken out.

Both sources are passed in (the machine's busy seconds, this process tree's CPU seconds, the clock), so a test
drives the meter with figures of its own.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

from harness.execute.run_clock import TICK, proc_stat

__all__ = ["OUTSIDE_CORES", "WINDOW_SECONDS", "OutsideLoad", "machine_busy_seconds", "tree_cpu_seconds"]

#: Other programs use the machine where they keep at least this many cores busy on average over a window: half a
#: core beside a lowered lane takes it from a tenth of a core to less, which its wall limit does not allow for.
OUTSIDE_CORES = 0.5
#: Seconds over which the load is averaged: long enough that a process of ours which ended between two looks
#: (its seconds move to its parent's account) does not read as another program's.
WINDOW_SECONDS = 5.0

def machine_busy_seconds(path: str = "/proc/stat") -> float | None:
    """CPU seconds every core spent not idle since boot (user, nice, system, interrupts, stolen), or None where
    the kernel does not say."""
    try:
        with open(path, encoding="ascii") as f:
            fields = f.readline().split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq + steal) / TICK


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children) of ``/proc/<pid>/stat``."""
    fields = proc_stat(pid)
    if fields is None:
        return None
    try:
        return int(fields[1]), sum(int(v) for v in fields[11:15]) / TICK
    except (ValueError, IndexError):
        return None


def tree_cpu_seconds(root: int | None = None) -> float | None:
    """CPU seconds of process ``root`` (this one by default) and of every descendant, living or reaped (a
    reaped child's seconds are in its parent's account), or None where ``/proc`` cannot be read."""
    root = os.getpid() if root is None else root
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    stats = {int(p): s for p in pids if (s := _stat(p)) is not None}
    if root not in stats:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo.extend(children.get(pid, ()))
    return total


class OutsideLoad:
    """The cores other programs kept busy over the last window (:meth:`cores`), and whether that is a load
    (:meth:`busy`). Safe to ask from every lane's thread: the machine is read at most once a window, whoever
    asks; before a first window has passed the answer is "no load" (the lanes start as designed)."""

    def __init__(self, busy: Callable[[], float | None] = machine_busy_seconds,
                 ours: Callable[[], float | None] = tree_cpu_seconds,
                 now: Callable[[], float] = time.monotonic, window: float = WINDOW_SECONDS,
                 threshold: float = OUTSIDE_CORES) -> None:
        self._busy, self._ours, self._now = busy, ours, now
        self.window, self.threshold = float(window), float(threshold)
        self._lock = threading.Lock()
        self._last = self._look()
        self._cores = 0.0

    def _look(self) -> tuple[float, float, float] | None:
        busy, ours = self._busy(), self._ours()
        return None if busy is None or ours is None else (self._now(), busy, ours)

    def cores(self) -> float:
        """Cores' worth of CPU that programs other than this campaign used over the last complete window (0
        where the machine cannot be read)."""
        with self._lock:
            if self._last is None or self._now() - self._last[0] >= self.window:
                look = self._look()
                if look is not None and self._last is not None and look[0] > self._last[0]:
                    t0, busy0, ours0 = self._last
                    t1, busy1, ours1 = look
                    self._cores = max((busy1 - busy0) - (ours1 - ours0), 0.0) / (t1 - t0)
                self._last = look
            return self._cores

    def busy(self) -> bool:
        """Whether other programs keep at least :data:`OUTSIDE_CORES` busy: a lowered lane would starve."""
        return self.cores() >= self.threshold
