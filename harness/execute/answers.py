"""The answer's wire format: how a worker hands a run's result and arrays to the parent, and how the parent
reads them back without trusting a byte of it.

Answers never travel as pickles: the worker sends a length-framed answer, JSON naming each array's dtype,
shape, offset, digest and NaN/Inf counts, followed by the arrays' raw bytes when they add up to at most 1 MiB
(read straight into the buffer the arrays then view). Bigger arrays go into one file of a spool directory
(on ``/dev/shm`` where it has room, so no disk is touched) that the parent maps copy-on-write and unlinks:
they cross from the worker to the campaign without being pickled, piped or copied. The digests are taken in
the worker (:func:`tensor_meta`), so the campaign never hashes an array again. Anything else in the answer
pipe (garbage, a truncated frame, JSON that is not an answer) raises :class:`Malformed`, which the parent
makes a ``crashed`` row with a ``MalformedAnswer`` error, never an exception in the harness: nothing a
subject writes is unpickled here.

Apart from the processes that send and read it (:mod:`harness.execute.worker_loop`,
:mod:`harness.execute.worker`): both sides import this module, and it imports neither.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import select
import struct
import time
from typing import Any, Mapping

import numpy as np

from harness.execute.memory_limits import OUTPUT_ENV
from harness.judge.ulp import dtype_name as _dtype_name
from harness.subjects.base import ErrorInfo, RunKeys, RunResult

__all__ = ["MAX_ANSWER_BYTES", "Answer", "Malformed", "NoAnswer", "tensor_meta", "write_frame", "read_frame",
           "encode_answer", "transfer_error", "decode_answer", "widen_pipe"]

#: The largest answer frame (JSON, arrays excluded) the parent reads; a longer one is malformed.
MAX_ANSWER_BYTES = 64 << 20
_MAGIC = b"HRNW"
_FRAME = struct.Struct("<4sQ")
_STATUSES = ("ok", "error", "skipped")
_ALIGN = 64


# --------------------------------------------------------------------------- framing


def write_frame(fd: int, payload: bytes | list[bytes | memoryview]) -> None:
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


def widen_pipe(fd: int) -> None:
    """Make the answer pipe ``fd`` hold a whole inline frame where the system lets it (Linux's
    ``F_SETPIPE_SZ``, up to ``/proc/sys/fs/pipe-max-size``): the worker then writes an answer in one go and
    starts its next run while the parent reads, instead of waiting for the parent to drain 64 KiB at a time.
    Elsewhere, or refused, the pipe keeps its size: only the waiting differs."""
    import fcntl

    op = getattr(fcntl, "F_SETPIPE_SZ", None)
    if op is None:
        return
    for size in (_INLINE_BYTES + (1 << 17), _INLINE_BYTES):
        try:
            fcntl.fcntl(fd, op, size)
            return
        except OSError:
            continue


class Malformed(Exception):
    """The answer pipe held something that is not an answer."""


class NoAnswer(Exception):
    """No (complete) answer within the deadline."""


def _read_exact(fd: int, n: int, deadline: float) -> bytearray:
    """``n`` bytes from ``fd`` by ``deadline`` (time.monotonic), read straight into one buffer; EOFError at end
    of file, NoAnswer at the deadline."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        wait = deadline - time.monotonic()
        if wait <= 0:
            raise NoAnswer()
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            raise NoAnswer()
        k = os.readv(fd, [view[got:]])
        if not k:
            raise EOFError()
        got += k
    return buf


def read_frame(fd: int, deadline: float) -> bytearray:
    head = _read_exact(fd, _FRAME.size, deadline)
    magic, length = _FRAME.unpack(head)
    if magic != _MAGIC:
        raise Malformed(f"the answer pipe held {head[:16]!r}, not a worker answer")
    if length > MAX_ANSWER_BYTES:
        raise Malformed(f"an answer of {length} bytes announced (the most is {MAX_ANSWER_BYTES})")
    try:
        return _read_exact(fd, length, deadline)
    except EOFError:
        raise Malformed(f"the answer was cut short (announced {length} bytes)") from None


# --------------------------------------------------------------------------- the answer


class Answer:
    """A run's result and, per array, what the worker measured of it (``dtype`` name, ``shape``, ``digest``,
    and for floats ``nan``/``inf``): the campaign's run record takes it as it is."""

    __slots__ = ("result", "tensors", "spooled", "sent_ok", "timing")

    def __init__(self, result: RunResult, tensors: dict[str, dict[str, Any]], spooled: bool = False,
                 sent_ok: bool | None = None, timing: Any = None) -> None:
        self.result = result
        #: what the run got of the machine where a limit ended it (a :class:`~harness.execute.run_clock.RunTime`)
        self.timing = timing
        self.tensors = tensors
        #: whether its arrays came through a spool file (which the reader then unlinks)
        self.spooled = spooled
        #: whether the worker answered ``ok`` (the result may say otherwise: outputs over the parent's limit);
        #: the worker compares its next run of the request with this one (a ``"repeat"``)
        self.sent_ok = result.ok if sent_ok is None else sent_ok


def tensor_meta(arrays: Mapping[str, np.ndarray],
                previous: Mapping[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Digest, dtype, shape and NaN/Inf counts of each array (in the worker, where the arrays are).
    ``previous``: another answer's meta; where every array has the name, dtype, shape and digest it gives
    (the same bits, so the same counts), that very object is returned, nothing counted again."""
    from harness.judge.digest import digest_all
    from harness.judge.ulp import nonfinite_counts_all

    names = list(arrays)
    arrs = [arrays[k] for k in names]
    digests = digest_all(arrs)
    if previous is not None and _same_bits(names, arrs, digests, previous):
        return previous  # type: ignore[return-value]
    counts = nonfinite_counts_all(arrs)
    out = {}
    for k, a, d, c in zip(names, arrs, digests, counts):
        info: dict[str, Any] = {"dtype": _dtype_name(a.dtype), "shape": list(a.shape), "digest": d}
        if a.dtype.kind == "f":
            info["nan"], info["inf"] = c
        out[k] = info
    return out


def _same_bits(names: list[str], arrs: list[np.ndarray], digests: tuple[str, ...],
               previous: Mapping[str, dict[str, Any]]) -> bool:
    """Whether these arrays are, name for name, those ``previous`` describes: dtype, shape and digest."""
    if list(previous) != names:
        return False
    for k, a, d in zip(names, arrs, digests):
        p = previous[k]
        if p.get("digest") != d or p.get("dtype") != _dtype_name(a.dtype) or p.get("shape") != list(a.shape):
            return False
    return True


#: Answers whose arrays add up to at most this many bytes carry them in the frame itself (read straight into
#: the buffer the arrays then view); bigger ones go through a spool file (mapped, never read or piped). Below
#: it, creating, mapping and unlinking a file costs more than the bytes: measured on the bench's overhead
#: section, where most answers are a few KiB.
_INLINE_BYTES = 1 << 20
_JSON_LEN = struct.Struct("<I")


def encode_answer(result: RunResult, path: str,
                  previous: dict[str, dict[str, Any]] | None = None) -> tuple[list[bytes | memoryview],
                                                                        dict[str, dict[str, Any]] | None]:
    """The worker's answer frame, in pieces: JSON meta, then (small answers) the arrays themselves, aligned;
    bigger answers write their arrays into ``path`` instead. ``previous``: the meta of the last ``ok`` answer
    of this request; where this run's arrays are bit for bit those (the digests agree), the frame says so
    (``"repeat"``) and carries no arrays: the parent holds them already (:func:`decode_answer`). Also returns
    this answer's meta when it is ``ok`` (the next run's ``previous``), else None."""
    arrays = {k: np.ascontiguousarray(v) for k, v in result.arrays.items()}
    tensors = tensor_meta(arrays, previous if result.status == "ok" else None)
    if previous is not None and tensors is previous:
        head = json.dumps({"result": result.meta(), "arrays": [], "inline": True, "repeat": True}).encode()
        return [_JSON_LEN.pack(len(head)), head], tensors
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
            pieces.append(a.reshape(-1).view(np.uint8).data)  # (the array's own buffer, typed as a memoryview)
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
    return [_JSON_LEN.pack(len(head)), head, *pieces], (tensors if result.status == "ok" else None)


def transfer_error(exc: BaseException) -> list[bytes | memoryview]:
    """The answer frame, in pieces, of a run whose arrays could not be handed over (a full spool, an
    unwritable array): the parent reads it as :class:`Malformed`, naming ``exc``."""
    head = json.dumps({"result": {}, "arrays": [], "transfer_error": f"{type(exc).__name__}: {exc}"}).encode()
    return [_JSON_LEN.pack(len(head)), head]


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise Malformed(what)


def decode_answer(payload: bytearray, base: RunKeys, path: str, limit: int | None = None,
                  previous: Answer | None = None) -> Answer:
    """The answer in ``payload`` (its arrays viewed in it, or mapped from ``path``); :class:`Malformed` for
    anything else, whatever it held: the worker's fault is a row, never the campaign's end. ``previous``: the
    last ``ok`` answer of this request, whose arrays a ``"repeat"`` answer says it holds bit for bit (an
    ``ok`` answer the worker found to have the same digests); a repeat with no such answer is malformed."""
    try:
        return _decode(payload, base, path, limit, previous)
    except Malformed:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError, MemoryError) as exc:
        raise Malformed(f"{type(exc).__name__}: {str(exc)[:200]}") from None


def _decode(payload: bytearray, base: RunKeys, path: str, limit: int | None = None,
            previous: Answer | None = None) -> Answer:
    _check(len(payload) >= _JSON_LEN.size, "the answer is empty")
    (n,) = _JSON_LEN.unpack_from(payload)
    _check(_JSON_LEN.size + n <= len(payload), "the answer's meta runs past its end")
    try:
        msg = json.loads(bytes(memoryview(payload)[_JSON_LEN.size:_JSON_LEN.size + n]))
    except (ValueError, RecursionError) as exc:
        raise Malformed(f"the answer is not JSON ({type(exc).__name__}: {str(exc)[:120]})") from None
    _check(isinstance(msg, dict) and isinstance(msg.get("result"), dict) and isinstance(msg.get("arrays"), list),
           "the answer has no result and arrays")
    if "transfer_error" in msg:
        raise Malformed(f"the worker could not hand its arrays over: {str(msg['transfer_error'])[:300]}")
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
    if msg.get("repeat") is not None:
        _check(msg["repeat"] is True and status == "ok" and not layout, "a repeat answer that is not a plain ok")
        _check(previous is not None and previous.sent_ok, "a repeat answer with no earlier ok answer")
        assert previous is not None
        seconds = {k: float(v) for k, v in timings.items()}
        if not previous.result.ok:  # the same outputs as one refused here (too large): refused the same way
            return Answer(RunResult(**base, status=previous.result.status, error=previous.result.error,
                                    timings=seconds), {}, False, sent_ok=True)
        result = RunResult(**base, status=status, arrays=dict(previous.result.arrays), declared_warnings=tuple(warns),
                           error=error, skip_reason=skip, timings=seconds)
        return Answer(result, previous.tensors, False)
    spooled = bool(layout) and msg.get("inline") is not True
    total = sum(t.get("nbytes", 0) for t in layout if type(t) is dict and type(t.get("nbytes")) is int)
    if limit is not None and total > limit:  # a row of its own, before anything of it is mapped or measured
        return Answer(RunResult(**base, status="error", error=ErrorInfo(
            "OutputTooLarge", f"the run's outputs hold {total:,} bytes, more than the {limit:,} the harness takes "
            f"from one run ({OUTPUT_ENV})", "transfer")), {}, spooled, sent_ok=status == "ok")
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
        raise Malformed(f"the answer names arrays but its spool file is missing ({exc.strerror})") from None
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
            raise Malformed("an array entry without a (unique) name")
        dtype = t.get("dtype")
        dt = _DTYPES.get(dtype) if type(dtype) is str else None
        if dt is None:
            raise Malformed(f"array {name[:60]!r}: dtype {str(dtype)[:40]!r} is not a dtype of numbers")
        shape, offset, nbytes, digest = t.get("shape"), t.get("offset"), t.get("nbytes"), t.get("digest")
        if not (type(shape) is list and len(shape) <= 32 and type(offset) is int and type(nbytes) is int
                and 0 <= offset and 0 <= nbytes and offset + nbytes <= size):
            raise Malformed(f"array {name[:60]!r}: a bad shape or place")
        count = 1
        for n in shape:
            if type(n) is not int or n < 0:
                raise Malformed(f"array {name[:60]!r}: a bad shape or place")
            count *= n
        if count * dt.itemsize != nbytes:
            raise Malformed(f"array {name[:60]!r}: {nbytes} bytes for {shape} of {dt}")
        if not (type(digest) is str and len(digest) < 200):
            raise Malformed(f"array {name[:60]!r}: no digest")
        arrays[name] = np.ndarray(shape, dt, buf, offset) if count else np.empty(shape, dt)
        info: dict[str, Any] = {"dtype": _dtype_name(dt), "shape": shape, "digest": digest}
        if dt.kind == "f":
            nan, inf = t.get("nan"), t.get("inf")
            if not (type(nan) is int and type(inf) is int and 0 <= nan <= count and 0 <= inf <= count):
                raise Malformed(f"array {name[:60]!r}: bad NaN/Inf counts")
            info["nan"], info["inf"] = nan, inf
        tensors[name] = info
    return arrays, tensors

