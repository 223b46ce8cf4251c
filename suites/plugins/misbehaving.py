"""Subjects that misbehave on purpose, for the runner's and the registry's own tests.

Load with ``--subject-plugin suites.plugins.misbehaving:SUBJECTS`` (workers get the project root on
PYTHONPATH, so ``suites.plugins`` imports as a namespace package). All are in the ``embed`` family.

- ``misbehaving.segfault``: the process dies with SIGSEGV in the forward phase.
- ``misbehaving.hang``: sleeps an hour in the forward phase (the runner's timeout must end it).
- ``misbehaving.nan``: finishes normally; ``y`` and ``grad.W`` are all NaN.
- ``misbehaving.env_probe``: ``y`` is an int64 array holding ``int(PYTHONHASHSEED or 0)``; ``pid``
  holds the worker's process id.
- ``misbehaving.declares``: calls ``chainer.utils.nondeterministic('myAtomic')`` in its backward.
- ``misbehaving.raises_forward`` / ``misbehaving.raises_backward``: raise ``RuntimeError`` in that phase.
- ``misbehaving.object_output``: ``y`` is an array of Python objects (no bits to compare).
- ``misbehaving.wrong_shape``: ``grad.W`` has a shape other than the oracle's.
- ``misbehaving.slow``: sleeps ``SLOW_SECONDS`` then returns a deterministic function of the case
  (for interrupting a campaign part way).
- ``misbehaving.hog``: allocates all of the worker's ``RLIMIT_AS`` (a MemoryError row under a limit).
- ``misbehaving.rlimit_probe``: ``y`` is the worker's soft ``RLIMIT_AS`` (-1 when unlimited).
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np

from harness.core.cases import Case, build_arrays
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS", "SLOW_SECONDS"]

SLOW_SECONDS = 0.25

_DECL = {"cpu": Declared(True, "test subject"), "gpu": Declared(True, "test subject")}


def _segfault(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file in the campaign's directory
    except (ImportError, ValueError, OSError):
        pass
    with rec.phase("forward"):
        os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(30)  # the signal is delivered before this returns


def _hang(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        time.sleep(3600)


def _nan(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    a = build_arrays(case)
    with rec.phase("forward"):
        y = np.full(a["gy"].shape, np.nan, dtype=np.float32)
    rec.output("y", device.put(y))
    with rec.phase("backward"):
        gW = np.full(a["W"].shape, np.nan, dtype=np.float32)
    rec.output("grad.W", device.put(gW))


def _env_probe(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        y = np.full((2,), int(os.environ.get("PYTHONHASHSEED", "0") or 0), dtype=np.int64)
    rec.output("y", device.put(y))
    rec.output("pid", device.put(np.array([os.getpid()], dtype=np.int64)))


def _declares(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    from harness.core.compat import import_chainer

    chainer = import_chainer()
    a = build_arrays(case)
    with rec.phase("forward"):
        y = a["W"][a["x"]]
    rec.output("y", device.put(y))
    with rec.phase("backward"):
        chainer.utils.nondeterministic("myAtomic")
        gW = np.zeros_like(a["W"])
    rec.output("grad.W", device.put(gW))


def _raises(phase: str):
    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        with rec.phase("forward"):
            if phase == "forward":
                raise RuntimeError("misbehaving subject raised in forward")
            y = build_arrays(case)["W"]
        rec.output("y", device.put(y))
        with rec.phase("backward"):
            raise RuntimeError("misbehaving subject raised in backward")

    return run


def _slow(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    a = build_arrays(case)
    with rec.phase("forward"):
        time.sleep(SLOW_SECONDS)
        y = a["W"][a["x"]]
    rec.output("y", device.put(y))


def _object_output(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        y = np.empty(3, dtype=object)
        y[:] = [1, "two", None]
    rec.outputs({"y": y})


def _wrong_shape(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    a = build_arrays(case)
    with rec.phase("forward"):
        gw = np.zeros((a["W"].shape[0] + 1, a["W"].shape[1] + 2), dtype=np.float32)
    rec.outputs({"y": np.full(np.shape(a["x"]) + (a["W"].shape[1],), np.nan, np.float32), "grad.W": gw})


SUBJECTS: tuple[Subject, ...] = (
    Subject("misbehaving.segfault", "embed", _segfault, declared=_DECL, description="dies with SIGSEGV"),
    Subject("misbehaving.hang", "embed", _hang, declared=_DECL, description="sleeps an hour"),
    Subject("misbehaving.nan", "embed", _nan, declared=_DECL, description="all-NaN outputs"),
    Subject("misbehaving.env_probe", "embed", _env_probe, declared=_DECL,
            description="y = PYTHONHASHSEED of the worker; pid = its process id"),
    Subject("misbehaving.declares", "embed", _declares, declared=_DECL,
            description="calls chainer.utils.nondeterministic('myAtomic')"),
    Subject("misbehaving.raises_forward", "embed", _raises("forward"), declared=_DECL,
            description="raises RuntimeError in forward"),
    Subject("misbehaving.raises_backward", "embed", _raises("backward"), declared=_DECL,
            description="raises RuntimeError in backward"),
    Subject("misbehaving.object_output", "embed", _object_output, declared=_DECL,
            description="an output of object dtype"),
    Subject("misbehaving.wrong_shape", "embed", _wrong_shape, declared=_DECL,
            description="grad.W of the wrong shape, y all NaN"),
    Subject("misbehaving.slow", "embed", _slow, declared=_DECL, description="sleeps, then deterministic"),
)


def _hog(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    """Asks for more address space than the worker's RLIMIT_AS allows (4 GiB when there is none).

    ``np.empty`` touches no page, so without a limit this succeeds cheaply and the test that
    expects a MemoryError row fails instead of swapping the machine.
    """
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    nbytes = 4 << 30 if soft == resource.RLIM_INFINITY else int(soft)
    with rec.phase("forward"):
        big = np.empty(nbytes, dtype=np.uint8)
    rec.output("y", device.put(np.array([big.size], dtype=np.int64)))


def _rlimit_probe(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    with rec.phase("forward"):
        y = np.array([-1 if soft == resource.RLIM_INFINITY else soft], dtype=np.int64)
    rec.output("y", device.put(y))


SUBJECTS = SUBJECTS + (
    Subject("misbehaving.hog", "embed", _hog, declared=_DECL,
            description="allocates all of its RLIMIT_AS (4 GiB untouched when unlimited)"),
    Subject("misbehaving.rlimit_probe", "embed", _rlimit_probe, declared=_DECL,
            description="y = the worker's soft RLIMIT_AS (-1: unlimited)"),
)
