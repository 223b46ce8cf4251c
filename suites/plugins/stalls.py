"""Subjects whose runs do not answer for reasons a test controls (``--subject-plugin suites.plugins.stalls:SUBJECTS``):

- ``stalls.stopped_once``: its first run on a case stops its own worker with SIGSTOP (nobody continues it: the
  worker is starved of CPU, as a machine under load would starve it, without any timing); the next run answers.
  The first run leaves a mark file, :func:`mark_of` the case, so the second knows;
- ``stalls.stopped_always``: every run stops its worker;
- ``stalls.spins``: every run spins forever, using all the CPU it gets (a hang that a CPU-time limit catches).
"""

from __future__ import annotations

import os
import signal
import tempfile

import numpy as np

from harness.core.cases import Case
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS", "mark_of"]


def mark_of(case: Case) -> str:
    """The file whose presence says ``stalls.stopped_once`` already stopped once on ``case``."""
    return os.path.join(tempfile.gettempdir(), f"harness-test-stopped-once-{case.id}")


def _stop() -> None:
    os.kill(os.getpid(), signal.SIGSTOP)


def _answer(rec: Recorder) -> None:
    rec.output("y", np.arange(3, dtype=np.float32))


def _stopped_once(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        mark = mark_of(case)
        if not os.path.exists(mark):
            with open(mark, "w", encoding="utf-8") as f:
                f.write(f"{os.getpid()}\n")
            _stop()
    _answer(rec)


def _stopped_always(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        _stop()
    _answer(rec)


def _spins(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        n = 0
        while n >= 0:
            n += 1
    _answer(rec)


_DECL = {"cpu": Declared(True, "test subject")}
SUBJECTS = (
    Subject("stalls.stopped_once", "embed", _stopped_once, devices=("cpu",), declared=_DECL,
            description="stops its worker with SIGSTOP in its first run on a case"),
    Subject("stalls.stopped_always", "embed", _stopped_always, devices=("cpu",), declared=_DECL,
            description="stops its worker with SIGSTOP in every run"),
    Subject("stalls.spins", "embed", _spins, devices=("cpu",), declared=_DECL, description="spins forever"),
)
