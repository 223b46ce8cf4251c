"""A plug-in that hangs where ``$HARNESS_TEST_HANG`` says (``--subject-plugin suites.plugins.hangs:SUBJECTS``):
``import`` (its import never ends), ``accepts`` (``hangs.subject``'s ``accepts()`` never ends) or ``run`` (its
run never ends). Before it hangs it writes its process id into the file ``$HARNESS_TEST_HANG_MARK`` names, so a
test knows the hang has been reached."""

from __future__ import annotations

import os
import time

import numpy as np

from harness.core.cases import Case
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS"]

_WHERE = os.environ.get("HARNESS_TEST_HANG", "")


def _hang_here(where: str) -> None:
    if _WHERE != where:
        return
    mark = os.environ.get("HARNESS_TEST_HANG_MARK")
    if mark:
        with open(mark, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
    while True:
        time.sleep(3600)


_hang_here("import")


def _accepts(case: Case) -> bool:
    _hang_here("accepts")
    return True


def _run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        _hang_here("run")
        out = np.zeros(1, dtype=np.float32)
    rec.output("y", out)


SUBJECTS = (
    Subject("hangs.subject", "embed", _run, devices=("cpu",), accepts=_accepts,
            declared={"cpu": Declared(True, "test subject")}, description="hangs where HARNESS_TEST_HANG says"),
)
