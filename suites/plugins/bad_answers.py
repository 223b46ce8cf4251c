"""Subjects that corrupt the worker's answer, for the worker protocol's own tests.

Load with ``--subject-plugin suites.plugins.bad_answers:SUBJECTS``. Each finds the worker's answer pipe
(its only pipe open for writing: stdout and stderr are ``/dev/null``) and writes into it, as a subject that
knows the harness could. All are in the ``embed`` family; the harness must record each as a row.

- ``badanswer.garbage``: writes bytes that are no answer (an old-style pickle frame among them), then
  returns normally, so the real answer follows the garbage.
- ``badanswer.huge_frame``: announces a frame of 2**40 bytes.
- ``badanswer.truncated``: announces 1000 bytes, writes 10, and exits.
- ``badanswer.not_an_answer``: a well-framed JSON answer whose array is of object dtype at a wild offset.
- ``badanswer.unpicklable``: returns normally with a lambda among its timings (no answer can carry it).
"""

from __future__ import annotations

import fcntl
import os
import pickle
import stat
import struct

from harness.core.cases import Case, build_arrays
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS", "answer_fd"]

_DECL = {"cpu": Declared(True, "test subject"), "gpu": Declared(True, "test subject")}


def answer_fd() -> int:
    """The worker's answer pipe: the one pipe this process holds open for writing."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            st = os.fstat(fd)
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if stat.S_ISFIFO(st.st_mode) and flags & os.O_ACCMODE == os.O_WRONLY:
            return fd
    raise RuntimeError("no answer pipe found")


def _write(data: bytes) -> None:
    fd = answer_fd()
    while data:
        data = data[os.write(fd, data):]


def _ok(case: Case, device: Device, rec: Recorder) -> None:
    a = build_arrays(case)
    with rec.phase("forward"):
        y = a["W"][a["x"]]
    rec.output("y", device.put(y))


class _Boom:
    def __reduce__(self):  # what an old pickle-speaking parent would have run on unpickling
        return (os.getpid, ())


def _garbage(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    blob = pickle.dumps(_Boom())
    _write(struct.pack("!i", len(blob)) + blob + b"\x80\x04 not an answer \xff" * 8)
    _ok(case, device, rec)


def _huge_frame(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    _write(b"HRNW" + struct.pack("<Q", 1 << 40))
    _ok(case, device, rec)


def _truncated(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    _write(b"HRNW" + struct.pack("<Q", 1000) + b"0123456789")
    os._exit(0)


def _not_an_answer(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    import json

    body = json.dumps({"result": {"status": "ok", "timings": {}}, "arrays": [
        {"name": "y", "dtype": "O", "shape": [1 << 20], "offset": 1 << 40, "nbytes": 8 << 20, "digest": "x"}]})
    _write(b"HRNW" + struct.pack("<Q", len(body)) + body.encode())
    _ok(case, device, rec)


def _unpicklable(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    _ok(case, device, rec)
    rec.timings["forward"] = lambda: 0.0  # type: ignore[assignment]


SUBJECTS: tuple[Subject, ...] = (
    Subject("badanswer.garbage", "embed", _garbage, declared=_DECL, description="garbage in the answer pipe"),
    Subject("badanswer.huge_frame", "embed", _huge_frame, declared=_DECL, description="announces 1 TiB"),
    Subject("badanswer.truncated", "embed", _truncated, declared=_DECL, description="a frame cut short, then exit"),
    Subject("badanswer.not_an_answer", "embed", _not_an_answer, declared=_DECL,
            description="framed JSON that is no answer"),
    Subject("badanswer.unpicklable", "embed", _unpicklable, declared=_DECL, description="a lambda in its timings"),
)

