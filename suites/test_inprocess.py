"""harness.execute.inprocess: a run here starts at a worker's stack depth, with the context applied in it."""

from __future__ import annotations

import threading
import traceback

import numpy as np
import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.execute import inprocess
from harness.subjects.base import Subject

CASE = Case("embed", 3, {"vocab": 5, "width": 2, "ids_shape": [4]})


def _deep(n: int, fn):
    # pytest and Hypothesis put the gate's runs some seventy frames deep; this stands in for them
    return fn() if n == 0 else _deep(n - 1, fn)


def _probe(seen: dict):
    def run(case, device, context, rec) -> None:
        import chainer

        seen["thread"] = threading.current_thread()
        seen["depth"] = len(traceback.extract_stack())
        seen["debug"] = bool(chainer.config.debug)
        with rec.phase("forward"):
            rec.output("y", np.zeros(1, np.float32))

    return Subject("probe.inprocess", "embed", run, devices=("cpu",))


def test_a_run_here_is_as_shallow_as_in_a_worker_and_sees_its_context():
    seen: dict = {}
    result = _deep(80, lambda: inprocess.execute(_probe(seen), CASE, CPU, get_context("debug")))
    assert result.status == "ok" and list(result.arrays) == ["y"]
    assert seen["thread"] is not threading.current_thread()
    assert seen["depth"] < 20, seen["depth"]  # the eighty frames above the call are not in the run's stack
    assert seen["debug"] is True  # the debug context was applied in the run's own thread


def test_what_escapes_the_run_is_raised_in_the_callers_thread():
    class Stop(BaseException):
        pass

    def run(case, device, context, rec) -> None:
        raise Stop("from the run's thread")

    with pytest.raises(Stop, match="from the run's thread"):
        inprocess.execute(Subject("probe.stop", "embed", run, devices=("cpu",)), CASE, CPU, get_context("default"))
