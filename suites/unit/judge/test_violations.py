"""Violations: the measures the one gate rule fails on, as dossiers; a control's failing measure is a violation
and its finding fails the gate too."""

from __future__ import annotations

import pytest

from harness.core.classification import fails_gate
from harness.core.errors import ContractViolation
from harness.core.records import VERDICTS, Measure
from harness.judge.violations import Violation, assert_no_violations, violations


def _m(verdict: str, case_id: str = "c1", kind: str = "repeat") -> Measure:
    return Measure(kind=kind, case_id=case_id, subject="s", device="cpu", context="default",
                   tensor="" if kind == "task" else "ys[0]", identical=verdict == "bit-identical", verdict=verdict,
                   rule="reproducible: bit-identical run to run in one process",
                   detail="why" if verdict in ("skipped", "not judged") else "")


def test_the_violations_are_exactly_the_measures_the_one_gate_rule_fails_on():
    ms = [_m(v, kind="task") for v in VERDICTS]
    found = violations(ms)
    assert [v.measure.verdict for v in found] == [m.verdict for m in ms if fails_gate(m.verdict)]
    assert {v.measure.verdict for v in found} == {"not judged", "error", "broken"}


def test_a_controls_error_is_a_violation_whose_finding_fails_the_gate_as_well():
    v = Violation(_m("error", kind="task"), case_file="/run/cases/c1.json", role="control")
    assert violations([v.measure]) and v.finding().fails
    assert v.finding().classification.value == "new library defect"


def test_assert_no_violations_raises_the_first_dossier_in_full_and_one_line_for_each_other():
    found = violations([_m("broken", f"c{i}") for i in range(5)])
    with pytest.raises(ContractViolation) as e:
        assert_no_violations(found, limit=12)
    text = str(e.value)
    assert text.splitlines()[0] == found[0].headline()
    assert "5 violation(s) in all" in text and len(text.splitlines()) <= 12
    assert_no_violations([])  # nothing to raise
