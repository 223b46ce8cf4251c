"""The Recorder's timings: wall seconds per phase, and the CPU seconds of the compute phases beside them."""

from __future__ import annotations

import time

from harness.core.devices import parse_device
from harness.core.vocabulary import CPU_TIMING
from harness.subjects.base import Recorder, RunResult


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_compute_phases_add_their_cpu_seconds() -> None:
    rec = Recorder(parse_device("cpu"))
    with rec.phase("forward"):
        _burn(0.02)
    with rec.phase("backward"):
        _burn(0.02)
    assert rec.timings[CPU_TIMING] >= 0.04
    assert rec.timings["forward"] > 0 and rec.timings["backward"] > 0


def test_setup_and_transfer_add_no_cpu_seconds() -> None:
    rec = Recorder(parse_device("cpu"))
    with rec.phase("setup"):
        _burn(0.02)
    with rec.phase("transfer"):
        _burn(0.02)
    assert CPU_TIMING not in rec.timings
    assert set(rec.timings) == {"setup", "transfer"}


def test_cpu_seconds_are_not_subject_seconds() -> None:
    res = RunResult("s", "c", "cpu", "default", "ok", timings={"forward": 1.0, "backward": 2.0, CPU_TIMING: 5.0,
                                                                "setup": 7.0})
    assert res.subject_seconds == 3.0
    assert res.subject_cpu_seconds == 5.0
