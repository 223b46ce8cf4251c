"""A plug-in whose import registers an exit handler (``--subject-plugin suites.plugins.leaves:SUBJECTS``): the
handler writes the file ``$HARNESS_TEST_FINALIZED`` names when the interpreter finalizes, so a test can tell
whether a worker left through the interpreter's finalization or without it. ``leaves.pid`` answers its
process id, which shows the plug-in was loaded where it ran."""

from __future__ import annotations

import atexit
import os

import numpy as np

from harness.core.cases import Case
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS"]


def _finalized() -> None:
    path = os.environ.get("HARNESS_TEST_FINALIZED")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))


atexit.register(_finalized)


def _pid(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        out = np.array([os.getpid()], dtype=np.int64)
    rec.output("pid", out)


SUBJECTS = (
    Subject("leaves.pid", "embed", _pid, devices=("cpu",), declared={"cpu": Declared(True, "test subject")},
            description="its process id"),
)
