"""A subject that dies on every second run in one process, for the pooled runs' stream (the worker runs a
task's pooled repetitions back to back and answers each as it ends).

Load with ``--subject-plugin suites.plugins.second_run:SUBJECTS``. In the ``embed`` family.

- ``secondrun.dies``: runs 1, 3, 5, ... of a process return ``y`` = the process id (int64); runs 2, 4, ...
  die with SIGSEGV in the forward phase.
"""

from __future__ import annotations

import os

import numpy as np

from harness.core.cases import Case
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject
from suites.plugins.misbehaving import _segfault

__all__ = ["SUBJECTS"]

_DECL = {"cpu": Declared(True, "test subject"), "gpu": Declared(True, "test subject")}
_RUNS = [0]  # runs of this subject in this process


def _dies_every_second_run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    _RUNS[0] += 1
    if _RUNS[0] % 2 == 0:
        _segfault(case, device, context, rec)
    with rec.phase("forward"):
        y = np.array([os.getpid()], dtype=np.int64)
    rec.output("y", device.put(y))


SUBJECTS: tuple[Subject, ...] = (
    Subject("secondrun.dies", "embed", _dies_every_second_run, declared=_DECL,
            description="dies with SIGSEGV on every second run in one process"),
)
