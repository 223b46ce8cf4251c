"""Verdicts and classifications: the one rule of what fails the gate, and the class of a finding of each verdict
for a subject and for a control."""

from __future__ import annotations

from harness.core.classification import VERDICT_ORDER, VERDICTS, Classification, Verdict, classify, fails_gate


def test_the_one_gate_rule_fails_on_broken_error_and_not_judged_and_labels_a_controls_passing_finding():
    assert [v for v in VERDICTS if fails_gate(v)] == ["not judged", "error", "broken"]
    assert {c for c in Classification if c.fails} == {Classification.CONTRACT_BROKEN, Classification.NEW_DEFECT,
                                                       Classification.NOT_JUDGED}
    assert classify("diverged as allowed", "control") == Classification.CONTROL
    assert classify("error", "control") == Classification.NEW_DEFECT  # a control that errors shows nothing


def test_every_verdict_fails_exactly_as_its_class_does_and_a_verdict_compares_equal_to_its_text():
    for v in Verdict:
        assert v.fails == fails_gate(v.value) == classify(v).fails
        assert v == v.value and str(v) == v.value and Verdict(v.value) is v
    assert classify("known defect") == Classification.KNOWN_DEFECT and classify("expected error", "control") == \
        Classification.CONTROL
    assert classify("within tolerance") == classify("diverged as allowed") == Classification.ALLOWED


def test_the_classes_rank_most_severe_first_and_the_verdicts_best_first():
    assert [c.rank for c in Classification] == list(range(len(Classification)))
    assert Classification.CONTRACT_BROKEN.rank < Classification.NOT_JUDGED.rank < Classification.CONTROL.rank
    assert VERDICTS[0] == "bit-identical" and VERDICTS[-1] == "broken"
    assert [VERDICT_ORDER[v] for v in VERDICTS] == list(range(len(VERDICTS)))
