"""The Recorder's timings: wall seconds per phase, and the CPU seconds of the compute phases beside them."""

from __future__ import annotations

import time

from harness.core.devices import parse_device
from harness.core.vocabulary import CPU_TIMING
from harness.subjects.base import Recorder, RunResult


def _timings(*phases: str) -> dict[str, float]:
    """A Recorder's timings after each of ``phases`` burned 0.02 s of this thread's CPU."""
    rec = Recorder(parse_device("cpu"))
    for name in phases:
        with rec.phase(name):
            end = time.process_time() + 0.02
            while time.process_time() < end:
                pass
    return rec.timings


def test_compute_phases_add_their_cpu_seconds() -> None:
    timings = _timings("forward", "backward")
    assert timings[CPU_TIMING] >= 0.04
    assert timings["forward"] > 0 and timings["backward"] > 0


def test_setup_and_transfer_add_no_cpu_seconds() -> None:
    timings = _timings("setup", "transfer")
    assert CPU_TIMING not in timings
    assert set(timings) == {"setup", "transfer"}


def test_cpu_seconds_are_not_subject_seconds() -> None:
    res = RunResult("s", "c", "cpu", "default", "ok", timings={"forward": 1.0, "backward": 2.0, CPU_TIMING: 5.0,
                                                                "setup": 7.0})
    assert res.subject_seconds == 3.0
    assert res.subject_cpu_seconds == 5.0
