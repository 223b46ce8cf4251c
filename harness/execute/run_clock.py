"""How long a run may take, judged by what its worker got: CPU time, against a generous wall-clock limit.

A run's limit (:func:`harness.execute.admission.timeout`, from the case's estimated cost) counts the CPU seconds
its worker process received, not the seconds that passed: on a machine whose cores are shared with other
processes a run that got a tenth of a core is slow, not hung. A hang that spins reaches the CPU limit; one that
sleeps or deadlocks gets no CPU and reaches the wall limit instead, :data:`WALL_FACTOR` times the CPU limit.

:class:`RunBudget` watches one run: the parent calls :meth:`RunBudget.check` while it waits for the answer,
and the budget reads the worker's clock (:class:`ProcessClock`: ``/proc/<pid>/stat`` for its CPU seconds and
state, ``/proc/<pid>/task/*/schedstat`` for the time its threads waited on a run queue). Both sources are
passed in, so a test drives the budget with a clock of its own. What it saw is a :class:`RunTime`: the CPU and
wall seconds, the seconds the worker was kept off the CPU while it could run (waiting for a core, or stopped),
and which limit ended it. :attr:`RunTime.starved` tells a worker that was starved (a busy machine: never a
finding) from one that slept (a hang); the task's runs decide what a timeout means
(:mod:`harness.execute.task_runs`: it is run again alone with a doubled limit first).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["WALL_FACTOR", "CHECK_SECONDS", "STARVED_SHARE", "TICK", "proc_stat", "Sample", "ProcessClock", "RunTime",
           "RunBudget", "oom_kills"]

#: The wall-clock limit of a run, in multiples of its CPU limit: what a run that sleeps (a deadlock, a wait that
#: never ends) is given, generous enough that a worker which gets a third of a core still finishes.
WALL_FACTOR = 3.0
#: Seconds between two looks at the worker's clock while the parent waits for an answer.
CHECK_SECONDS = 0.25
#: A run ended by the wall limit was starved where at least this share of its time off the CPU was spent
#: waiting for a core or stopped (the rest asleep): the machine, not the subject, held it back.
STARVED_SHARE = 0.5


#: Seconds of one clock tick, the unit of ``/proc/<pid>/stat``'s CPU times.
TICK = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` the state, ``[1]`` the parent's pid,
    ``[11:13]`` user and system ticks, ``[13:15]`` those of its reaped children), or None where it cannot be read
    (the process is gone, or this is not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        return stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Sample:
    """One look at a worker: its CPU seconds (every thread, user and system), the seconds its threads waited on
    a run queue, and whether it is stopped now (SIGSTOP, a debugger)."""

    cpu: float
    queued: float = 0.0
    stopped: bool = False


class ProcessClock:
    """The clock of process ``pid`` read from ``/proc``; :meth:`__call__` is None where it cannot be read (the
    process is gone, or this is not Linux): the budget then counts wall seconds as CPU seconds, which is what a
    wall-clock limit did."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __call__(self) -> Sample | None:
        fields = proc_stat(self.pid)
        if fields is None:
            return None
        try:
            state, cpu = fields[0], (int(fields[11]) + int(fields[12])) / TICK
        except (ValueError, IndexError):
            return None
        return Sample(cpu=cpu, queued=self._queued(), stopped=state in ("T", "t"))

    def _queued(self) -> float:
        total = 0
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return 0.0
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/schedstat", "rb") as f:
                    total += int(f.read().split()[1])
            except (OSError, ValueError, IndexError):
                continue
        return total / 1e9


@dataclass(frozen=True)
class RunTime:
    """What one run got: ``cpu`` seconds of CPU in ``wall`` seconds, ``held_off`` of them kept off the CPU while
    it could run (waiting for a core, or stopped); ``limit`` and ``wall_limit`` its limits; ``expired`` which one
    ended it (``"cpu"``, ``"wall"``) or ``""``."""

    limit: float
    wall_limit: float
    cpu: float
    wall: float
    held_off: float
    expired: str = ""

    @property
    def share(self) -> float:
        """The CPU the worker got, as a share of one core over the run's wall time."""
        return self.cpu / self.wall if self.wall > 0 else 1.0

    @property
    def starved(self) -> bool:
        """Whether the run was ended by the wall limit while the machine held it back: most of its time off the
        CPU was spent waiting for a core or stopped, not asleep."""
        off = max(self.wall - self.cpu, 0.0)
        return self.expired == "wall" and off > 0 and self.held_off >= STARVED_SHARE * off

    @property
    def hang(self) -> bool:
        """Whether the run's end says the subject hangs: it spent its whole CPU limit (it spins), or it slept
        until the wall limit with the CPU free for it."""
        return self.expired == "cpu" or (self.expired == "wall" and not self.starved)

    def describe(self) -> str:
        """One line: which limit ended the run, and the CPU share it got."""
        what = (f"{self.limit:g} s of CPU time used" if self.expired == "cpu" else
                f"the wall limit of {self.wall_limit:g} s reached ({WALL_FACTOR:g} x the CPU limit of "
                f"{self.limit:g} s)" if self.expired == "wall" else f"{self.cpu:.1f} s of CPU time")
        return (f"{what}; CPU {self.cpu:.1f} s in {self.wall:.1f} s (CPU share {self.share:.0%}, "
                f"{self.held_off:.1f} s kept off the CPU)")

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "wall_limit": self.wall_limit, "cpu": round(self.cpu, 3),
                "wall": round(self.wall, 3), "held_off": round(self.held_off, 3), "share": round(self.share, 3),
                "expired": self.expired, "starved": self.starved}


class RunBudget:
    """The limits of one run: ``limit`` CPU seconds, ``WALL_FACTOR x limit`` wall seconds. ``sample`` reads the
    worker's clock (a :class:`ProcessClock`; None where it cannot be read: wall seconds then count as CPU
    seconds), ``now`` the wall clock. :meth:`check` returns the :class:`RunTime` that ended the run, or None
    while it may go on."""

    def __init__(self, limit: float, sample: Callable[[], Sample | None],
                 now: Callable[[], float] = time.monotonic, wall_factor: float = WALL_FACTOR,
                 t0: float | None = None) -> None:
        """``t0``: when the run began on ``now``'s clock, where the budget is made after it began (the parent
        waits :data:`CHECK_SECONDS` before it reads any clock: most runs answer sooner); the CPU the worker used
        before the budget was made is not counted (at most that first wait's)."""
        self.limit = float(limit)
        self.wall_limit = self.limit * wall_factor
        self._sample, self._now = sample, now
        self.t0 = now() if t0 is None else t0
        self._last = now()
        first = sample()
        self._base = first
        self._prev = first
        self._stopped = 0.0

    def deadline(self) -> float:
        """When (on ``now``'s clock) the parent looks again at the latest: the next check, or the wall limit."""
        return min(self._now() + CHECK_SECONDS, self.t0 + self.wall_limit)

    def observe(self) -> RunTime:
        """The run so far."""
        now = self._now()
        s = self._sample()
        if s is not None and self._prev is not None and self._prev.stopped and s.stopped:
            self._stopped += now - self._last  # stopped at both looks: the whole interval
        self._last = now
        if s is not None:
            self._prev = s
        wall = now - self.t0
        if s is None or self._base is None:
            return RunTime(self.limit, self.wall_limit, cpu=wall, wall=wall, held_off=0.0)
        return RunTime(self.limit, self.wall_limit, cpu=max(s.cpu - self._base.cpu, 0.0), wall=wall,
                       held_off=max(s.queued - self._base.queued, 0.0) + self._stopped)

    def check(self) -> RunTime | None:
        """The :class:`RunTime` that ends the run (a limit reached), or None."""
        t = self.observe()
        if t.cpu >= self.limit:
            return _replace(t, "cpu")
        if t.wall >= self.wall_limit:
            return _replace(t, "wall")
        return None


def _replace(t: RunTime, expired: str) -> RunTime:
    return RunTime(t.limit, t.wall_limit, t.cpu, t.wall, t.held_off, expired)


def oom_kills(path: str = "/proc/vmstat") -> int | None:
    """How many processes the kernel's out-of-memory killer has ended since boot (``oom_kill`` of
    ``/proc/vmstat``); None where the kernel does not say. A worker that died of SIGKILL while this count grew
    was ended for the machine's memory, not by its subject or by the harness."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None
