"""A subject that blocks until it is released, for the progress line's test (a long run, without timing).

Load with ``--subject-plugin suites.plugins.blocking:SUBJECTS``. In the ``embed`` family.

- ``blocking.until_released``: waits (polling) until the file named by ``$HARNESS_TEST_RELEASE`` exists, at
  most ten minutes, then returns ``y = W[x]``.
"""

from __future__ import annotations

import os
import time

from harness.core.cases import Case, build_arrays
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS", "RELEASE_ENV"]

RELEASE_ENV = "HARNESS_TEST_RELEASE"
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


SUBJECTS: tuple[Subject, ...] = (
    Subject("blocking.until_released", "embed", _until_released, declared=_DECL, devices=("cpu",),
            description="waits for a release file, then y = W[x]"),
)
