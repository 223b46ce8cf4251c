"""The typed records every stage after the campaign reads: :class:`TaskRecord` and :class:`Measure`.

A campaign writes one :class:`TaskRecord` per task to ``tasks.jsonl`` as it finishes, and, once the runs are
done, one :class:`Measure` per judged comparison to ``measures.jsonl``. Tables, the gate, audits, ``replay``
and the pytest suites read these records; none of them recomputes a measure. Both are frozen dataclasses with
a JSON round trip (``to_dict`` / ``from_dict``); ``from_dict`` refuses a malformed line with a one-line
:class:`~harness.core.errors.RecordError` naming the field.
"""

from __future__ import annotations

import collections.abc as _abc
import json
import math
import os
import re
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Iterator, Mapping

from harness.core.classification import VERDICT_ORDER, VERDICTS, Verdict
from harness.core.errors import RecordError
from harness.core.record_files import raw_lines, record_file

#: Exact types :func:`_plain` hands back as they are, looked up before any ``isinstance`` (a task record's
#: sketches hold tens of thousands of them per campaign; an ``isinstance`` against ``Mapping`` costs an ABC check).
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """JSON-ready data: mappings become dicts, tuples and lists become lists, scalars stay as they are.
    (``dataclasses.asdict`` does the same through ``copy.deepcopy`` of every scalar: measured at a third of
    the measure pass on the default report.)"""
    t = type(value)
    if t in _SCALAR_TYPES:
        return value
    if t is list or t is tuple:
        return [v if type(v) in _SCALAR_TYPES else _plain(v) for v in value]
    if t is dict:
        return {k: v if type(v) in _SCALAR_TYPES else _plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)):  # subclasses (an IntEnum, a numpy-free str subclass)
        return value
    if isinstance(value, _abc.Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _fields_of(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as a plain dict (see :func:`_plain`)."""
    names = _FIELD_NAMES.get(type(obj))
    if names is None:
        names = _FIELD_NAMES[type(obj)] = tuple(f.name for f in fields(obj))
    return {n: _plain(getattr(obj, n)) for n in names}


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}

__all__ = ["Verdict", "TensorComparison", "TaskRecord", "Measure", "MEASURE_KINDS", "VERDICTS", "VERDICT_ORDER",
           "read_records", "repair_jsonl", "read_tasks", "read_measures", "jsonl_line", "write_jsonl",
           "run_lines", "read_runs", "device_kind_of"]

#: What a measure compares: repetitions in one process, fresh processes, another context, another device,
#: the float64 oracle, a stored baseline, a related case (invariance), a reference summed in the order the subject
#: declares (``order``), or nothing (a task that ran no tensor).
MEASURE_KINDS = ("repeat", "process", "context", "device", "oracle", "baseline", "relation", "order", "task",
                 "trajectory")

#: The verdicts of a check that did not run: a :class:`Measure` with one of them says why (its ``detail``).
_NEEDS_REASON = frozenset({"skipped", "not judged"})


def device_kind_of(device: str) -> str:
    """The kind (``cpu``/``gpu``) of a device id, as :class:`~harness.core.devices.Device` says it."""
    from harness.core.devices import parse_device

    return parse_device(device).kind


def _need(d: Mapping[str, Any], name: str, types: type | tuple[type, ...], where: str) -> Any:
    if name not in d:
        raise RecordError(f"{where}: field {name!r} is missing")
    v = d[name]
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in (types if isinstance(types, tuple)
                                                                          else (types,))):
        raise RecordError(f"{where}: field {name!r}={v!r:.60} is not {getattr(types, '__name__', types)}")
    return v


@dataclass(frozen=True)
class TensorComparison:
    """How the repetitions of one tensor compared, bit for bit, every repetition against repetition 0: what
    :mod:`harness.judge.comparator` measures (once, in the runner) and what a task record keeps of each tensor.

    Attributes:
        name: the item path, dotted (``"grads.W"``, ``"ys.0"``).
        dtype, shape: of repetition 0 (of the first present repetition if rep 0 is missing).
        repeats: how many repetitions were compared.
        bitwise_identical: every repetition has repetition 0's dtype, shape and bits.
        n_diff: elements whose bits differ between any repetition and repetition 0.
        n_total: elements per repetition; frac_diff = n_diff / n_total (0.0 when empty).
        max_ulp: the greatest ULP distance of any repetition from repetition 0; ``ULP_MAX`` of
            :mod:`harness.judge.ulp` for NaN vs non-NaN, a shape/dtype mismatch or a dtype with no ULP.
        max_ulp_index: the first (C order) differing element attaining ``max_ulp``.
        first_diff_index: the first (C order) differing element.
        digests: the digest of each repetition (``"missing"`` where it had no array); a stored record keeps
            repetition 0's only (:attr:`digest`).
        n_unique: how many distinct digests.
        nan_count, inf_count: in repetition 0.
        shape_mismatch: some repetition differs in shape or dtype or is missing; then ``n_diff == n_total``,
            ``frac_diff == 1.0``, ``max_ulp == ULP_MAX``, indices None.
        signatures: ``"float32(3, 4)"`` per repetition (``"missing"`` where absent); not stored.
        diff_reps: the repetitions whose digest differs from repetition 0's; not stored.
        kind: ``dtype.kind`` of repetition 0 (``"f"``, ``"i"``, ``"U"``...), for messages; not stored.
        worst_values: repetition 0's value and the first differing repetition's at the greatest ULP distance
            (hex bits too), where the runner recorded them.
        sketch: repetition 0's sketch (:func:`harness.judge.sketch.tensor_sketch`): norms, NaN/inf counts,
            sampled bits.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    repeats: int
    bitwise_identical: bool
    n_diff: int
    n_total: int
    frac_diff: float
    max_ulp: int
    max_ulp_index: tuple[int, ...] | None
    first_diff_index: tuple[int, ...] | None
    digests: tuple[str, ...]
    n_unique: int
    nan_count: int
    inf_count: int
    shape_mismatch: bool
    signatures: tuple[str, ...] = ()
    diff_reps: tuple[int, ...] = ()
    kind: str = ""
    worst_values: tuple[str, str] | None = None
    sketch: Mapping[str, Any] | None = None

    @property
    def digest(self) -> str | None:
        """Repetition 0's digest (None where none was taken)."""
        return self.digests[0] if self.digests else None

    def to_dict(self) -> dict[str, Any]:
        """The stored form (a ``tasks.jsonl`` tensor): :data:`_STORED`, repetition 0's digest as ``digest``;
        tuples (shape, indices, worst_values) become lists."""
        return {k: _plain(self.digest if k == "digest" else getattr(self, k)) for k in _STORED}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "tensor", name: str = "") -> "TensorComparison":
        """A stored comparison (of tensor ``name``); a malformed one is a one-line :class:`RecordError`."""
        if not isinstance(d, Mapping):
            raise RecordError(f"{where}: not an object")
        kw: dict[str, Any] = {k: d.get(k) for k in _STORED if k != "digest"}
        try:
            kw["shape"] = tuple(int(n) for n in (kw["shape"] or ()))
            for k in ("max_ulp_index", "first_diff_index"):
                kw[k] = None if kw[k] is None else tuple(int(n) for n in kw[k])
            for k in ("repeats", "n_diff", "n_total", "max_ulp", "n_unique", "nan_count", "inf_count"):
                kw[k] = int(kw[k] or 0)
            kw["frac_diff"] = float(kw["frac_diff"] or 0.0)
            kw["bitwise_identical"] = bool(kw["bitwise_identical"])
            kw["shape_mismatch"] = bool(kw["shape_mismatch"])
            kw["dtype"] = str(kw["dtype"] or "")
            if kw["worst_values"] is not None:
                kw["worst_values"] = tuple(str(v) for v in kw["worst_values"])
            if kw["sketch"] is not None and not isinstance(kw["sketch"], Mapping):
                raise TypeError(f"sketch must be an object, got {type(kw['sketch']).__name__}")
        except (TypeError, ValueError) as exc:
            raise RecordError(f"{where}: {exc}") from None
        digest = d.get("digest")
        return cls(name=name, digests=() if digest is None else (str(digest),), **kw)


#: What a task record keeps of each tensor's comparison, in the order ``tasks.jsonl`` holds it.
_STORED = ("dtype", "shape", "repeats", "bitwise_identical", "n_diff", "n_total", "frac_diff", "max_ulp",
           "max_ulp_index", "first_diff_index", "n_unique", "digest", "nan_count", "inf_count", "shape_mismatch",
           "worst_values", "sketch")


@dataclass(frozen=True)
class TaskRecord:
    """One finished task: case x subject x device x context, its runs and how its repetitions compared."""

    key: str
    case_id: str
    family: str
    subject: str
    device: str
    context: str
    status: str  # ok | partial | error | skipped
    runs: int = 0
    ok_runs: int = 0
    bad_input: bool = False
    statuses: Mapping[str, int] = field(default_factory=dict)
    skip_reason: str | None = None
    errors: tuple[Mapping[str, Any], ...] = ()
    declared_warnings: tuple[str, ...] = ()
    subject_seconds: float = 0.0
    processes: tuple[str, ...] = ()
    tensors: Mapping[str, TensorComparison] = field(default_factory=dict)
    array_file: str | None = None
    rep_processes: tuple[str, ...] = ()
    rep_digests: Mapping[str, tuple[str | None, ...]] = field(default_factory=dict)
    #: Where it ran, for cluster campaigns (host name, GPU id or UUID); empty on the local pool.
    host: str = ""
    attempts: int = 1
    dask_worker: str = ""
    #: The physical GPU it ran on (nvidia-smi's index, name, UUID; cluster campaigns), None elsewhere.
    gpu: Mapping[str, Any] | None = None
    #: Infrastructure notes: a run that timed out beside others and answered alone (never a finding); the
    #: report's page lists them, and a resumed run keeps them with the task.
    notes: tuple[str, ...] = ()

    @property
    def device_kind(self) -> str:
        return device_kind_of(self.device)

    @property
    def first_error(self) -> Mapping[str, Any] | None:
        return self.errors[0] if self.errors else None

    @property
    def run_status(self) -> str:
        """The status that says what happened to the runs: crashed/timeout win over a plain error."""
        for s in ("crashed", "timeout"):
            if self.statuses.get(s):
                return s
        return self.status

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["tensors"] = {k: v.to_dict() for k, v in self.tensors.items()}
        d["errors"] = [dict(e) for e in self.errors]
        for k in ("declared_warnings", "processes", "rep_processes", "notes"):
            d[k] = list(d[k])
        d["rep_digests"] = {k: list(v) for k, v in self.rep_digests.items()}
        d["statuses"] = dict(self.statuses)
        d["gpu"] = None if self.gpu is None else dict(self.gpu)
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "task record") -> "TaskRecord":
        """Parse one ``tasks.jsonl`` object; a malformed one is a one-line :class:`RecordError`."""
        if not isinstance(d, Mapping):
            raise RecordError(f"{where}: not a JSON object")
        kw: dict[str, Any] = {}
        for name in ("key", "case_id", "subject", "device", "context", "status"):
            kw[name] = _need(d, name, str, where)
        kw["family"] = str(d.get("family", ""))
        try:
            kw["runs"] = int(d.get("runs", 0))
            kw["ok_runs"] = int(d.get("ok_runs", 0))
            kw["bad_input"] = bool(d.get("bad_input", False))
            kw["statuses"] = {str(k): int(v) for k, v in dict(d.get("statuses") or {}).items()}
            kw["skip_reason"] = d.get("skip_reason")
            kw["errors"] = tuple(dict(e) for e in (d.get("errors") or ()))
            kw["declared_warnings"] = tuple(str(w) for w in (d.get("declared_warnings") or ()))
            kw["subject_seconds"] = float(d.get("subject_seconds", 0.0))
            kw["processes"] = tuple(str(p) for p in (d.get("processes") or ()))
            kw["tensors"] = {str(k): TensorComparison.from_dict(v, f"{where}: tensor {k!r}", str(k))
                             for k, v in dict(d.get("tensors") or {}).items()}
            kw["array_file"] = d.get("array_file")
            kw["rep_processes"] = tuple(str(p) for p in (d.get("rep_processes") or ()))
            kw["rep_digests"] = {str(k): tuple(v) for k, v in dict(d.get("rep_digests") or {}).items()}
            kw["host"] = str(d.get("host", ""))
            kw["attempts"] = int(d.get("attempts", 1))
            kw["dask_worker"] = str(d.get("dask_worker") or "")
            kw["gpu"] = None if d.get("gpu") is None else dict(d["gpu"])
            kw["notes"] = tuple(str(n) for n in (d.get("notes") or ()))
        except (TypeError, ValueError, AttributeError) as exc:
            raise RecordError(f"{where}: {exc}") from None
        return cls(**kw)


def _finite(v: float | None) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else (math.copysign(1e308, v) if not math.isnan(v) else None)


@dataclass(frozen=True)
class Measure:
    """One judged comparison: for one case x subject x device x context x tensor, against one reference.

    ``kind`` (:data:`MEASURE_KINDS`) says what the reference is; ``other`` names it (the other context or
    device, the oracle subject, the baseline, the relation member). The statistics are those of the
    comparison; ``verdict`` (:data:`VERDICTS`) is what the judge concluded under ``contract`` by ``rule``.
    """

    kind: str
    case_id: str
    subject: str
    device: str
    context: str
    tensor: str
    other: str = ""
    relation: str = ""
    dtype: str = ""
    shape: tuple[int, ...] = ()
    identical: bool | None = None
    n_diff: int | None = None
    n_total: int | None = None
    max_ulp: int | None = None
    max_ulp_index: tuple[int, ...] | None = None
    n_unique: int | None = None
    repeats: int | None = None
    max_abs: float | None = None
    max_abs_index: tuple[int, ...] | None = None
    max_rel: float | None = None
    error_ratio: float | None = None
    allowed: str = ""
    within: bool | None = None
    actual: str = ""
    expected: str = ""
    verdict: str = ""
    rule: str = ""
    contract: str = ""
    detail: str = ""

    def __post_init__(self) -> None:
        if self.kind not in MEASURE_KINDS:
            raise RecordError(f"measure kind={self.kind!r} is not one of {', '.join(MEASURE_KINDS)}")
        if self.verdict and self.verdict not in VERDICTS:
            raise RecordError(f"measure verdict={self.verdict!r} is not one of {', '.join(VERDICTS)}")
        if self.verdict in _NEEDS_REASON and not str(self.detail).strip():
            # a check that did not run says why, in the words of its cause: nothing reads "no reason" later
            raise RecordError(f"measure verdict={self.verdict!r} of {self.subject} [{self.device}] {self.context} "
                              f"({self.kind}, case {self.case_id}) gives no reason (detail): every check that did "
                              f"not run says why")

    @property
    def where(self) -> str:
        """``subject [device] context``, the way dossiers and tables name a row."""
        return f"{self.subject} [{self.device}] {self.context}"

    def to_dict(self, compact: bool = False) -> dict[str, Any]:
        """The JSON form; ``compact`` leaves out fields that hold their default (``from_dict`` restores them),
        which is how ``measures.jsonl`` stores them."""
        # Every field is a scalar or a tuple of ints (shape, indices): no recursion needed (58 000 measures
        # in the default report).
        names = _FIELD_NAMES.get(Measure)
        if names is None:
            names = _FIELD_NAMES[Measure] = tuple(f.name for f in fields(Measure))
        d = {n: getattr(self, n) for n in names}
        for k in ("shape", "max_ulp_index", "max_abs_index"):
            if d[k] is not None:
                d[k] = list(d[k])
        for k in ("max_abs", "max_rel", "error_ratio"):
            d[k] = _finite(d[k])
        if compact:
            keep = {"kind", "case_id", "subject", "device", "context", "tensor"}
            d = {k: v for k, v in d.items() if k in keep or v not in (None, "", [], ())}
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "measure") -> "Measure":
        if not isinstance(d, Mapping):
            raise RecordError(f"{where}: not a JSON object")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise RecordError(f"{where}: unknown field {unknown[0]!r}")
        kw = dict(d)
        for name in ("kind", "case_id", "subject", "device", "context", "tensor"):
            _need(d, name, str, where)
        try:
            for k in ("shape", "max_ulp_index", "max_abs_index"):
                if kw.get(k) is not None:
                    kw[k] = tuple(int(n) for n in kw[k])
            if kw.get("shape") is None:
                kw["shape"] = ()
        except (TypeError, ValueError) as exc:
            raise RecordError(f"{where}: {exc}") from None
        return cls(**kw)


_NUMBER_START = re.compile(r"-?[0-9]*(\.[0-9]*)?([eE][+-]?[0-9]*)?")
_NUMBER_TAIL = re.compile(r"\.|[eE][+-]?")


def _cut_short(text: bytes) -> bool:
    """Whether ``text`` is a JSON object cut short by an interrupted write: it starts with ``{``, it is UTF-8 up
    to a character cut at its very end, and the parser ran out of text (inside a string, a literal, a number,
    an escape, or between tokens) rather than meeting a wrong byte. Nesting too deep is never a cut line."""
    if not text.startswith(b"{"):
        return False
    try:
        s = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data" or exc.end != len(text):
            return False
        s = text[:exc.start].decode("utf-8", errors="replace")
    try:
        json.loads(s)
    except RecursionError:
        return False
    except json.JSONDecodeError as exc:
        rest = s[exc.pos:]
        return (exc.pos >= len(s) or exc.msg.startswith("Unterminated string")
                or (exc.msg.startswith("Expecting value")
                    and (any(w.startswith(rest) for w in ("true", "false", "null"))
                         or _NUMBER_START.fullmatch(rest) is not None))
                or (exc.msg.startswith("Expecting ','") and _NUMBER_TAIL.fullmatch(rest) is not None)
                or (exc.msg.startswith("Invalid \\uXXXX escape") and len(rest) < 6))
    except ValueError:
        return False
    return False


def _parse_line(raw: bytes) -> tuple[str, Any]:
    """``("ok", obj)``, ``("blank", None)``, ``("torn", None)`` or ``("bad", reason)`` for one line.

    Torn: an object cut short by an interrupted write (:func:`_cut_short`: also when cut inside a multi-byte
    character or right after a nested ``}``). A resumed campaign ends such a line and writes on, so after two
    interruptions a torn line can sit anywhere in the file, not only last. Anything else that does not parse
    (bytes that are not UTF-8, nesting too deep, garbage after ``{``) is bad: the file was damaged, not cut."""
    text = raw.strip()
    if not text:
        return "blank", None
    try:
        return "ok", json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        if _cut_short(text):
            return "torn", None
        if isinstance(exc, RecursionError):
            return "bad", "nested too deep"
        return "bad", str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def read_records(path: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of each line of a JSONL file.

    Reads ``path``, or its packed form where a finished report packed it
    (:func:`harness.core.record_files.compress_jsonl`).
    A torn line (see :func:`_parse_line`), wherever it is, is skipped: its task did not finish and reruns on
    ``--resume`` (:func:`repair_jsonl` rewrites the file without it); any other undecodable line is a
    :class:`RecordError` naming the file and line."""
    lines = raw_lines(path)
    for n, raw in enumerate(lines or [], 1):
        state, obj = _parse_line(raw)
        if state == "ok":
            yield n, obj
        elif state == "bad":
            raise RecordError(f"{path}:{n}: not JSON ({obj})")


def repair_jsonl(path: str, keep: Any = None) -> int:
    """Rewrite ``path`` clean before a resumed campaign appends to it: torn lines (anywhere) dropped, and, with
    ``keep`` (a predicate over a parsed line), the lines it refuses (a run line of a task that never finished,
    which reruns and would be written twice). Atomic: the old file or the new, never half. Returns the number
    of lines dropped; a file with nothing to drop is left untouched (only a missing last newline is added)."""
    from harness.core.fileio import atomic_write

    found = record_file(path)
    packed = found is not None and found != path
    lines = raw_lines(path)
    if lines is None:
        return 0
    good: list[bytes] = []
    dropped = 0
    for n, raw in enumerate(lines, 1):
        state, obj = _parse_line(raw)
        if state == "blank":
            continue
        if state == "bad":
            raise RecordError(f"{path}:{n}: not JSON ({obj})")
        if state == "torn" or (keep is not None and not keep(obj)):
            dropped += 1
            continue
        good.append(raw.strip())
    if dropped or (lines and lines[-1].strip()) or packed:
        atomic_write(path, b"".join(g + b"\n" for g in good))
        if packed:
            os.remove(str(found))  # only once the plain file is in place
    return dropped


def read_tasks(path: str) -> dict[str, TaskRecord]:
    """The task records of a ``tasks.jsonl``, by key (a later line of the same key wins: a rerun task)."""
    out: dict[str, TaskRecord] = {}
    for n, obj in read_records(path):
        rec = TaskRecord.from_dict(obj, f"{path}:{n}")
        out[rec.key] = rec
    return out


def run_lines(runs: Iterable[Mapping[str, Any]]) -> str:
    """One task's run lines as ``runs.jsonl`` holds them, in the order they ran. A run's tensor entry (digest,
    dtype, shape, NaN/Inf counts) that equals the latest entry of that name in an earlier line of the same task
    is named in ``same_tensors`` rather than written again: most repetitions agree, and their digests are in the
    task record too. The first line holding a name holds it in full. :func:`read_runs` restores every entry."""
    latest: dict[str, Any] = {}
    out = []
    for line in runs:
        tensors = line.get("tensors") or {}
        same = sorted(n for n, e in tensors.items() if latest.get(n) == e)
        if same:
            line = {**line, "tensors": {n: e for n, e in tensors.items() if n not in same}, "same_tensors": same}
        latest.update(tensors)
        out.append(json.dumps(line, sort_keys=True) + "\n")
    return "".join(out)


def read_runs(path: str) -> list[dict[str, Any]]:
    """Every run line of a ``runs.jsonl`` (written by :func:`run_lines`), each with all its tensor entries; a line
    naming an entry no earlier line of its task holds is a :class:`RecordError`. Lines written before
    ``same_tensors`` existed hold every entry and read as they are."""
    latest: dict[Any, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for n, obj in read_records(path):
        if not isinstance(obj, dict):
            raise RecordError(f"{path}:{n}: not a JSON object")
        seen = latest.setdefault(obj.get("key"), {})
        own = dict(obj.get("tensors") or {})
        same = obj.pop("same_tensors", None) or ()
        lost = [s for s in same if s not in seen]
        if lost:
            raise RecordError(f"{path}:{n}: tensor {lost[0]!r} is named as before, but no earlier run line of task "
                              f"{obj.get('key')!r} holds it")
        seen.update(own)
        obj["tensors"] = dict(sorted({**{s: seen[s] for s in same}, **own}.items()))
        out.append(obj)
    return out


def read_measures(path: str) -> list[Measure]:
    """Every measure of a ``measures.jsonl``."""
    return [Measure.from_dict(obj, f"{path}:{n}") for n, obj in read_records(path)]


def jsonl_line(record: Any) -> str:
    """One record (an object with ``to_dict(compact=True)``) as a JSONL line, newline included."""
    return json.dumps(record.to_dict(compact=True), sort_keys=True, allow_nan=False, separators=(",", ":")) + "\n"


def write_jsonl(path: str, records: Iterable[Any]) -> None:
    """Write records (objects with ``to_dict(compact=True)``) as JSONL, atomically."""
    from harness.core.fileio import atomic_write

    atomic_write(path, "".join(jsonl_line(r) for r in records))
