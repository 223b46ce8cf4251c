"""A campaign's progress line: tasks done, what the runs showed, the task running now, and the time left.

The line moves while a long run is going: a ticker thread writes it again every :func:`tick_seconds` with the
running task's elapsed time against its estimated seconds (:func:`harness.execute.admission.weights`, from the
case's cost estimate, :mod:`harness.core.cost`, that its runs' limits come from too).

Time left is measured, weighted by what each task is estimated to cost (:func:`harness.execute.admission.weights`):
the seconds the tasks finished after the first one took (the first pays the workers' start-up), per unit of their
estimated work, times the work left.
With no estimates every task weighs the same, and that is the tasks' mean time.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from harness.core.errors import InvalidArgument
from harness.core.records import TaskRecord

__all__ = ["Progress", "RUNNING", "Running", "TICK_ENV", "tick_seconds"]

#: Environment variable: seconds between progress lines while nothing finishes (default 1 on a terminal, 10 in
#: a log).
TICK_ENV = "HARNESS_PROGRESS_SECONDS"


def tick_env() -> float | None:
    """``$HARNESS_PROGRESS_SECONDS`` (None where unset); a value that is not a number of seconds in (0, 3600) is
    one :class:`InvalidArgument` line naming the variable (checked before a verb starts:
    :func:`harness.verbs.common.check_environment`)."""
    text = os.environ.get(TICK_ENV, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 3600:
        raise InvalidArgument(f"${TICK_ENV}={text[:40]!r} must be a number of seconds, more than 0 and under 3600")
    return value


def tick_seconds(tty: bool) -> float:
    """:func:`tick_env` where set, else 1 s on a terminal and 10 s in a log."""
    try:
        value = tick_env()
    except InvalidArgument:
        value = None
    return value if value is not None else (1.0 if tty else 10.0)


class Running:
    """The tasks this process's lanes are running now: key -> (label, start). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now: dict[str, tuple[str, float]] = {}

    @contextmanager
    def track(self, task: Any) -> Iterator[None]:
        """Mark ``task`` (a campaign Task) running for the duration of the block."""
        with self._lock:
            self._now[task.key] = (f"{task.subject} on case {task.case.id}", time.perf_counter())
        try:
            yield
        finally:
            with self._lock:
                self._now.pop(task.key, None)

    def longest(self) -> tuple[str, str, float, int] | None:
        """(key, label, start, how many run) of the task running longest; None when none runs."""
        with self._lock:
            if not self._now:
                return None
            key, (label, start) = min(self._now.items(), key=lambda kv: kv[1][1])
            return key, label, start, len(self._now)


#: The one registry the lanes mark their tasks in (:mod:`harness.execute.lanes`).
RUNNING = Running()


class Progress:
    """A one-line progress bar on stderr over ``total`` tasks (relation members and oracle tasks included).

    It says what the runs showed, not verdicts (those come from the measure pass): tasks whose repetitions
    diverged, errors of valid inputs, errors of bad inputs (mostly expected: the contracts decide). ``weights``
    (task key -> estimated work) weight the time left; time left shows once :attr:`MIN_FOR_ETA` tasks finished."""

    MIN_FOR_ETA = 3

    def __init__(self, total: int, quiet: bool, weights: Mapping[str, float] | None = None,
                 running: Running = RUNNING) -> None:
        self.total, self.quiet = total, quiet or not total
        self.weights = dict(weights or {})
        self.total_weight = sum(self.weights.values()) if self.weights else float(total)
        self.done = self.diverged = self.errors = self.bad_errors = 0
        self.done_weight = self.first_weight = 0.0
        self.t0 = time.perf_counter()
        self.first: float | None = None
        self.last = self.last_done = 0.0
        self.tty = sys.stderr.isatty()
        self.tick = tick_seconds(self.tty)
        self.running = running
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def weight(self, key: str) -> float:
        return float(self.weights.get(key, 1.0)) if self.weights else 1.0

    def rate(self) -> float | None:
        """Measured seconds per unit of estimated work, from the tasks finished after the first."""
        measured = self.done_weight - self.first_weight
        if self.first is None or self.done < self.MIN_FOR_ETA or measured <= 0:
            return None
        return (self.last_done - self.first) / measured

    def left(self, now: float) -> float | None:
        """Seconds left: the measured rate times the estimated work not done; None until enough finished."""
        if self.first is None or self.done < self.MIN_FOR_ETA:
            return None
        measured = self.done_weight - self.first_weight
        if measured <= 0:
            return None
        return (now - self.first) / measured * max(self.total_weight - self.done_weight, 0.0)

    def line(self, now: float) -> str:
        el = now - self.t0
        left = self.left(now)
        width = 24
        fill = int(width * self.done / self.total) if self.total else width
        eta = f"~{left:.0f}s left" if left is not None else "time left: after a few tasks"
        text = (f"[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} tasks, {self.diverged} diverging, "
                f"{self.errors} errors, {self.bad_errors} bad-input errors, {el:4.0f}s, {eta}")
        longest = self.running.longest()
        if longest is not None:
            key, label, start, n = longest
            # the task's estimated seconds, from the cost estimate its runs' limits come from
            expected = f" of ~{self.weights[key]:.0f}s estimated" if key in self.weights else ""
            text += f"; running {label}: {now - start:.0f}s{expected}" + (f" (+{n - 1} more)" if n > 1 else "")
        return text

    def _write(self, now: float) -> None:
        self.last = now
        sys.stderr.write(("\r\x1b[K" if self.tty else "") + self.line(now) + ("" if self.tty else "\n"))
        sys.stderr.flush()

    def step(self, rec: TaskRecord, label: str) -> None:
        """One task finished (``label``: its key)."""
        with self._lock:
            self.done += 1
            now = time.perf_counter()
            w = self.weight(label)
            if rec.status == "skipped":  # decided before anything ran: no measure of the rate, no work left
                self.total_weight -= w
                w = 0.0
            self.done_weight += w
            if self.first is None:
                self.first, self.first_weight = now, w
            self.last_done = now
            failed = rec.status not in ("ok", "skipped")
            self.bad_errors += int(failed and rec.bad_input)
            self.errors += int(failed and not rec.bad_input)
            self.diverged += int(any(not t.bitwise_identical for t in rec.tensors.values()))
            if self.quiet:
                return
            if self.done != self.total and now - self.last < (0.2 if self.tty else self.tick):
                return
            self._write(now)
            if self.done == self.total and self.tty:
                sys.stderr.write("\n")
                sys.stderr.flush()

    # ---- the ticker: the line moves while a long run goes on --------------------------------------
    def start(self) -> "Progress":
        if not self.quiet and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="harness-progress", daemon=True)
            self._ticker.start()
        return self

    def _tick(self) -> None:
        while not self._stop.wait(self.tick):
            with self._lock:
                now = time.perf_counter()
                if self.done < self.total and now - self.last >= self.tick:
                    self._write(now)

    def stop(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
