"""harness.execute.inprocess: a run here starts at a worker's stack depth, with the context applied in it."""

from __future__ import annotations

import os
import select
import signal
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


def test_every_run_here_shares_one_thread_and_a_forked_child_starts_its_own():
    threads = []
    for _ in range(2):
        seen: dict = {}
        inprocess.execute(_probe(seen), CASE, CPU, get_context("default"))
        threads.append(seen["thread"])
    assert threads[0] is threads[1]  # one thread, as a pooled worker has one process (and a GPU one cuBLAS handle)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's run thread is not here; a run must still run, on a thread of its own
        try:
            seen = {}
            r = inprocess.execute(_probe(seen), CASE, CPU, get_context("default"))
            os.write(write, f"{r.status} {seen['thread'] is not threads[0]}".encode())
        finally:
            os._exit(0)
    os.close(write)
    # a child left with only the parent's (absent) thread would wait forever: give up after two minutes
    if not select.select([read], [], [], 120)[0]:
        os.kill(pid, signal.SIGKILL)
    with os.fdopen(read) as f:
        answer = f.read()
    os.waitpid(pid, 0)
    assert answer == "ok True", "the forked child's run never ran"


def test_what_escapes_the_run_is_raised_in_the_callers_thread():
    class Stop(BaseException):
        pass

    def run(case, device, context, rec) -> None:
        raise Stop("from the run's thread")

    with pytest.raises(Stop, match="from the run's thread"):
        inprocess.execute(Subject("probe.stop", "embed", run, devices=("cpu",)), CASE, CPU, get_context("default"))


def test_the_oracle_outputs_kept_are_bounded_by_bytes_and_run_once_while_kept(monkeypatch) -> None:
    """In-process runs keep a case's oracle outputs while within ORACLE_BYTES (the newest case's always): a case
    judged again does not run its oracle again; one whose outputs went does."""
    from harness.core.kept import ArrayCache
    from harness.execute import inprocess
    from harness.subjects.base import RunResult

    ran: list[str] = []

    def fake_execute(subject, case, device, context):
        ran.append(case.id)
        return RunResult(subject.name, case.id, device.id, context.name, "ok",
                         arrays={"y": np.zeros((case.spec["vocab"], 4), np.float64)})

    monkeypatch.setattr(inprocess, "execute", fake_execute)
    monkeypatch.setattr(inprocess, "_ORACLE_CACHE", ArrayCache())
    monkeypatch.setattr(inprocess, "ORACLE_BYTES", 2 * 20 * 4 * 8)
    cases = [Case("embed", seed, {"vocab": 20, "width": 4, "ids_shape": [3]}) for seed in (1, 2, 3)]
    for c in cases + cases[-1:]:
        name, arrays = inprocess.oracle_arrays("chainer.embed_id", c)
        assert arrays["y"].shape == (20, 4)
    assert ran == [c.id for c in cases]  # the last case again: kept
    assert inprocess._ORACLE_CACHE.held <= inprocess.ORACLE_BYTES and len(inprocess._ORACLE_CACHE) == 2
    inprocess.oracle_arrays("chainer.embed_id", cases[0])  # its outputs went: run again
    assert ran == [c.id for c in cases] + [cases[0].id]
