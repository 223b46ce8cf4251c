"""harness/judge/coverage.py: a contract rule whose measure was not taken is a ``not judged`` measure saying why;
a rule that was measured, or a task nothing judges, gives none."""

from __future__ import annotations

from types import SimpleNamespace

from harness.core.records import Measure, TaskRecord
from harness.judge.coverage import missing_measures

REC = TaskRecord(key="k", case_id="c", family="lstm", subject="s", device="cpu", context="default", status="ok",
                 runs=1, ok_runs=1)
LINE = SimpleNamespace(oracle="within", invariant_under=("alone",), source="contracts.toml", line=4)
KEY = dict(case_id="c", subject="s", device="cpu", context="default")


def test_each_rule_not_measured_is_one_not_judged_measure_naming_the_line() -> None:
    out = missing_measures(REC, LINE, [], oracle="oracle.lstm", oracle_takes_case=True, relations_possible=["alone"])
    assert [(m.kind, m.verdict, m.rule) for m in out] == [("oracle", "not judged", "oracle = within"),
                                                          ("relation", "not judged", "invariant_under alone")]
    assert all(m.contract == "contracts.toml line 4" and m.detail for m in out)


def test_measured_rules_and_tasks_nothing_judges_give_none() -> None:
    taken = [Measure(kind="oracle", tensor="y", verdict="bit-identical", **KEY),
             Measure(kind="relation", tensor="y", relation="alone", verdict="bit-identical", **KEY)]
    assert missing_measures(REC, LINE, taken, oracle="oracle.lstm", oracle_takes_case=True,
                            relations_possible=["alone"]) == []
    assert missing_measures(REC, LINE, [], oracle_takes_case=False) == []  # the oracle has no semantics for it
    assert missing_measures(REC, None, []) == [] and missing_measures(REC, LINE, [], bad=True) == []
    assert missing_measures(REC, LINE, [], role="oracle", oracle_takes_case=True) == []
