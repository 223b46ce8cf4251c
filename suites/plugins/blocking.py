"""A subject that blocks until it is released, for the progress line's test (a long run, without timing).

Load with ``--subject-plugin suites.plugins.blocking:SUBJECTS``. In the ``embed`` family.

- ``blocking.until_released``: waits (polling) until the file named by ``$HARNESS_TEST_RELEASE`` exists, at
  most ten minutes, then returns ``y = W[x]``.
- ``blocking.in_pairs``: leaves a mark in the folder named by ``$HARNESS_TEST_PAIRS`` and waits (polling) until
  another run has left one too, at most a minute, then returns ``y = W[x]``: two lanes' first runs overlap,
  whatever the machine's load (the second lane is sure to take a task while the first waits).
"""

from __future__ import annotations

import os
import time

from harness.core.cases import Case, build_arrays
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS", "RELEASE_ENV", "PAIRS_ENV"]

RELEASE_ENV = "HARNESS_TEST_RELEASE"
PAIRS_ENV = "HARNESS_TEST_PAIRS"
_DECL = {"cpu": Declared(True, "test subject")}


def _until_released(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    path = os.environ.get(RELEASE_ENV, "")
    a = build_arrays(case)
    with rec.phase("forward"):
        for _ in range(12000):  # a bound, so a forgotten release never hangs a machine
            if not path or os.path.exists(path):
                break
            time.sleep(0.05)
        y = a["W"][a["x"]]
    rec.output("y", device.put(y))


def _in_pairs(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    folder = os.environ.get(PAIRS_ENV, "")
    a = build_arrays(case)
    with rec.phase("forward"):
        if folder:
            open(os.path.join(folder, f"{os.getpid()}-{time.monotonic_ns()}"), "w").close()
            for _ in range(1200):  # a bound: a run never paired goes on after a minute (the test then says so)
                if len(os.listdir(folder)) >= 2:
                    break
                time.sleep(0.05)
        y = a["W"][a["x"]]
    rec.output("y", device.put(y))


SUBJECTS: tuple[Subject, ...] = (
    Subject("blocking.until_released", "embed", _until_released, declared=_DECL, devices=("cpu",),
            description="waits for a release file, then y = W[x]"),
    Subject("blocking.in_pairs", "embed", _in_pairs, declared=_DECL, devices=("cpu",),
            description="waits until another run has started too, then y = W[x]"),
)
