"""Measures into findings: :func:`group` (one story per group: the worst measure, the cases, the counts, the
smallest case), in the one order (:func:`sort_findings`), and the gate's last line (:func:`summary_line`).

A group is one subject family x device x context (or relation, or baseline) x rule x tensor kind, with one
classification (:func:`~harness.core.classification.classify` of its measures' verdict) and one finding kind
(:func:`~harness.judge.finding_kinds.kind_of`). Pure: measures, task records and plain data in.

>>> from harness.core.records import Measure
>>> m = Measure(kind="repeat", case_id="c1", subject="s", device="cpu", context="default", tensor="ys[3]",
...             identical=False, verdict="broken", rule="reproducible: bit-identical run to run in one process")
>>> f = group([m], None, Origin("/r"))[0]
>>> f.kind, f.classification, f.tensor_kind, f.fails
(<FindingKind.REPEAT: 'not reproducible run to run'>, <Classification.CONTRACT_BROKEN: 'contract broken'>, \
'outputs', True)
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Mapping, Sequence

from harness.core.classification import VERDICT_ORDER, Classification, classify
from harness.core.contexts import context_order
from harness.core.records import Measure, TaskRecord
from harness.judge.finding_kinds import FindingKind, kind_of, tensor_kind
from harness.judge.findings import UPSTREAM, Finding, Origin, library_frame, library_of

__all__ = ["group", "sort_findings", "summary_line"]


def _group_key(m: Measure, kind: FindingKind, cls: Classification, family: str) -> tuple[str, ...]:
    if m.kind == "task":
        # one error is one finding whatever the context it showed in: "Type in phase"
        what = m.actual.split(":", 1)[0] if m.actual else m.rule
        return (cls.value, kind.value, family, m.device, m.relation, what, m.rule, "")
    what = m.other if kind.paired else ""
    return (cls.value, kind.value, family, m.device, m.relation or m.context, what, m.rule, tensor_kind(m.tensor))


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
        cls = classify(m.verdict, roles.get(m.subject, "subject"))
        groups.setdefault(_group_key(m, kind, cls, family) + ((m.subject,) if cls == Classification.CONTROL
                                                              else ()), []).append(m)
    out = []
    for key, ms in groups.items():
        cls, kind, family = Classification(key[0]), FindingKind(key[1]), key[2]
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
        if kind == FindingKind.NOT_JUDGED:
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
            library_cases=tuple((libs[lib].subject, libs[lib].case_id) for lib in UPSTREAM if lib in libs)))
    return sort_findings(out)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first: classification, the implementations before the controls, then kind, then how far
    off (error ratio, ULP), then name."""
    return sorted(findings, key=lambda f: (f.classification.rank, f.role == "control", f.kind.rank,
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
