"""Whether and how long a task may run, from what its case will cost (:mod:`harness.core.cost`).

- :func:`availability`: a task whose estimated peak exceeds the limit (:func:`harness.core.cost.memory_limit`:
  ``$HARNESS_MAX_CASE_BYTES``, else half this machine's memory; on a GPU at most the device's) is a ``skipped``
  row whose reason says ``needs about N GiB``: not judged, never run, never silently absent.
- :func:`timeout`: the seconds of CPU time one run may use (:func:`harness.core.cost.run_timeout`: a user's
  ``--timeout`` wins, else base + work x rate; :mod:`harness.execute.run_clock` holds the run to it).
- :class:`MemoryBudget`: the lanes of a campaign never start tasks together whose estimates together exceed
  this machine's memory.
"""

from __future__ import annotations

import threading
from typing import Any

from harness.core.cases import Case
from harness.core.cost import BASE_TIMEOUT, estimate, machine_memory, over_limit, run_timeout
from harness.core.devices import Device
from harness.execute.run_clock import WALL_FACTOR

__all__ = ["availability", "timeout", "host_bytes", "MemoryBudget", "time_bound", "weights", "RUN_SECONDS"]

_ESTIMATE_ERRORS = (KeyError, TypeError, ValueError, IndexError, OverflowError)


def availability(device: Device, case: Case, subject: str, explicit: int | None = None) -> tuple[bool, str]:
    """``(available, reason)`` of running ``subject`` on ``case`` on ``device``: the device's own availability,
    then whether the case's estimated peak fits the limit (``explicit``: a user's ``--max-case-bytes``; the reason
    names the case, the estimate and the limit)."""
    ok, reason = device.availability()
    if not ok:
        return ok, reason
    why = over_limit(case, device=device.id, subject=subject, explicit=explicit)
    return (False, why) if why is not None else (True, reason)


def timeout(case: Case, subject: str, device: str, explicit: float | None) -> float:
    """Seconds one run of ``subject`` on ``case`` may take before its worker is killed (``explicit`` wins)."""
    if explicit is not None:
        return float(explicit)
    try:
        cost = estimate(case, device=device, subject=subject)
    except _ESTIMATE_ERRORS:  # shapes that cannot be estimated: the run refuses them at once
        return BASE_TIMEOUT
    return run_timeout(cost)


def host_bytes(case: Case, subject: str, device: str) -> int:
    """The host memory a run holds at its peak (on a GPU: the inputs it builds before copying them over)."""
    try:
        cost = estimate(case, device=device, subject=subject)
    except _ESTIMATE_ERRORS:
        return 0
    return cost.peak_of(subject) if device == "cpu" else cost.inputs


class MemoryBudget:
    """Bytes held by the tasks running now, against ``limit`` (default this machine's memory). A task is let in
    when it fits beside the others, or when nothing else runs (alone, a task too large for the limit is
    refused by :func:`availability`, not held back forever). Thread-safe."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = machine_memory() if limit is None else int(limit)
        self.held: dict[Any, int] = {}
        self._lock = threading.Lock()

    def take(self, key: Any, nbytes: int) -> bool:
        """Hold ``nbytes`` for ``key`` if they fit; False (nothing held) if not."""
        with self._lock:
            if self.held and sum(self.held.values()) + nbytes > self.limit:
                return False
            self.held[key] = nbytes
            return True

    def give(self, key: Any) -> None:
        """Release what ``key`` held."""
        with self._lock:
            self.held.pop(key, None)


#: Seconds one run costs whatever its case (a worker's answer, the digests): what the smallest task weighs.
RUN_SECONDS = 0.05


def weights(tasks: Any, repeats: int, fresh: int) -> dict[str, float]:
    """Each task's estimated seconds (task key -> runs x (:data:`RUN_SECONDS` + the case's work); a size case's
    runs: :func:`harness.generate.dimensions.size_case_runs`): what the progress line weights the measured time by."""
    from harness.generate.dimensions import size_case_runs

    out: dict[str, float] = {}
    for t in tasks:
        try:
            work = estimate(t.case, device=t.device, subject=t.subject).work
        except _ESTIMATE_ERRORS:
            work = 0.0
        r, f, left_out = size_case_runs(t.case, t.context, "cpu" if t.device == "cpu" else "gpu", repeats, fresh)
        out[t.key] = RUN_SECONDS if left_out is not None else (r + f) * (RUN_SECONDS + work)
    return out


def time_bound(case: Case, subject: str, device: str, runs: int, explicit: float | None) -> str:
    """One line saying up front how long the runs may take at most: ``runs`` x the run timeout."""
    t = timeout(case, subject, device, explicit)
    where = "--timeout" if explicit is not None else "scaled with the case's estimated work; --timeout sets it"
    return (f"time bound: {runs} run(s) of {subject} x {t:.0f} s of CPU time each = {runs * t:.0f} s of CPU at most "
            f"({where}; a run that sleeps: {WALL_FACTOR:g} x that in wall seconds), the oracle's runs besides")
