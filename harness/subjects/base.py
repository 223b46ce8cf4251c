"""The `Subject` protocol, `RunResult`, and `execute`, which runs one subject once without ever crashing.

A subject is one implementation under test. Its ``run`` function receives a case, a device, a
context and a :class:`Recorder`; it builds its inputs from the case, runs forward and backward
inside ``rec.phase(...)`` blocks and hands every output and gradient to ``rec.output``. It never
compares, writes files or prints. :func:`execute` wraps it: availability, the context, Chainer's
nondeterminism warnings, timing, errors (with the phase they happened in), and the copy to host.
"""

from __future__ import annotations

import contextlib
import re
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, TypedDict

import numpy as np

from harness.core.cases import Case, build_seconds
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.core.vocabulary import COMPUTE_PHASES, CPU_TIMING, INPUTS_TIMING, ROLES

__all__ = ["Subject", "Declared", "RunResult", "ErrorInfo", "Recorder", "execute"]



@dataclass(frozen=True)
class Declared:
    """What the harness is told to expect of a subject on one device kind, and why."""

    deterministic: bool | None
    reason: str
    #: The accumulation order the subject declares for its summed gradients: ``"sequential"`` (one position at
    #: a time, in index order, in the tensor's dtype) is pinned bit for bit by a reference summed that way;
    #: empty: none declared.
    order: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"deterministic": self.deterministic, "reason": self.reason}
        if self.order:
            d["order"] = self.order
        return d


RunFn = Callable[[Case, Device, Context, "Recorder"], None]


@dataclass(frozen=True)
class Subject:
    """One implementation under test.

    ``run(case, device, context, rec)`` does the work; ``accepts(case)`` says whether the subject
    applies to a case at all (an LSTM function does not take an embed case; ``n_step_lstm`` takes
    only unidirectional cases). ``declared`` maps a device kind to a :class:`Declared`.
    """

    name: str
    family: str
    run: RunFn
    devices: tuple[str, ...] = ("cpu", "gpu")
    declared: Mapping[str, Declared] = field(default_factory=dict)
    description: str = ""
    double_backward: bool = False
    accepts: Callable[[Case], bool] | None = None
    #: Where the code under test lives (module path), for the report.
    source: str = ""
    #: One of :data:`ROLES`.
    role: str = "subject"
    #: The oracle subject that judges this one's error (the registry fills in the family's oracle).
    oracle: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role={self.role!r} of subject {self.name!r} must be one of {', '.join(ROLES)}")

    def applies_to(self, case: Case) -> bool:
        """True when this subject takes ``case`` (same family, or a bad-input case it can try)."""
        if case.family != self.family:
            return False
        return True if self.accepts is None else bool(self.accepts(case))

    def declared_for(self, device_kind: str) -> Declared:
        return self.declared.get(device_kind, Declared(None, "no declaration"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "family": self.family, "devices": list(self.devices),
            "declared": {k: v.to_dict() for k, v in self.declared.items()},
            "double_backward": self.double_backward, "description": self.description, "source": self.source,
            "role": self.role, "oracle": self.oracle,
        }


@dataclass(frozen=True)
class ErrorInfo:
    """A subject's exception as data: type, one-line message, the phase, and the last traceback lines."""

    type: str
    message: str
    phase: str
    traceback: str = ""
    #: The outputs the run had recorded before it raised (name -> "shape (4, 3) float32"): a backward that
    #: raises after a forward that returned numbers says so.
    returned: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.type, "message": self.message, "phase": self.phase,
                             "traceback": self.traceback}
        if self.returned:
            d["returned"] = dict(self.returned)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ErrorInfo":
        return cls(d["type"], d["message"], d["phase"], d.get("traceback", ""), dict(d.get("returned") or {}))

    def __str__(self) -> str:
        return f"{self.type} in {self.phase}: {self.message}"


class RunKeys(TypedDict):
    """The fields that name one run of a :class:`RunResult`: every result about that run starts from them."""

    subject: str
    case_id: str
    device: str
    context: str


@dataclass
class RunResult:
    """What one run of one subject produced. ``status``: ok, error, skipped, crashed, timeout."""

    subject: str
    case_id: str
    device: str
    context: str
    status: str
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    declared_warnings: tuple[str, ...] = ()
    error: ErrorInfo | None = None
    skip_reason: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def subject_seconds(self) -> float:
        """Time the subject itself spent in forward, backward and double backward."""
        return sum(v for k, v in self.timings.items() if k in COMPUTE_PHASES)

    @property
    def subject_cpu_seconds(self) -> float:
        """CPU seconds (every thread of the process) the subject spent in forward, backward and double backward."""
        return float(self.timings.get(CPU_TIMING, 0.0))

    def meta(self) -> dict[str, Any]:
        """Everything but the arrays, as JSON-able data."""
        return {
            "subject": self.subject, "case_id": self.case_id, "device": self.device, "context": self.context,
            "status": self.status, "declared_warnings": list(self.declared_warnings),
            "error": None if self.error is None else self.error.to_dict(),
            "skip_reason": self.skip_reason, "timings": dict(self.timings),
        }


class Recorder:
    """Handed to a subject's ``run``: marks phases (timed) and collects named outputs."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.phase_name = "setup"
        self.timings: dict[str, float] = {}
        self._outputs: dict[str, Any] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Run a block as phase ``name``; its time (device work included) adds to ``timings[name]``, and for a
        compute phase its CPU seconds (every thread of this process) to ``timings[CPU_TIMING]``."""
        self.phase_name = name
        c0 = time.process_time()
        t0 = time.perf_counter()
        yield
        self.device.synchronize()
        self.timings[name] = self.timings.get(name, 0.0) + (time.perf_counter() - t0)
        if name in COMPUTE_PHASES:
            self.timings[CPU_TIMING] = self.timings.get(CPU_TIMING, 0.0) + (time.process_time() - c0)

    def output(self, name: str, array: Any) -> None:
        """Record one named output or gradient (a device array, a Variable, or None to skip)."""
        if array is None:
            return
        data = getattr(array, "array", array)
        if data is None:
            return
        self._outputs[name] = data

    def outputs(self, names: Mapping[str, Any]) -> None:
        for k, v in names.items():
            self.output(k, v)

    def returned(self) -> dict[str, str]:
        """The outputs recorded so far, as ``name -> "shape (4, 3) float32"`` (no transfer: for an error's record)."""
        return {k: f"shape {tuple(getattr(v, 'shape', ()))} {getattr(v, 'dtype', '')}".strip()
                for k, v in self._outputs.items()}

    def to_host(self) -> dict[str, np.ndarray]:
        """The outputs as host NumPy arrays. An output that is not an array of plain numbers (object, string
        or record dtype: no bits to compare) raises :class:`BadOutput`, which ``execute`` records as the run's
        error in its ``transfer`` phase -- a finding on that row, never the end of the campaign."""
        out = {}
        for k, v in self._outputs.items():
            a = np.ascontiguousarray(self.device.to_host(v))
            if a.dtype.kind not in _NUMERIC_KINDS:
                raise BadOutput(f"output {k!r} has dtype {a.dtype} (shape {a.shape}): only arrays of numbers or "
                                f"booleans can be compared bit for bit")
            out[k] = a
        return out


#: dtype kinds an output may have: bool, signed and unsigned ints, floats, complex.
_NUMERIC_KINDS = "biufc"


class BadOutput(Exception):
    """A subject returned an output the harness cannot compare (raised in the subject's process, recorded as
    the run's error)."""


_SOURCE = re.compile(r"Source: (\S+)")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    # Chainer's InvalidType message spans lines: keep its first two informative lines.
    if type(exc).__name__ == "InvalidType":
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        first = " ".join(lines[:3])
    return first[:500]


def execute(subject: Subject, case: Case, device: Device, context: Context) -> RunResult:
    """Run ``subject`` once on ``case``; any exception becomes an ``error`` result, never a raise."""
    base: dict[str, Any] = dict(subject=subject.name, case_id=case.id, device=device.id, context=context.name)
    if device.kind not in subject.devices:
        return RunResult(**base, status="skipped", skip_reason=f"{subject.name} does not run on {device.kind}")
    ok, reason = device.availability()
    if not ok:
        return RunResult(**base, status="skipped", skip_reason=reason)
    if not context.applies_to(device.kind):
        return RunResult(**base, status="skipped",
                         skip_reason=f"context {context.name} applies only to {', '.join(context.devices)}")
    rec = Recorder(device)
    error: ErrorInfo | None = None
    fired: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            from harness.core.compat import import_chainer

            chainer = import_chainer()
            with context.applied(), chainer.using_config("warn_nondeterministic", True):
                built = build_seconds()
                try:
                    subject.run(case, device, context, rec)
                finally:
                    if build_seconds() > built:
                        rec.timings[INPUTS_TIMING] = build_seconds() - built
                rec.phase_name = "transfer"
                device.synchronize()
                arrays = rec.to_host()
        except Exception as exc:  # noqa: BLE001 - a subject that raises is a finding, not a crash
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])
            error = ErrorInfo(type(exc).__name__, _one_line(exc), rec.phase_name, tb[-2000:], rec.returned())
            arrays = {}
        for w in caught:
            m = _SOURCE.search(str(w.message))
            if "non-deterministic" in str(w.message) and m:
                fired.append(m.group(1))
    return RunResult(**base, status="ok" if error is None else "error", arrays=arrays,
                     declared_warnings=tuple(sorted(set(fired))), error=error, timings=rec.timings)
