"""Findings: what a person acts on after a verdict, built once from the measures.

A :class:`Finding` is a group of measures that tell one story: one subject family x device x context (or
relation, or baseline) x rule x tensor kind, with one verdict class. Everything the harness prints about a
finding is built here, from the record, and nowhere else:

- :data:`KINDS`: the kind table (measure kind -> finding kind, what its reproducer needs);
- :func:`kind_of`: the finding kind of one measure (None: nothing to report);
- :func:`classify`: contract broken, new library defect, not judged, known library defect, allowed
  divergence, expected error, control (:class:`Classification`, in order of severity);
- :func:`group`: measures -> findings (the worst measure, the cases, the counts, the smallest case);
- :func:`reproducer_of`: the :class:`~harness.judge.reproducer.Reproducer` each verb's command (replay,
  localize, shrink, export) reproduces a finding from (plug-ins, contracts file, relation, contexts, devices,
  baseline and the environment that differs included); the record renders the command;
- :meth:`Finding.dossier`: the failure as a reader needs it, at most :data:`DOSSIER_LINES` lines.

Pure: measures, task records and plain data in; no file is read and nothing runs here.

>>> from harness.core.records import Measure
>>> m = Measure(kind="repeat", case_id="c1", subject="s", device="cpu", context="default", tensor="ys[3]",
...             identical=False, verdict="broken", rule="reproducible: bit-identical run to run in one process")
>>> kind_of(m)
'not reproducible run to run'
>>> tensor_kind("grad.xs.12"), tensor_kind("grad.ws.0.3"), tensor_kind("hy")
('input gradients', 'parameter gradients', 'outputs')
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from harness.core.contexts import context_order
from harness.core.records import VERDICT_ORDER, Measure, TaskRecord, Verdict
from harness.judge.reproducer import (
    Origin,
    Reproducer,
    command,
    contracts_argument,
    env_for_reproducer,
    export_path,
    harness_argv,
)

__all__ = ["Classification", "FindingKind", "KINDS", "Origin", "Shrunk", "Finding", "kind_of", "tensor_kind",
           "classify", "group", "reproducer_of", "replay_argv", "localize_argv", "shrink_argv",
           "command", "harness_argv", "contracts_argument",
           "DOSSIER_LINES", "env_for_reproducer", "library_frame", "library_of", "export_context", "sort_findings",
           "summary_line", "dumps", "loads", "with_cause", "with_shrunk"]

#: A dossier is at most this many lines.
DOSSIER_LINES = 40


class Classification(str, enum.Enum):
    """What a finding is, most severe first. The gate fails on the first three."""

    CONTRACT_BROKEN = "contract broken"
    NEW_DEFECT = "new library defect"
    NOT_JUDGED = "not judged"
    KNOWN_DEFECT = "known library defect"
    ALLOWED = "allowed divergence"
    EXPECTED_ERROR = "expected error"
    CONTROL = "control"

    def __str__(self) -> str:
        return self.value

    @property
    def fails(self) -> bool:
        return self in (Classification.CONTRACT_BROKEN, Classification.NEW_DEFECT, Classification.NOT_JUDGED)

    @property
    def rank(self) -> int:
        return list(Classification).index(self)


@dataclass(frozen=True)
class FindingKind:
    """One row of the kind table: the finding kind of a measure kind, and what its reproducer compares."""

    name: str
    measure_kind: str
    #: How ``replay`` compares: "repeats" (R runs, fresh processes too), "contexts" (other context, then this
    #: one), "devices", "relation", "baseline", "single" (one context and device: oracle, errors, bad inputs).
    replay: str
    #: Whether ``localize`` can say where it starts (the function node whose outputs differ first).
    localizable: bool = False


#: The kind table: every finding kind, most important first (within one classification).
KINDS: tuple[FindingKind, ...] = (
    FindingKind("not reproducible run to run", "repeat", "repeats", localizable=True),
    FindingKind("not reproducible across processes", "process", "repeats", localizable=True),
    FindingKind("beyond oracle tolerance", "oracle", "single"),
    FindingKind("accumulation order differs from the declared one", "order", "single"),
    FindingKind("error", "task", "single"),
    FindingKind("not judged", "task", "single"),
    FindingKind("cross-context difference", "context", "contexts", localizable=True),
    FindingKind("cross-device difference", "device", "devices", localizable=True),
    FindingKind("baseline changed", "baseline", "baseline"),
    FindingKind("not invariant", "relation", "relation", localizable=True),
    FindingKind("bad input misbehaved", "task", "single"),
    FindingKind("no contract line", "task", "single"),
    FindingKind("gate check failed", "task", "none"),
    FindingKind("known library defect", "task", "single"),
    FindingKind("expected error", "task", "single"),
    FindingKind("trajectory divergence", "trajectory", "contexts", localizable=True),
)
_BY_NAME = {k.name: k for k in KINDS}
_BY_MEASURE = {k.measure_kind: k for k in KINDS if k.measure_kind != "task"}  # each pair's kind names one row


def kind_of(m: Measure) -> str | None:
    """The finding kind of one measure; None where the measure found nothing to report."""
    if m.verdict == Verdict.NOT_JUDGED:
        return "not judged"
    if m.kind == "task":
        if m.verdict == Verdict.KNOWN_DEFECT:
            return "known library defect"
        if m.verdict == Verdict.ERROR:
            return "error"
        if m.rule.startswith("bad input"):
            if m.verdict == Verdict.EXPECTED_ERROR:
                return "expected error" if m.actual != "no error" else None
            return "bad input misbehaved" if m.verdict == Verdict.BROKEN else None
        if m.verdict == Verdict.BROKEN:
            return "no contract line" if m.rule == "no contract" else "gate check failed"
        return None
    broken = m.verdict == Verdict.BROKEN  # a broken measure always has a finding, whatever else it recorded
    if m.kind == "oracle":
        return "beyond oracle tolerance" if m.within is False or broken else None
    if m.identical is not False and not broken:
        return None
    k = _BY_MEASURE.get(m.kind)
    return None if k is None else k.name


def tensor_kind(name: str) -> str:
    """A tensor's kind, what a finding groups by: ``outputs`` (y, ys, hy, cy), ``input gradients`` (of the ids'
    rows, xs, hx, cx, and second-order ``grad2.*``) or ``parameter gradients`` (W, ws, bs); ``""`` for none.
    One planted bug shows in many tensors of one kind: it is one finding, with its worst tensor named."""
    if not name:
        return ""
    head = name.split(" ", 1)[0]  # "grad.xs.2 as grad.xs.0" (a relation's pair): the tensor's own name
    if head.startswith("grad2."):
        return "input gradients"
    if head.startswith("grad."):
        leaf = head[5:].split(".", 1)[0].split("[", 1)[0]
        return "parameter gradients" if leaf in ("W", "ws", "bs", "b", "w") else "input gradients"
    return "outputs"


_LIBRARIES = ("chainer", "espnet", "cupy", "numpy")
#: The libraries a finding goes upstream to: each gets its own issue where subjects of both share a defect.
_UPSTREAM = ("chainer", "espnet")


def library_of(subject: str) -> str:
    """The library whose issue tracker a subject's defect goes to: ``chainer`` or ``espnet`` (the name's first
    part), ``""`` for a pipeline, a control or a plug-in's subject."""
    head = subject.split(".", 1)[0]
    return head if head in _UPSTREAM else ""


def library_frame(traceback_text: str) -> str:
    """The innermost frame of a traceback that lies in a library (``chainer/functions/...py:123``), ``""``
    where none does (the error came from the harness or a plug-in)."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', traceback_text or "")
    for path, line in reversed(frames):
        parts = path.replace("\\", "/").split("/")
        if "harness" in parts[:-1]:
            continue
        for i in range(len(parts) - 2, -1, -1):
            if parts[i] in _LIBRARIES:
                return f"{'/'.join(parts[i:])}:{line}"
    return ""


def classify(m: Measure, role: str = "subject") -> Classification:
    """The class of a measure that has a finding kind (a control's designed divergence is a control's; a
    control whose own contract breaks fails like any subject)."""
    v = m.verdict
    if role == "control" and v not in (Verdict.BROKEN, Verdict.NOT_JUDGED):
        return Classification.CONTROL
    if v == Verdict.NOT_JUDGED:
        return Classification.NOT_JUDGED
    if v == Verdict.KNOWN_DEFECT:
        return Classification.KNOWN_DEFECT
    if v == Verdict.ERROR:
        return Classification.NEW_DEFECT
    if v == Verdict.BROKEN:
        return Classification.CONTRACT_BROKEN
    if v == Verdict.EXPECTED_ERROR:
        return Classification.EXPECTED_ERROR
    return Classification.ALLOWED


# --------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class Shrunk:
    """A finding's minimal case: what ``shrink`` made of its smallest case, and at what cost."""

    case_id: str
    file: str
    original: str
    sizes: Mapping[str, Any]           # the minimal case's dimensions (lengths, hidden, vocab, ...)
    original_sizes: Mapping[str, Any]
    runs: int
    seconds: float
    complete: bool                     # every pass ran to its end (False: the budget ran out first)

    def describe(self) -> str:
        dims = ", ".join(f"{k} {v}" for k, v in self.sizes.items())
        before = ", ".join(f"{k} {v}" for k, v in self.original_sizes.items())
        return (f"{self.case_id} ({dims}), shrunk from {self.original} ({before}) in {self.runs} runs"
                + ("" if self.complete else ", budget spent before every pass ran"))


@dataclass(frozen=True)
class Finding:
    """A group of measures that tell one story, with everything needed to act on it."""

    id: str
    kind: str
    classification: Classification
    verdict: str
    family: str
    subjects: tuple[str, ...]
    subject: str                 # the subject the reproducer runs (the worst measure's)
    device: str
    context: str
    other: str                   # the other side: a context, a device, "baseline", a relation member
    relation: str
    rule: str
    tensor_kind: str
    cases: tuple[str, ...]       # case ids, the reproducer's first
    n_measures: int
    n_tensors: int
    worst: Measure
    case_id: str                 # the reproducer's case: the smallest case of the group
    case_size: int | None
    origin: Origin
    contract: str = ""
    error: str = ""              # "Type in phase: message" for an error finding
    where: str = ""              # the library frame an error came from
    reason: str = ""             # why a check was not judged, a known defect's reason and reference
    cause: str = ""              # the localized root cause
    shrunk: Shrunk | None = None
    role: str = "subject"
    #: The subject is not reproducible run to run here (it has such a finding on this device and context): its
    #: other findings show only in some runs too, so their reproducers run many times.
    flaky: bool = False
    #: Every context the group's measures came from (an error groups across contexts: it is one finding).
    contexts: tuple[str, ...] = ()
    #: (subject, case id) for each other library (:func:`library_of`) whose subjects share the finding: its
    #: smallest case there (each library gets its own export).
    library_cases: tuple[tuple[str, str], ...] = ()

    @property
    def kind_row(self) -> FindingKind:
        return _BY_NAME[self.kind]

    @property
    def fails(self) -> bool:
        return self.classification.fails

    @property
    def repro_case(self) -> str:
        """The case the reproducer runs: the minimal one where shrinking found it, else the smallest."""
        return self.shrunk.case_id if self.shrunk is not None else self.case_id

    def reproducer(self, verb: str = "replay") -> Reproducer | None:
        """The record of ``verb``'s command (:func:`reproducer_of`)."""
        return reproducer_of(self, verb)

    def _command(self, verb: str, extra: Sequence[str] = ()) -> str:
        r = reproducer_of(self, verb)
        return "" if r is None else r.command(verb, extra)

    def replay(self) -> str:
        return self._command("replay")

    def localize(self) -> str:
        return self._command("localize")

    def shrink(self) -> str:
        return self._command("shrink")

    def export(self) -> str:
        """The command that writes a standalone script reproducing the finding (``--out reproduce-<id>.py``); ``""``
        for a control's (nothing of it goes upstream)."""
        return self._command("export", ["--out", export_path(self.id)])

    def exports(self) -> tuple[str, ...]:
        """:meth:`export`, then one for each other library whose subjects share the finding: its subject, its
        smallest case (minimal where that is the one shrunk), ``--out reproduce-<id>-<library>.py``."""
        out = [self.export()] if self.export() else []
        for subject, case_id in self.library_cases:
            mini = self.shrunk if case_id == self.case_id else None
            r = reproducer_of(replace(self, subject=subject, case_id=case_id, shrunk=mini), "export")
            if r is not None:
                out.append(r.command("export", ["--out", export_path(f"{self.id}-{library_of(subject)}")]))
        return tuple(out)

    def headline(self) -> str:
        """One line: class, subject(s), device, context or relation, kind, rule, tensor kind."""
        where = f"under '{self.relation}'" if self.relation else ", ".join(self.contexts or (self.context,))
        if self.other and self.kind in ("cross-context difference", "cross-device difference", "trajectory divergence"):
            where += f" vs {self.other}"
        also = f" (and {', '.join(s for s in self.subjects if s != self.subject)})" if len(self.subjects) > 1 else ""
        tensor = f" {self.tensor_kind}" if self.tensor_kind else ""
        return (f"[{self.classification}] {self.subject}{also} [{self.device}] {where}: {self.kind}{tensor}"
                f" -- {self.rule}")

    def size_text(self) -> str:
        return (f"{len(self.cases)} case(s), {self.n_tensors} tensor(s), {self.n_measures} measure(s)"
                if self.worst.tensor else f"{len(self.cases)} case(s)")

    def dossier(self) -> str:
        """The finding as a reader needs it (at most :data:`DOSSIER_LINES` lines): headline, contract,
        counts, the worst values, the smallest case, the cause, and the commands."""
        m = self.worst
        lines = [self.headline(), f"Contract: {self.contract or m.contract}", f"Seen in: {self.size_text()}"]
        if self.error:
            lines.append(f"Error: {self.error}" + (f" (raised in {self.where})" if self.where else ""))
        if self.reason:
            lines.append(f"Why: {self.reason}")
        if m.tensor:
            lines.append(f"Worst: case {m.case_id}, tensor {m.tensor}" + (f" ({m.dtype} {list(m.shape)})"
                                                                         if m.dtype else ""))
        if m.n_total and m.n_diff is not None:
            lines.append(f"Mismatched elements: {m.n_diff} / {m.n_total} ({m.n_diff / m.n_total:.1%})")
        if m.kind == "oracle" and m.error_ratio is not None:
            lines.append(f"Greatest error / allowed: {m.error_ratio:.3g} at index {m.max_abs_index}; greatest "
                         f"absolute difference {m.max_abs:.3g} ({m.allowed})")
            if m.max_rel is not None:
                lines.append(f"Greatest relative difference: {m.max_rel:.3g}")
        if m.max_ulp is not None and m.max_ulp_index is not None:
            ulp = "NaN vs non-NaN" if m.max_ulp >= 2 ** 63 else str(m.max_ulp)
            lines.append(f"Greatest ULP distance: {ulp} at index {m.max_ulp_index}")
        if m.actual or m.expected:
            ref = {"oracle": "oracle", "repeat": "another repetition", "process": "a fresh process",
                   "task": "expected"}.get(m.kind, m.other or "reference")
            lines.append(f"Actual: {m.actual}   {ref}: {m.expected}")
        if m.n_unique is not None and m.repeats:
            lines.append(f"Unique results: {m.n_unique} of {m.repeats} runs")
        if m.detail and m.detail not in self.error and m.detail not in ("error as expected", "no error"):
            lines += [ln for ln in m.detail.rstrip().splitlines()[:8]]
        if self.case_id:
            lines.append(f"Smallest case: {self.case_id}" + (f" (size {self.case_size})" if self.case_size else ""))
        if self.shrunk is not None:
            lines.append(f"Minimal case: {self.shrunk.describe()}")
        if self.cause:
            lines.append(f"Starts at: {self.cause}")
        if self.replay():
            lines.append(f"Reproduce: {self.replay()}")
        lines += [f"Export: {e}" for e in self.exports()]
        if self.localize() and not self.cause:
            lines.append(f"Localize: {self.localize()}")
        if self.shrunk is None and self.shrink():
            lines.append(f"Shrink: {self.shrink()}")
        return "\n".join(lines[:DOSSIER_LINES])

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in ("worst", "origin", "shrunk")}
        d["classification"] = self.classification.value
        d["subjects"], d["cases"], d["contexts"] = list(self.subjects), list(self.cases), list(self.contexts)
        d["worst"] = self.worst.to_dict()
        d["origin"] = self.origin.to_dict()
        d["shrunk"] = None if self.shrunk is None else {**asdict(self.shrunk), "sizes": dict(self.shrunk.sizes),
                                                       "original_sizes": dict(self.shrunk.original_sizes)}
        d["replay"], d["localize"], d["shrink"] = self.replay(), self.localize(), self.shrink()
        d["export"] = self.export()
        d["library_cases"] = [list(p) for p in self.library_cases]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Finding":
        kw = {k: d[k] for k in ("id", "kind", "verdict", "family", "subject", "device", "context", "other",
                                "relation", "rule", "tensor_kind", "n_measures", "n_tensors", "case_id",
                                "case_size", "contract", "error", "where", "reason", "cause", "role")}
        kw["flaky"] = bool(d.get("flaky", False))
        kw["contexts"] = tuple(d.get("contexts", ()))
        kw["library_cases"] = tuple((str(s), str(c)) for s, c in d.get("library_cases", ()))
        sh = d.get("shrunk")
        return cls(**kw, classification=Classification(d["classification"]), subjects=tuple(d["subjects"]),
                   cases=tuple(d["cases"]), worst=Measure.from_dict(d["worst"]),
                   origin=Origin.from_dict(d["origin"]),
                   shrunk=None if sh is None else Shrunk(**{**sh, "sizes": dict(sh["sizes"]),
                                                          "original_sizes": dict(sh["original_sizes"])}))


# --------------------------------------------------------------------------- commands


def reproducer_of(f: Finding, verb: str = "replay") -> Reproducer | None:
    """The record ``verb``'s command reproduces ``f`` from; None where ``verb`` offers none for it (replay and
    export: a check with no case; localize: a kind no function node can show; shrink: a kind no smaller case
    can show: a baseline's, an expected error, not judged, no contract line, a check with no case).

    Replay, localize and export run the reproducer's case (the minimal one where shrinking found it); shrink
    starts from the smallest case of the group. A finding of a subject that diverges run to run (or of that
    kind) compares 20 runs: a minimal case may diverge in only a third of its runs (three colliding ids summed
    in another order), and 20 runs miss that 1 time in 3,000.

    Export is for what goes upstream: none for a control, a check that did not run or a missing contract line;
    an allowed divergence or an expected error is a
    behaviour note (``--note``); an error finding runs in :func:`export_context`."""
    how = f.kind_row.replay
    if verb in ("replay", "export") and (how == "none" or not f.repro_case):
        return None
    if verb == "export" and (f.role == "control" or f.classification == Classification.CONTROL
                             or f.kind in ("not judged", "no contract line")):
        return None
    if verb == "localize" and not f.kind_row.localizable:
        return None
    if verb == "shrink" and (how == "none" or not f.case_id or f.kind in (
            "baseline changed", "expected error", "not judged", "no contract line")):
        return None
    return Reproducer(
        case=f.origin.case_file(f.case_id if verb == "shrink" else f.repro_case), subject=f.subject,
        devices=(f.other, f.device) if how == "devices" else (f.device,),
        contexts=(f.other, f.context) if how == "contexts" else
        (export_context(f) if verb == "export" else f.context,),
        relation=f.relation if how == "relation" else "", baseline=f.origin.baseline if how == "baseline" else "",
        plugins=f.origin.plugins, contracts=f.origin.contracts, env=f.origin.env,
        repeats=20 if how == "repeats" or f.flaky else None,
        fresh=2 if f.kind == "not reproducible across processes" else None,
        kind=f.kind, tensor=f.tensor_kind, error=f.error.split(":", 1)[0] if f.error else "",
        flaky=f.flaky and how != "repeats",
        note=f.classification in (Classification.ALLOWED, Classification.EXPECTED_ERROR))


def export_context(f: Finding) -> str:
    """The context an exported error runs in: ``default`` where the error showed there too (it does not depend
    on the context, whichever context's measure was worst; a ``[[known_defect]]`` for one context shows only
    there), else the finding's own."""
    if f.kind_row.measure_kind == "task" and "default" in f.contexts:
        return "default"
    return f.context


def replay_argv(f: Finding, case_file: str | None = None) -> list[str]:
    """``harness replay`` arguments that reproduce ``f`` (exit 1 when it does); ``[]`` for a check with no case."""
    r = reproducer_of(f, "replay")
    return [] if r is None else (replace(r, case=case_file) if case_file else r).argv("replay")


def localize_argv(f: Finding) -> list[str]:
    """``harness localize`` arguments for a localizable finding; ``[]`` for the others."""
    r = reproducer_of(f, "localize")
    return [] if r is None else r.argv("localize")


def shrink_argv(f: Finding) -> list[str]:
    """``harness shrink`` arguments that reduce ``f``'s smallest case while the same finding reproduces; ``[]``
    where no smaller case can show it."""
    r = reproducer_of(f, "shrink")
    return [] if r is None else r.argv("shrink")


# --------------------------------------------------------------------------- grouping


def _group_key(m: Measure, kind: str, cls: Classification, family: str) -> tuple[str, ...]:
    if m.kind == "task":
        # one error is one finding whatever the context it showed in: "Type in phase"
        what = m.actual.split(":", 1)[0] if m.actual else m.rule
        return (cls.value, kind, family, m.device, m.relation, what, m.rule, "")
    what = m.other if kind in ("cross-context difference", "cross-device difference") else ""
    return (cls.value, kind, family, m.device, m.relation or m.context, what, m.rule, tensor_kind(m.tensor))


def _finding_id(key: Sequence[str]) -> str:
    return hashlib.sha256("\x1f".join(key).encode()).hexdigest()[:10]


def _severity(m: Measure) -> tuple[float, ...]:
    ulp = float(m.max_ulp or 0)
    ratio = float(m.error_ratio or 0.0)
    return (VERDICT_ORDER.get(str(m.verdict), 0), ratio, ulp, float(m.n_diff or 0))


def group(measures: Iterable[Measure], records: Mapping[tuple[str, str, str, str], TaskRecord] | None,
          origin: Origin, *, roles: Mapping[str, str] | None = None,
          sizes: Mapping[str, int | None] | None = None,
          reasons: Mapping[tuple[str, str, str, str], str] | None = None) -> list[Finding]:
    """The findings of a campaign's measures, most severe first (:func:`sort_findings`).

    ``records`` by ``(case_id, subject, device, context)`` give each task's family and error traceback;
    ``roles`` each subject's role (``control`` findings are classified as such); ``sizes`` each case's size
    (the reproducer runs the smallest case of a group); ``reasons`` a known defect's reason and reference.
    """
    roles, sizes, records = roles or {}, sizes or {}, records or {}
    measures = list(measures)
    flaky = {(m.subject, m.device, m.context) for m in measures if m.kind in ("repeat", "process")
             and m.identical is False}
    groups: dict[tuple[str, ...], list[Measure]] = {}
    for m in measures:
        kind = kind_of(m)
        if kind is None:
            continue
        rec = records.get((m.case_id, m.subject, m.device, m.context))
        family = rec.family if rec is not None else ""
        cls = classify(m, roles.get(m.subject, "subject"))
        groups.setdefault(_group_key(m, kind, cls, family) + ((m.subject,) if cls == Classification.CONTROL
                                                              else ()), []).append(m)
    out = []
    for key, ms in groups.items():
        cls, kind, family = Classification(key[0]), key[1], key[2]
        worst = max(ms, key=_severity)
        cases = sorted({m.case_id for m in ms if m.case_id},
                       key=lambda c: (sizes.get(c) is None, sizes.get(c) or 0, c))
        smallest = cases[0] if cases else worst.case_id
        # the reproducer's subject and measure: the worst measure on the smallest case
        on_small = [m for m in ms if m.case_id == smallest] or ms
        rep = max(on_small, key=_severity)
        rec = records.get((rep.case_id, rep.subject, rep.device, rep.context))
        err = rec.first_error if rec is not None else None
        error = "" if err is None or rep.kind != "task" else \
            f"{err.get('type')} in {err.get('phase')}: {err.get('message')}"
        # (an error outside the libraries, in a plug-in's own code, is that subject's defect all the same)
        where = library_frame(str(err.get("traceback", ""))) if err is not None and error else ""
        reason = (reasons or {}).get((rep.case_id, rep.subject, rep.device, rep.context), "")
        if kind == "not judged":
            reason = rep.detail or reason
        # each other library's subjects: the worst measure on their smallest case (a library's own issue)
        libs: dict[str, Measure] = {}
        for m in sorted(ms, key=lambda m: (cases.index(m.case_id) if m.case_id in cases else len(cases),
                                           [-x for x in _severity(m)], m.subject)):
            lib = library_of(m.subject)
            if lib and lib != library_of(rep.subject) and m.case_id:
                libs.setdefault(lib, m)
        out.append(Finding(
            id=_finding_id(key), kind=kind, classification=cls, verdict=worst.verdict, family=family,
            subjects=tuple(sorted({m.subject for m in ms})), subject=rep.subject, device=rep.device,
            context=rep.context, other=rep.other, relation=rep.relation,
            rule=rep.rule, tensor_kind=tensor_kind(worst.tensor), cases=tuple(cases),
            n_measures=len(ms), n_tensors=len({(m.case_id, m.subject, m.tensor) for m in ms if m.tensor}),
            worst=worst, case_id=smallest, case_size=sizes.get(smallest), origin=origin,
            contract=worst.contract, error=error, where=where, reason=reason, role=roles.get(rep.subject, "subject"),
            flaky=(rep.subject, rep.device, rep.context) in flaky, contexts=context_order(m.context for m in ms),
            library_cases=tuple((libs[lib].subject, libs[lib].case_id) for lib in _UPSTREAM if lib in libs)))
    return sort_findings(out)


_KIND_RANK = {k.name: i for i, k in enumerate(KINDS)}


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first: classification, the implementations before the controls, then kind, then how far
    off (error ratio, ULP), then name."""
    return sorted(findings, key=lambda f: (f.classification.rank, f.role == "control", _KIND_RANK.get(f.kind, 99),
                                           -float(f.worst.error_ratio or 0.0), -float(f.worst.max_ulp or 0),
                                           f.subject, f.device, f.context, f.relation, f.tensor_kind))


def summary_line(findings: Sequence[Finding], checks_failed: int, checks: int,
                 headlines: Sequence[Any] | None = None) -> str:
    """The last line of a gate: how many checks failed, how many findings (or headline findings, each the
    findings of one cause: :mod:`harness.judge.headlines`), by class."""
    items = findings if headlines is None else headlines
    by: dict[str, int] = {}
    for f in items:
        by[f.classification.value] = by.get(f.classification.value, 0) + 1
    parts = ", ".join(f"{n} {c}" for c, n in sorted(by.items(), key=lambda kv: Classification(kv[0]).rank))
    what = f"{len(findings)} finding(s)" if headlines is None else \
        f"{len(headlines)} headline finding(s)" + (f" ({parts})" if parts else "") + f" from {len(findings)} finding(s)"
    return f"{checks_failed} of {checks} checks failed; " + (
        what + (f" ({parts})" if parts else "") if headlines is None else what)


def dumps(findings: Sequence[Finding]) -> str:
    """``findings.json``: every finding as a record, most severe first."""
    return json.dumps([f.to_dict() for f in findings], indent=1, default=str) + "\n"


def loads(text: str) -> list[Finding]:
    return [Finding.from_dict(d) for d in json.loads(text)]


def with_cause(f: Finding, cause: str) -> Finding:
    """``f`` with its localized cause."""
    return replace(f, cause=cause)


def with_shrunk(f: Finding, shrunk: Shrunk | None) -> Finding:
    """``f`` with its minimal case (its reproducer then runs that case). A cause localized on another case is
    dropped: a headline says where the finding starts on the case its card shows."""
    same = (shrunk.case_id if shrunk is not None else f.case_id) == f.repro_case
    return replace(f, shrunk=shrunk, cause=f.cause if same else "")
