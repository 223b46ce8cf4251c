"""Measures into findings: one finding per story, kinds as members, the one order (class, then subjects before
controls, then the kinds' order), and the gate's last line."""

from __future__ import annotations

from harness.core.classification import Classification
from harness.core.records import Measure
from harness.judge.finding_groups import group, sort_findings, summary_line
from harness.judge.finding_kinds import FindingKind
from harness.judge.findings import Origin


def _m(kind: str, verdict: str = "broken", subject: str = "s", **kw) -> Measure:
    base = dict(case_id="c1", subject=subject, device="cpu", context="default", tensor="ys[0]", identical=False,
                verdict=verdict, rule=f"{kind} rule")
    if kind == "oracle":
        base.update(within=False, identical=None)
    return Measure(kind=kind, **{**base, **kw})


def test_findings_hold_their_kind_as_a_member_and_sort_by_class_then_role_then_the_kinds_order():
    ms = [_m("context", other="blas1"), _m("repeat"), _m("oracle"), _m("repeat", verdict="diverged as allowed",
                                                                       subject="ctl"),
          _m("process", verdict="diverged as allowed")]
    found = group(ms, None, Origin("/r"), roles={"ctl": "control"})
    assert all(isinstance(f.kind, FindingKind) for f in found)
    assert [(f.classification, f.kind) for f in found] == [
        (Classification.CONTRACT_BROKEN, FindingKind.REPEAT), (Classification.CONTRACT_BROKEN, FindingKind.ORACLE),
        (Classification.CONTRACT_BROKEN, FindingKind.CONTEXT), (Classification.ALLOWED, FindingKind.PROCESS),
        (Classification.CONTROL, FindingKind.REPEAT)]
    assert sort_findings(reversed(found)) == found


def test_one_story_in_many_tensors_and_cases_is_one_finding_whose_reproducer_runs_the_smallest_case():
    ms = [_m("repeat", case_id=c, tensor=t) for c in ("c1", "c2") for t in ("ys[0]", "ys[1]", "hy")]
    (f,) = group(ms, None, Origin("/r"), sizes={"c1": 9, "c2": 3})
    assert (f.n_measures, f.n_tensors, f.case_id, f.cases) == (6, 6, "c2", ("c2", "c1"))
    assert f.tensor_kind == "outputs" and f.kind == "not reproducible run to run"


def test_the_summary_line_counts_findings_by_class_most_severe_first():
    found = group([_m("repeat"), _m("process", verdict="diverged as allowed"), _m("oracle")], None, Origin("/r"))
    assert summary_line(found, 2, 10) == ("2 of 10 checks failed; 3 finding(s) (2 contract broken, "
                                          "1 allowed divergence)")
