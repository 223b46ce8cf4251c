"""Worker processes: each runs subjects for the runner, so a crash or a hang costs one run, not the campaign.

A :class:`Worker` is a separate process with two private pipes. It imports Chainer, loads the plug-ins it
was given, then answers requests ``(case_json, subject, device, context, seq, count)``: ``count`` runs one after
another, each answered with a :class:`~harness.subjects.base.RunResult` as it ends (a task's pooled repetitions are
one request, so the worker never waits on the parent between them). The parent waits at most ``timeout`` seconds
for each answer; a
worker that dies (segfault, abort, out of memory), does not answer in time or answers something that is not
a well-formed answer is killed and reported (``crashed`` / ``timeout``), and the caller starts a new one.

Two ways to start one (``fork``):

- *spawned* (``fork=False``, the default and what fresh-process runs use): ``python -m
  harness.execute.worker``, a brand-new interpreter with its own hash seed and its own imports;
- *forked* (``fork=True``, the campaign's pooled worker): forked from a :class:`Zygote`, a process started
  once per start-up environment that has imported NumPy, Chainer and ESPnet and never runs a subject. The
  worker then costs a fork, not an import. It shares the zygote's hash seed and its imported modules (their
  import-time state, never a subject's run); NumPy's global random state is re-seeded after the fork.
  Where a zygote cannot be had (no ``os.pidfd_open``, or it failed to start) the worker is spawned.

Answers never travel as pickles: the worker sends a length-framed answer, JSON naming each array's dtype,
shape, offset, digest and NaN/Inf counts, followed by the arrays' raw bytes when they add up to at most 1 MiB
(read straight into the buffer the arrays then view). Bigger arrays go into one file of a spool directory
(on ``/dev/shm`` where it has room, so no disk is touched) that the parent maps copy-on-write and unlinks:
they cross from the worker to the campaign without being pickled, piped or copied. The digests are taken in
the worker, so the campaign never hashes an array again. Anything else in
the answer pipe (garbage, a truncated frame, JSON that is not an answer) is a ``crashed`` row with a
``MalformedAnswer`` error, never an exception in the harness: nothing a subject writes is unpickled here.

Environment-level settings (``CUBLAS_WORKSPACE_CONFIG``, ``OMP_NUM_THREADS``, ``PYTHONHASHSEED``) are given
to the process at start-up (for a forked worker: to its zygote), the only time they take effect.

Memory: each worker's address space is limited (``resource.RLIMIT_AS``, soft limit only) to
``memory_limit`` bytes: the :class:`Worker` argument, else ``$HARNESS_WORKER_MEMORY`` (bytes;
``0`` or ``none`` for no limit), else half the machine's RAM. A subject that allocates beyond it
gets ``MemoryError`` (an ``error`` row) or, if native code aborts, dies (a ``crashed`` row); the
machine never swaps. The limit is lifted before the first GPU run in a worker: CuPy and the CUDA
driver reserve tens of GiB of virtual address space that is never backed by host memory, so
``RLIMIT_AS`` would refuse them for no reason (a cgroup limit would be the tool there).
"""

from __future__ import annotations

import atexit
import json
import math
import mmap
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from harness.core import lifeline
from harness.core.errors import WorkerError
from harness.judge.bits import dtype_name as _dtype_name
from harness.subjects.base import ErrorInfo, RunResult

__all__ = ["Worker", "Answer", "Zygote", "worker_main", "tensor_meta", "worker_env", "zygote_for", "prestart_zygote",
           "close_zygotes", "MEMORY_ENV", "default_memory_limit", "parse_memory_limit", "MAX_ANSWER_BYTES",
           "OUTPUT_ENV", "output_limit"]

#: Environment variable for the workers' default memory limit (bytes; 0 or "none": no limit).
MEMORY_ENV = "HARNESS_WORKER_MEMORY"
# How the parent tells a spawned child its limit (internal).
_LIMIT_ENV = "HARNESS_WORKER_RLIMIT_AS"

#: The largest answer frame (JSON, arrays excluded) the parent reads; a longer one is malformed.
MAX_ANSWER_BYTES = 64 << 20
_MAGIC = b"HRNW"
_FRAME = struct.Struct("<4sQ")
_STATUSES = ("ok", "error", "skipped")
_NUMERIC_KINDS = "biufc"
_ALIGN = 64


def parse_memory_limit(text: str, name: str = MEMORY_ENV) -> int | None:
    """Bytes from ``text`` (an int, ``0``/``none`` for no limit); a bad value is one InvalidArgument line."""
    from harness.core.errors import InvalidArgument

    t = text.strip().lower()
    if t in ("", "0", "none", "off"):
        return None
    try:
        value = int(t)
    except ValueError:
        raise InvalidArgument(f"{name}={text!r} must be a number of bytes, or 0/none for no limit") from None
    if value < 0:
        raise InvalidArgument(f"{name}={text!r} must be a number of bytes, or 0/none for no limit")
    return value


#: Environment variable for the most bytes of arrays this process takes from one run (0 or "none": no limit).
OUTPUT_ENV = "HARNESS_MAX_OUTPUT_BYTES"


def output_limit() -> int | None:
    """``$HARNESS_MAX_OUTPUT_BYTES``, else an eighth of the RAM: the harness holds every repetition's outputs and
    measures them in its own process, so one run's outputs larger than that would end the harness, not the run."""
    if OUTPUT_ENV in os.environ:
        return parse_memory_limit(os.environ[OUTPUT_ENV], OUTPUT_ENV)
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) // 8
    except (AttributeError, ValueError, OSError):
        return None


def default_memory_limit() -> int | None:
    """``$HARNESS_WORKER_MEMORY`` if set, else half the machine's RAM (None where that is unknown)."""
    if MEMORY_ENV in os.environ:
        return parse_memory_limit(os.environ[MEMORY_ENV])
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) // 2
    except (AttributeError, ValueError, OSError):
        return None


def _apply_memory_limit(limit: int | None) -> None:
    """In the child, before anything big is allocated: the soft RLIMIT_AS the parent asked for."""
    if not limit:
        return
    try:
        import resource
    except ImportError:  # not POSIX: no limit, said in the module docstring
        return
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        # The soft limit only, so that a GPU run can lift it again (see _lift_memory_limit).
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        pass


def _lift_memory_limit() -> None:
    """Before a GPU run: CuPy/CUDA reserve huge virtual address space, so RLIMIT_AS must not apply."""
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        except (ValueError, OSError):
            pass


# --------------------------------------------------------------------------- framing


def _write_frame(fd: int, payload: bytes | list[bytes | memoryview]) -> None:
    """One frame: magic, length, payload. Written with one ``write`` (a small frame joined first: each write
    can wake the reader, and a context switch costs more than copying a few KiB)."""
    pieces = [payload] if isinstance(payload, (bytes, bytearray)) else payload
    total = sum(len(p) for p in pieces)
    head = _FRAME.pack(_MAGIC, total)
    data = memoryview(b"".join([head, *pieces]) if total <= _INLINE_BYTES + (1 << 16) else head)
    rest = [] if total <= _INLINE_BYTES + (1 << 16) else pieces
    for p in [data, *rest]:
        view = memoryview(p)
        while view:
            n = os.write(fd, view)
            view = view[n:]


class _Malformed(Exception):
    """The answer pipe held something that is not an answer."""


class _NoAnswer(Exception):
    """No (complete) answer within the deadline."""


def _read_exact(fd: int, n: int, deadline: float) -> bytearray:
    """``n`` bytes from ``fd`` by ``deadline`` (time.monotonic), read straight into one buffer; EOFError at end
    of file, _NoAnswer at the deadline."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        wait = deadline - time.monotonic()
        if wait <= 0:
            raise _NoAnswer()
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            raise _NoAnswer()
        k = os.readv(fd, [view[got:]])
        if not k:
            raise EOFError()
        got += k
    return buf


def _read_frame(fd: int, deadline: float) -> bytearray:
    head = _read_exact(fd, _FRAME.size, deadline)
    magic, length = _FRAME.unpack(head)
    if magic != _MAGIC:
        raise _Malformed(f"the answer pipe held {head[:16]!r}, not a worker answer")
    if length > MAX_ANSWER_BYTES:
        raise _Malformed(f"an answer of {length} bytes announced (the most is {MAX_ANSWER_BYTES})")
    try:
        return _read_exact(fd, length, deadline)
    except EOFError:
        raise _Malformed(f"the answer was cut short (announced {length} bytes)") from None


# --------------------------------------------------------------------------- the answer


class Answer:
    """A run's result and, per array, what the worker measured of it (``dtype`` name, ``shape``, ``digest``,
    and for floats ``nan``/``inf``): the campaign's run record takes it as it is."""

    __slots__ = ("result", "tensors", "spooled")

    def __init__(self, result: RunResult, tensors: dict[str, dict[str, Any]], spooled: bool = False) -> None:
        self.result = result
        self.tensors = tensors
        #: whether its arrays came through a spool file (which the reader then unlinks)
        self.spooled = spooled


def tensor_meta(arrays: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Digest, dtype, shape and NaN/Inf counts of each array (in the worker, where the arrays are)."""
    from harness.judge.bits import nonfinite_counts_all
    from harness.judge.digest import digest_all

    names = list(arrays)
    arrs = [arrays[k] for k in names]
    digests = digest_all(arrs)
    counts = nonfinite_counts_all(arrs)
    out = {}
    for k, a, d, c in zip(names, arrs, digests, counts):
        info: dict[str, Any] = {"dtype": _dtype_name(a.dtype), "shape": list(a.shape), "digest": d}
        if a.dtype.kind == "f":
            info["nan"], info["inf"] = c
        out[k] = info
    return out


#: Answers whose arrays add up to at most this many bytes carry them in the frame itself (read straight into
#: the buffer the arrays then view); bigger ones go through a spool file (mapped, never read or piped). Below
#: it, creating, mapping and unlinking a file costs more than the bytes: measured on the bench's overhead
#: section, where most answers are a few KiB.
_INLINE_BYTES = 1 << 20
_JSON_LEN = struct.Struct("<I")


def _encode_answer(result: RunResult, path: str) -> list[bytes | memoryview]:
    """The worker's answer frame, in pieces: JSON meta, then (small answers) the arrays themselves, aligned;
    bigger answers write their arrays into ``path`` instead."""
    arrays = {k: np.ascontiguousarray(v) for k, v in result.arrays.items()}
    tensors = tensor_meta(arrays)
    layout = []
    pieces: list[bytes | memoryview] = []
    offset = 0
    for name, a in arrays.items():
        pad = (-offset) % _ALIGN
        if pad:
            pieces.append(b"\0" * pad)
            offset += pad
        nbytes = a.nbytes
        if nbytes:
            pieces.append(memoryview(a.reshape(-1).view(np.uint8)))
        meta = tensors[name]
        entry = {"name": name, "dtype": a.dtype.str, "shape": meta["shape"], "offset": offset, "nbytes": nbytes,
                 "digest": meta["digest"]}
        if "nan" in meta:
            entry["nan"], entry["inf"] = meta["nan"], meta["inf"]
        layout.append(entry)
        offset += nbytes
    inline = offset <= _INLINE_BYTES
    if arrays and not inline:
        with open(path, "wb") as f:
            for p in pieces:
                f.write(p)
        pieces = []
    head = json.dumps({"result": result.meta(), "arrays": layout, "inline": inline}).encode()
    head += b" " * ((-(_JSON_LEN.size + len(head))) % _ALIGN)  # the arrays start aligned in the frame
    return [_JSON_LEN.pack(len(head)), head, *pieces]


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise _Malformed(what)


def _decode_answer(payload: bytearray, base: dict[str, str], path: str, limit: int | None = None) -> Answer:
    """The answer in ``payload`` (its arrays viewed in it, or mapped from ``path``); :class:`_Malformed` for
    anything else, whatever it held: the worker's fault is a row, never the campaign's end."""
    try:
        return _decode(payload, base, path, limit)
    except _Malformed:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError, MemoryError) as exc:
        raise _Malformed(f"{type(exc).__name__}: {str(exc)[:200]}") from None


def _decode(payload: bytearray, base: dict[str, str], path: str, limit: int | None = None) -> Answer:
    _check(len(payload) >= _JSON_LEN.size, "the answer is empty")
    (n,) = _JSON_LEN.unpack_from(payload)
    _check(_JSON_LEN.size + n <= len(payload), "the answer's meta runs past its end")
    try:
        msg = json.loads(bytes(memoryview(payload)[_JSON_LEN.size:_JSON_LEN.size + n]))
    except (ValueError, RecursionError) as exc:
        raise _Malformed(f"the answer is not JSON ({type(exc).__name__}: {str(exc)[:120]})") from None
    _check(isinstance(msg, dict) and isinstance(msg.get("result"), dict) and isinstance(msg.get("arrays"), list),
           "the answer has no result and arrays")
    if "transfer_error" in msg:
        raise _Malformed(f"the worker could not hand its arrays over: {str(msg['transfer_error'])[:300]}")
    meta = msg["result"]
    status = meta.get("status")
    _check(status in _STATUSES, f"status={str(status)[:40]!r} is not one of {', '.join(_STATUSES)}")
    timings = meta.get("timings") or {}
    _check(isinstance(timings, dict) and all(isinstance(k, str) and isinstance(v, (int, float))
                                             and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                                             for k, v in timings.items()), "timings are not seconds by phase")
    warns = meta.get("declared_warnings") or []
    _check(isinstance(warns, list) and all(isinstance(w, str) for w in warns), "declared_warnings not strings")
    err = meta.get("error")
    error = None
    if err is not None:
        _check(isinstance(err, dict) and all(isinstance(err.get(k), str) for k in ("type", "message", "phase"))
               and isinstance(err.get("traceback", ""), str), "error is not type, message and phase")
        error = ErrorInfo.from_dict(err)
    skip = meta.get("skip_reason")
    _check(skip is None or isinstance(skip, str), "skip_reason is not a string")
    arrays: dict[str, np.ndarray] = {}
    tensors: dict[str, dict[str, Any]] = {}
    layout = msg["arrays"]
    spooled = bool(layout) and msg.get("inline") is not True
    total = sum(t.get("nbytes", 0) for t in layout if type(t) is dict and type(t.get("nbytes")) is int)
    if limit is not None and total > limit:  # a row of its own, before anything of it is mapped or measured
        return Answer(RunResult(**base, status="error", error=ErrorInfo(
            "OutputTooLarge", f"the run's outputs hold {total:,} bytes, more than the {limit:,} the harness takes "
            f"from one run ({OUTPUT_ENV})", "transfer")), {}, spooled)
    if layout:
        start = _JSON_LEN.size + n
        arrays, tensors = _view_arrays(layout, _map_file(path) if spooled else memoryview(payload)[start:])
    _check(status == "ok" or not arrays, f"a {status} answer holds arrays")
    result = RunResult(**base, status=status, arrays=arrays, declared_warnings=tuple(warns), error=error,
                       skip_reason=skip, timings={k: float(v) for k, v in timings.items()})
    return Answer(result, tensors, spooled)


def _map_file(path: str) -> Any:
    """The spool file mapped copy-on-write (the caller unlinks it; the mapping outlives the name)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise _Malformed(f"the answer names arrays but its spool file is missing ({exc.strerror})") from None
    try:
        size = os.fstat(fd).st_size
        return mmap.mmap(fd, size, access=mmap.ACCESS_COPY) if size else bytearray()
    finally:
        os.close(fd)


#: The dtypes an answer may name (``dtype.str``, this machine's byte order): bool, ints, floats, complex.
_DTYPES: dict[str, np.dtype] = {dt.str: dt for dt in map(np.dtype, (
    "?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16",
    *(("f16", "c32") if hasattr(np, "float128") else ())))}


def _view_arrays(layout: list[Any], buf: Any) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
    """The arrays of an answer, as views of ``buf`` (the frame, or the mapped spool file): no copy.
    (This runs for every array of every run, 74 for an NStepBiLSTM answer: the checks build their message only
    when one fails, the shape is checked and counted in one loop, and a view is one ``np.ndarray`` call, a
    third of ``frombuffer`` and ``reshape``.)"""
    size = len(buf)
    arrays: dict[str, np.ndarray] = {}
    tensors: dict[str, dict[str, Any]] = {}
    for t in layout:
        name = t.get("name") if type(t) is dict else None
        if type(name) is not str or name in arrays:
            raise _Malformed("an array entry without a (unique) name")
        dtype = t.get("dtype")
        dt = _DTYPES.get(dtype) if type(dtype) is str else None
        if dt is None:
            raise _Malformed(f"array {name[:60]!r}: dtype {str(dtype)[:40]!r} is not a dtype of numbers")
        shape, offset, nbytes, digest = t.get("shape"), t.get("offset"), t.get("nbytes"), t.get("digest")
        if not (type(shape) is list and len(shape) <= 32 and type(offset) is int and type(nbytes) is int
                and 0 <= offset and 0 <= nbytes and offset + nbytes <= size):
            raise _Malformed(f"array {name[:60]!r}: a bad shape or place")
        count = 1
        for n in shape:
            if type(n) is not int or n < 0:
                raise _Malformed(f"array {name[:60]!r}: a bad shape or place")
            count *= n
        if count * dt.itemsize != nbytes:
            raise _Malformed(f"array {name[:60]!r}: {nbytes} bytes for {shape} of {dt}")
        if not (type(digest) is str and len(digest) < 200):
            raise _Malformed(f"array {name[:60]!r}: no digest")
        arrays[name] = np.ndarray(shape, dt, buf, offset) if count else np.empty(shape, dt)
        info: dict[str, Any] = {"dtype": _dtype_name(dt), "shape": shape, "digest": digest}
        if dt.kind == "f":
            nan, inf = t.get("nan"), t.get("inf")
            if not (type(nan) is int and type(inf) is int and 0 <= nan <= count and 0 <= inf <= count):
                raise _Malformed(f"array {name[:60]!r}: bad NaN/Inf counts")
            info["nan"], info["inf"] = nan, inf
        tensors[name] = info
    return arrays, tensors


# --------------------------------------------------------------------------- the child


def worker_main(rx: Connection, tx_fd: int, plugins: tuple[str, ...], spool: str) -> None:
    """The worker's loop (runs in the child): requests on ``rx``, framed JSON answers on ``tx_fd``."""
    from harness.core.cases import Case
    from harness.core.compat import import_chainer
    from harness.core.contexts import get_context
    from harness.core.devices import parse_device
    from harness.subjects.base import execute
    from harness.subjects.registry import get_subject, load_entry_points, load_plugin

    try:
        import_chainer()
        load_entry_points()
        for p in plugins:
            load_plugin(p)
        _write_frame(tx_fd, json.dumps({"ready": os.getpid()}).encode())
    except Exception as exc:  # noqa: BLE001 - report set-up failure, then stop
        _write_frame(tx_fd, json.dumps({"failed": f"{type(exc).__name__}: {exc}"}).encode())
        return
    cases: dict[str, Case] = {}
    while True:
        try:
            msg = rx.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if msg is None:
            return
        case_json, subject_name, device_id, context_name, seq, count = msg
        if not str(device_id).startswith("cpu"):
            _lift_memory_limit()
        case = cases.get(case_json)
        if case is None:  # the campaign's own Case.to_json: checked when the parent built the case
            case = cases[case_json] = Case.from_own_json(case_json)
        for k in range(count):  # the runs one after another, each answered as soon as it ends
            try:
                result = execute(get_subject(subject_name), case, parse_device(device_id), get_context(context_name))
            except Exception as exc:  # noqa: BLE001 - e.g. an unknown subject: still an answer
                result = RunResult(subject_name, case.id, device_id, context_name, "error",
                                   error=ErrorInfo(type(exc).__name__, str(exc), "setup"))
            path = os.path.join(spool, f"{seq + k}.bin")
            try:
                payload = _encode_answer(result, path)
            except Exception as exc:  # noqa: BLE001 - a full spool, an unwritable array: the parent says so
                head = json.dumps({"result": {}, "arrays": [],
                                   "transfer_error": f"{type(exc).__name__}: {exc}"}).encode()
                payload = [_JSON_LEN.pack(len(head)), head]
            _write_frame(tx_fd, payload)
            if result.status == "skipped":  # decided before anything ran: the runs after it would say the same
                break


def _child(argv: list[str]) -> None:
    read_fd, write_fd, plugins, spool = int(argv[0]), int(argv[1]), tuple(json.loads(argv[2])), argv[3]
    _apply_memory_limit(int(os.environ.pop(_LIMIT_ENV, "0") or 0) or None)
    worker_main(Connection(read_fd, writable=False), write_fd, plugins, spool)
    # Asked to stop (or its pipe closed): every answer is written and nothing of a run is left to finish.
    # The interpreter's own finalization (tearing down Chainer's and NumPy's modules) is time the campaign
    # would wait for at the end of each group of tasks; a zygote's worker leaves the same way.
    _leave(0)


def _leave(code: int) -> None:
    """Exit now, without the interpreter's finalization, once what the process printed is flushed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stream: nothing left to keep
            pass
    os._exit(code)


# --------------------------------------------------------------------------- the zygote


def _zygote_main(sock_fd: int) -> None:
    """The zygote (runs in its own process): import once, then fork a worker for each request."""
    import numpy  # noqa: F401

    from harness.core.compat import import_chainer

    try:
        import_chainer()
        try:
            import espnet.nets.chainer_backend.deterministic_embed_id  # noqa: F401
        except Exception:  # noqa: BLE001 - ESPnet is optional to a worker: its subjects say so themselves
            pass
        import harness.core.cases  # noqa: F401
        import harness.core.contexts  # noqa: F401
        import harness.core.devices  # noqa: F401
        import harness.judge.bitwise  # noqa: F401 - and with it judge.bits and judge.digest
        import harness.subjects.registry  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        sock = socket.socket(fileno=sock_fd)
        sock.send(json.dumps({"failed": f"{type(exc).__name__}: {exc}"}).encode())
        return
    sock = socket.socket(fileno=sock_fd)
    sock.send(json.dumps({"ready": os.getpid()}).encode())
    codes: dict[int, int] = {}

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            codes[pid] = os.waitstatus_to_exitcode(status)

    while True:
        ready, _, _ = select.select([sock], [], [], 0.5)
        reap()
        if not ready:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 4)
        except OSError:
            return
        if not data:
            return  # the parent is gone: so is the zygote (its workers see their pipes close)
        req = json.loads(data)
        if req["op"] == "fork":
            pid = lifeline.fork()
            if pid == 0:
                code = 0
                try:
                    sock.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    _apply_memory_limit(req.get("memory_limit"))
                    np.random.seed()  # a forked worker must not repeat its zygote's global random stream
                    worker_main(Connection(fds[0], writable=False), fds[1], tuple(req["plugins"]), req["spool"])
                except BaseException:  # noqa: BLE001 - never return into the zygote's loop
                    code = 1
                finally:
                    _leave(code)
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"pid": pid}).encode())
        elif req["op"] == "call":
            pid = lifeline.fork()
            if pid == 0:
                sock.close()
                _call_child(req, fds)  # never returns
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"pid": pid}).encode())
        elif req["op"] == "status":
            pid, end = int(req["pid"]), time.monotonic() + float(req.get("wait", 5.0))
            while pid not in codes and time.monotonic() < end:
                try:
                    got, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    break
                if got:
                    codes[pid] = os.waitstatus_to_exitcode(status)
                    break
                time.sleep(0.01)
            sock.send(json.dumps({"code": codes.pop(pid, None)}).encode())


def _call_child(req: dict[str, Any], fds: list[int]) -> None:
    """In a process forked by the zygote: the named call ``req`` asks for (:func:`harness.execute.calls.serve`),
    in its own session (so a timeout kills its whole group), stdout and stderr on the first two pipes passed,
    the answer on the third, then exit."""
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in (null, fds[0], fds[1]):
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.update(req["env"])
        np.random.seed()  # not the zygote's global random stream
        from harness.execute.calls import serve

        code = serve(req["function"], req["request"], fds[2])
    except BaseException:  # noqa: BLE001 - as an interpreter would: the traceback, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        _leave(code)


class Zygote:
    """A process that has imported NumPy, Chainer and ESPnet once and forks pooled workers on request.

    One per start-up environment (:func:`zygote_for`); it never runs a subject, so a forked worker starts
    from imported modules only. Requests travel on a Unix ``SOCK_SEQPACKET`` pair, the new worker's pipe
    ends passed as file descriptors; the zygote reaps its workers and reports their exit codes."""

    def __init__(self, env: Mapping[str, str], start_timeout: float = 120.0) -> None:
        """Start the zygote process; it is waited for at its first :meth:`fork` (or :meth:`wait_ready`)."""
        self.env = dict(env)
        self.lock = threading.Lock()
        self.start_timeout = start_timeout
        self.ready = False
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        quiet = os.environ.get("HARNESS_WORKER_STDERR") != "1"
        self.proc = lifeline.popen(
            [sys.executable, "-m", "harness.execute.worker", "--zygote", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if quiet else None, close_fds=True)
        theirs.close()
        self.sock = ours

    def wait_ready(self) -> None:
        """Block until the zygote has imported everything; WorkerError if it cannot."""
        with self.lock:
            if self.ready:
                return
            self.sock.settimeout(self.start_timeout)
            try:
                msg = json.loads(self.sock.recv(1 << 16) or b"{}")
            except (OSError, ValueError):
                msg = {}
            self.sock.settimeout(30.0)
            self.ready = "ready" in msg
        if not self.ready:
            self.close()
            raise WorkerError(f"the worker zygote did not start: {msg.get('failed', 'no answer')}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _ask(self, req: dict[str, Any], fds: tuple[int, ...] = ()) -> dict[str, Any]:
        with self.lock:
            data = json.dumps(req).encode()
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.send(data)
            reply = self.sock.recv(1 << 16)
        if not reply:
            raise OSError("the worker zygote closed its socket")
        return json.loads(reply)

    def fork(self, rx_fd: int, tx_fd: int, plugins: tuple[str, ...], memory_limit: int | None,
             spool: str) -> int:
        """A new worker reading requests on ``rx_fd`` and answering on ``tx_fd``; its pid."""
        self.wait_ready()
        return int(self._ask({"op": "fork", "plugins": list(plugins), "memory_limit": memory_limit,
                              "spool": spool}, (rx_fd, tx_fd))["pid"])

    def call(self, function: str, request: Mapping[str, Any], env: Mapping[str, str], cwd: str,
             fds: Sequence[int]) -> int:
        """A new process running the named call ``function(request)`` (forked: the imports are done) with
        ``env`` added and ``cwd``, its stdout, stderr and answer on the three descriptors ``fds``; its pid
        (the leader of its own session)."""
        self.wait_ready()
        return int(self._ask({"op": "call", "function": function, "request": dict(request), "env": dict(env),
                              "cwd": cwd}, tuple(fds))["pid"])

    def exit_code(self, pid: int, wait: float = 5.0) -> int | None:
        """The exit code of worker ``pid`` (negative: the signal), waiting up to ``wait`` s; None if unknown."""
        try:
            code = self._ask({"op": "status", "pid": pid, "wait": wait})["code"]
        except (OSError, ValueError, KeyError):
            return None
        return None if code is None else int(code)

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            if self.proc.poll() is None:
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)


_ZYGOTES: dict[tuple[tuple[str, str], ...], Zygote] = {}
#: The most zygotes one process keeps (least recently used closed first): one per start-up environment of a
#: campaign is three on the CPU (default, omp1, hashseed), four with the GPU's cublas_ws.
_MAX_ZYGOTES = 4
#: Variables that change while a process runs without changing what a worker is (pytest sets this one).
_VOLATILE_ENV = frozenset({"PYTEST_CURRENT_TEST"})
_ZYGOTE_LOCK = threading.Lock()


def worker_env(overrides: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The environment a worker of these overrides starts with: the worker defaults
    (:data:`~harness.core.worker_defaults.WORKER_ENV_DEFAULTS`) under this process's environment, under the
    overrides; the harness's checkout first on PYTHONPATH."""
    from harness.core.worker_defaults import WORKER_ENV_DEFAULTS

    env = {**WORKER_ENV_DEFAULTS, **os.environ, **dict(overrides)}
    env.pop(_LIMIT_ENV, None)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def zygote_for(env: Mapping[str, str], wait: bool = True) -> Zygote | None:
    """The zygote of this full environment (started on first use, kept for the process's life), ready unless
    ``wait`` is False; None where workers cannot be forked here (no ``os.pidfd_open``, ``HARNESS_ZYGOTE=0``,
    or the zygote failed to start: workers are spawned then)."""
    if not hasattr(os, "pidfd_open") or not hasattr(socket, "send_fds") or os.environ.get("HARNESS_ZYGOTE") == "0":
        return None
    key = tuple(sorted((k, v) for k, v in env.items() if k not in _VOLATILE_ENV))
    old: list[Zygote] = []
    with _ZYGOTE_LOCK:
        z = _ZYGOTES.pop(key, None)
        if z is None or not z.alive:
            if z is not None:
                old.append(z)
            try:
                z = Zygote(env)
            except OSError:
                return None
        _ZYGOTES[key] = z  # the most recently used last
        while len(_ZYGOTES) > _MAX_ZYGOTES:  # each holds Chainer's imports in memory: keep a few
            old.append(_ZYGOTES.pop(next(iter(_ZYGOTES))))
    for gone in old:
        gone.close()
    if wait:
        try:
            z.wait_ready()
        except WorkerError:
            with _ZYGOTE_LOCK:
                if _ZYGOTES.get(key) is z:
                    del _ZYGOTES[key]
            return None
    return z


def prestart_zygote(overrides: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
    """Start the zygote of a worker environment without waiting for it (it imports while the caller works)."""
    zygote_for(worker_env(overrides), wait=False)


def close_zygotes() -> None:
    """Stop every zygote this process started (at exit, or where a caller wants the processes gone)."""
    with _ZYGOTE_LOCK:
        zs = list(_ZYGOTES.values())
        _ZYGOTES.clear()
    for z in zs:
        z.close()


atexit.register(close_zygotes)


class _Forked:
    """The parts of ``subprocess.Popen`` a :class:`Worker` uses, for a process forked by a zygote."""

    def __init__(self, pid: int, zygote: Zygote) -> None:
        self.pid, self.zygote = pid, zygote
        self.pidfd = os.pidfd_open(pid)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self.pidfd], [], [], 0)[0]:
            self.returncode = self.zygote.exit_code(self.pid)
            if self.returncode is None:
                self.returncode = -signal.SIGKILL  # gone, its status lost with its zygote
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self.pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            self.poll()
        return int(self.returncode)  # type: ignore[arg-type]

    def kill(self) -> None:
        if self.returncode is None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __del__(self) -> None:
        try:
            os.close(self.pidfd)
        except (OSError, AttributeError):
            pass


# --------------------------------------------------------------------------- the parent's handle


_SPOOL_PREFIX = "harness-spool-"
_pid_alive = lifeline.pid_alive
_swept: set[str] = set()


def _spool_base() -> str:
    """``/dev/shm`` where it exists with at least 1 GiB free (arrays then never touch a disk), else the temp dir.

    The first call in a process removes the spool folders of harness processes that no longer exist (one
    killed with SIGKILL cannot clean up after itself; each folder's name carries its owner's pid)."""
    base = tempfile.gettempdir()
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= (1 << 30) and os.access("/dev/shm", os.W_OK):
            base = "/dev/shm"
    except OSError:
        pass
    if base not in _swept:
        _swept.add(base)
        lifeline.sweep(base, _SPOOL_PREFIX)
    return base


class Worker:
    """One worker process (spawned, or forked from a :class:`Zygote`) with its environment overrides."""

    def __init__(self, env: Mapping[str, str] | None = None, plugins: tuple[str, ...] = (),
                 label: str = "pool", start_timeout: float = 120.0,
                 memory_limit: int | None | str = "default", fork: bool = False) -> None:
        """``memory_limit``: bytes of address space for the worker (``RLIMIT_AS``), None for no limit,
        ``"default"`` for :func:`default_memory_limit` (``$HARNESS_WORKER_MEMORY``, else half the RAM).
        ``fork``: fork the worker from this environment's zygote (a pooled worker) rather than spawn a
        brand-new interpreter (what a fresh-process run needs)."""
        self.env = dict(env or {})
        if memory_limit == "default":
            memory_limit = default_memory_limit()
        if memory_limit is not None and (not isinstance(memory_limit, int) or isinstance(memory_limit, bool)
                                         or memory_limit <= 0):
            from harness.core.errors import InvalidArgument

            raise InvalidArgument(f"memory_limit={memory_limit!r} must be a positive int (bytes) or None")
        self.memory_limit: int | None = memory_limit
        self.output_limit = output_limit()  # (a bad $HARNESS_MAX_OUTPUT_BYTES: one line, before the worker starts)
        self.plugins = tuple(plugins)
        self.label = label
        self.start_timeout = start_timeout
        self.fork = fork
        self.forked = False
        self.proc: Any = None
        self._rx_fd: int | None = None
        self._send: Any = None
        self.pid: int | None = None
        self.started_at = 0.0
        self.startup_seconds = 0.0
        self.spool: str | None = None
        self._seq = 0

    def start(self) -> "Worker":
        """Start the worker (fork it from the zygote, or spawn ``python -m harness.execute.worker``); returns
        without waiting for it to be ready. Requests and answers travel on two private pipes, so anything a
        subject prints cannot corrupt them."""
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        self.spool = tempfile.mkdtemp(prefix=lifeline.owned_prefix(_SPOOL_PREFIX), dir=_spool_base())
        self.started_at = time.perf_counter()
        env = worker_env(self.env)
        zygote = zygote_for(env) if self.fork else None
        self.proc = None
        if zygote is not None:
            try:
                pid = zygote.fork(req_r, resp_w, self.plugins, self.memory_limit, self.spool)
                self.proc = _Forked(pid, zygote)
                self.forked = True
            except (OSError, ValueError, KeyError, WorkerError):
                self.proc = None
        if self.proc is None:
            if self.memory_limit is not None:
                env[_LIMIT_ENV] = str(self.memory_limit)
            quiet = os.environ.get("HARNESS_WORKER_STDERR") != "1"
            self.proc = lifeline.popen(
                [sys.executable, "-m", "harness.execute.worker", str(req_r), str(resp_w),
                 json.dumps(list(self.plugins)), self.spool],
                pass_fds=(req_r, resp_w), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL if quiet else None, close_fds=True)
            self.forked = False
        os.close(req_r)
        os.close(resp_w)
        self._send = Connection(req_w, readable=False)
        self._rx_fd = resp_r
        self.pid = None
        return self

    def wait_ready(self) -> None:
        """Block until the worker has imported Chainer and its plug-ins."""
        if self.pid is not None:
            return
        try:
            msg = json.loads(_read_frame(self._rx_fd, time.monotonic() + self.start_timeout))
        except _NoAnswer:
            self.kill()
            raise WorkerError(f"worker {self.label} did not start within {self.start_timeout:.0f} s") from None
        except EOFError:
            try:
                code = self.proc.wait(5)
            except subprocess.TimeoutExpired:
                code = None
            self.kill()
            raise WorkerError(f"worker {self.label} died while starting (exit code {code})") from None
        except (_Malformed, ValueError, RecursionError) as exc:
            self.kill()
            raise WorkerError(f"worker {self.label} answered garbage while starting: {exc}") from None
        if not isinstance(msg, dict) or type(msg.get("ready")) is not int:
            self.kill()
            failed = msg.get("failed") if isinstance(msg, dict) else None
            raise WorkerError(f"worker {self.label} failed to start: {str(failed)[:300]}")
        self.pid = int(msg["ready"])
        self.startup_seconds = time.perf_counter() - self.started_at

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def run(self, case_json: str, subject: str, device: str, context: str, timeout: float,
            case_id: str = "") -> RunResult:
        """One run; a death, a timeout or a malformed answer becomes a ``crashed`` / ``timeout`` result (the
        worker is gone then). ``case_id`` labels those results; the caller knows it, so the JSON is not
        parsed again here."""
        return self.run_answer(case_json, subject, device, context, timeout, case_id).result

    def run_answer(self, case_json: str, subject: str, device: str, context: str, timeout: float,
                   case_id: str = "") -> Answer:
        """:meth:`run`, with what the worker measured of each array (digest, NaN/Inf counts)."""
        return next(self.run_answers(case_json, subject, device, context, timeout, 1, case_id))

    def run_answers(self, case_json: str, subject: str, device: str, context: str, timeout: float,
                    count: int, case_id: str = "") -> Iterator[Answer]:
        """``count`` runs asked for at once: the worker runs them one after another and answers each as it
        ends, so it never waits on this process between them. Each answer is due ``timeout`` seconds after
        this process starts waiting for it. The answers stop early after the first ``skipped`` one (the
        worker stops there too) and after one that ends the worker (``crashed``, ``timeout``): the caller asks
        a new worker for the rest."""
        self.wait_ready()
        if not case_id:
            from harness.core.cases import Case

            case_id = Case.from_json(case_json).id
        base = dict(subject=subject, case_id=case_id, device=device, context=context)
        first = self._seq + 1
        self._seq += count
        try:
            self._send.send((case_json, subject, device, context, first, count))
        except (BrokenPipeError, OSError):
            yield Answer(self._dead(base, "setup"), {})
            return
        for seq in range(first, first + count):
            path = os.path.join(self.spool or "", f"{seq}.bin")
            spooled = True  # until the answer says it came whole in the frame: a file may be there
            try:
                payload = _read_frame(self._rx_fd, time.monotonic() + timeout)
                answer = _decode_answer(payload, base, path, self.output_limit)
                spooled = answer.spooled
            except _NoAnswer:
                self.kill()
                yield Answer(RunResult(**base, status="timeout", error=ErrorInfo(
                    "Timeout", f"no answer within {timeout:g} s; worker killed", "run")), {})
                return
            except (EOFError, OSError):
                yield Answer(self._dead(base, "run"), {})
                return
            except _Malformed as exc:
                self.kill()
                yield Answer(RunResult(**base, status="crashed", error=ErrorInfo(
                    "MalformedAnswer", f"{exc}; worker killed", "transfer")), {})
                return
            finally:
                if spooled:  # (most answers come whole in the frame: no file, and no system call for one)
                    try:
                        os.unlink(path)  # mapped already where it exists: the mapping outlives the name
                    except OSError:
                        pass
            try:
                yield answer
            except GeneratorExit:
                if seq < first + count - 1 and answer.result.status != "skipped":
                    self.kill()  # answers still on their way would be read as the next request's: no worker
                raise
            if answer.result.status == "skipped":
                return

    def _dead(self, base: dict[str, str], phase: str) -> RunResult:
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        if code is not None and code < 0:
            try:
                what = signal.Signals(-code).name
            except ValueError:
                what = f"signal {-code}"
            msg = f"worker died with {what}"
        else:
            msg = f"worker exited with code {code}"
        return RunResult(**base, status="crashed", error=ErrorInfo("WorkerCrash", msg, phase))

    def kill(self) -> None:
        """Stop the process now."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self._send is not None and not self._send.closed:
            self._send.close()
        if self._rx_fd is not None:
            os.close(self._rx_fd)
            self._rx_fd = None
        if self.spool is not None:
            shutil.rmtree(self.spool, ignore_errors=True)
            self.spool = None
        self.pid = None

    def request_stop(self) -> None:
        """Ask the worker to exit, without waiting."""
        if self.proc is not None and self.proc.poll() is None and self._send is not None:
            try:
                self._send.send(None)
            except (BrokenPipeError, OSError):
                pass

    def close(self) -> None:
        """Ask the worker to exit, then make sure it has."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self._send.send(None)
                self.proc.wait(5)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


if __name__ == "__main__":
    lifeline.adopt()  # dies with the process that started it
    if sys.argv[1:2] == ["--zygote"]:
        _zygote_main(int(sys.argv[2]))
    else:
        _child(sys.argv[1:])
