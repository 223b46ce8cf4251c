"""Subjects that end their process on purpose (``--subject-plugin suites.plugins.exits:SUBJECTS``), for the
verbs that must survive them: ``exits.sys_exit_0`` calls ``sys.exit(0)`` in its forward (a "success" exit code
that must never read as "bit-identical"); ``exits.os_exit_3`` calls ``os._exit(3)`` there."""

from __future__ import annotations

import os
import sys

from harness.core.cases import Case
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS"]

_DECL = {"cpu": Declared(True, "test subject")}


def _sys_exit(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        sys.exit(0)


def _os_exit(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        os._exit(3)


SUBJECTS = (
    Subject("exits.sys_exit_0", "embed", _sys_exit, devices=("cpu",), declared=_DECL,
            description="sys.exit(0) in forward"),
    Subject("exits.os_exit_3", "embed", _os_exit, devices=("cpu",), declared=_DECL,
            description="os._exit(3) in forward"),
)
