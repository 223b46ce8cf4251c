"""Finding kinds as a type: the policy each member carries, that the policy agrees with what the judge and the
classification decide, and that the stored texts (findings.json, findings.csv, printed ``--kind``) read back
into the same members."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import pathlib

import pytest

from harness.core.classification import classify, fails_gate
from harness.core.records import MEASURE_KINDS, VERDICTS, Measure
from harness.judge import findings as F
from harness.judge.finding_kinds import FindingKind, finding_kind, kind_of

K = FindingKind
#: A finding report written before the kinds were a type (the committed GPU report's).
OLD_REPORT = pathlib.Path(__file__).resolve().parents[3] / "reports" / "gpu" / "h200-20261204"


def test_the_policy_table_says_which_kinds_fail_the_gate_which_never_do_and_which_the_contract_decides():
    assert {k for k in K if k.fails is True} == {K.ORDER, K.ERROR, K.NOT_JUDGED, K.BAD_INPUT, K.NO_CONTRACT,
                                                  K.GATE_CHECK}
    assert {k for k in K if k.fails is False} == {K.KNOWN_DEFECT, K.EXPECTED_ERROR}
    assert {k for k in K if k.fails is None} == {K.REPEAT, K.PROCESS, K.ORACLE, K.CONTEXT, K.DEVICE, K.BASELINE,
                                                 K.RELATION, K.TRAJECTORY}


def test_the_policy_table_says_which_kinds_no_smaller_case_can_show_and_what_leaves_for_upstream():
    assert {k.value for k in K if not k.shrinkable} == {"baseline changed", "expected error", "not judged",
                                                         "no contract line", "gate check failed"}
    assert {k.value for k in K if k.export == "none"} == {"not judged", "no contract line", "gate check failed"}
    assert {k for k in K if k.export == "note"} == {K.EXPECTED_ERROR}
    assert {k for k in K if k.localizable} == {K.REPEAT, K.PROCESS, K.CONTEXT, K.DEVICE, K.RELATION, K.TRAJECTORY}
    assert {k for k in K if k.paired} == {K.CONTEXT, K.DEVICE, K.TRAJECTORY}
    # a check of the harness itself exports to no script; every other kind to exactly one check (a trajectory's is
    # its two contexts', step by step)
    assert {k for k in K if not k.check} == {K.NOT_JUDGED, K.NO_CONTRACT, K.GATE_CHECK}
    assert K.TRAJECTORY.check == "contexts"


def test_the_headline_order_is_the_order_of_the_members():
    assert [k.rank for k in K] == list(range(len(K)))
    assert list(K)[:3] == [K.REPEAT, K.PROCESS, K.ORACLE] and list(K)[-2:] == [K.KNOWN_DEFECT, K.EXPECTED_ERROR]


#: The verdicts each judge of :mod:`harness.judge.verdicts` gives (a task's measure: any).
GIVEN = {"oracle": ("within tolerance", "known defect", "diverged as allowed", "broken", "not judged"),
         "order": ("bit-identical", "broken", "not judged")}
PAIRS = ("bit-identical", "diverged as allowed", "broken", "not judged")  # run to run, processes, pairs


def _measures():
    """Every measure kind x the verdicts its judge gives x comparison outcome x the rules that change a task's
    kind."""
    for kind, verdict, same in itertools.product(MEASURE_KINDS, VERDICTS, (True, False, None)):
        if verdict not in (VERDICTS if kind == "task" else GIVEN.get(kind, PAIRS)) or \
                (verdict in ("bit-identical", "within tolerance") and same is False):
            continue
        rules = ("bad input must: raise IndexError", "no contract", "the positive control must diverge") \
            if kind == "task" else ("r",)
        for rule, actual in itertools.product(rules, ("IndexError in forward: x", "no error")):
            yield Measure(kind=kind, case_id="c", subject="s", device="cpu", context="default", tensor="y",
                          identical=same, within=same, verdict=verdict, rule=rule, actual=actual,
                          detail="why" if verdict in ("skipped", "not judged") else "")


def test_the_gate_policy_of_each_kind_is_what_the_judge_and_the_one_gate_rule_decide_for_its_measures():
    seen: dict[FindingKind, set[bool]] = {}
    for m in _measures():
        k = kind_of(m)
        if k is None:
            assert not fails_gate(m.verdict), m  # whatever fails the gate is a finding
            continue
        assert isinstance(k, FindingKind) and k.measure_kind in (m.kind, "task")
        seen.setdefault(k, set()).add(fails_gate(m.verdict))
        for role in ("subject", "control"):
            assert classify(m.verdict, role).fails == fails_gate(m.verdict)  # a role never changes the rule
    assert set(seen) == set(K)
    for k, outcomes in seen.items():
        want = {True, False} if k.fails is None else {k.fails}
        assert outcomes == want, (k, outcomes)


def test_a_member_is_its_stored_text_in_json_csv_and_printed_commands():
    for k in K:
        assert FindingKind(k.value) is k and k == k.value and str(k) == k.value and f"{k}" == k.value
        assert json.dumps({"kind": k}) == json.dumps({"kind": k.value})
    with pytest.raises(ValueError, match=r"kind='nonsense' is not a finding kind \(not reproducible run to run"):
        finding_kind("nonsense")


def test_an_old_findings_file_reads_into_members_and_writes_back_the_same_kind_texts():
    text = (OLD_REPORT / "findings.json").read_text()
    stored = [d["kind"] for d in json.loads(text)]
    found = F.loads(text)
    assert all(isinstance(f.kind, FindingKind) for f in found)
    assert [f.kind.value for f in found] == stored
    assert [d["kind"] for d in json.loads(F.dumps(found))] == stored
    with open(OLD_REPORT / "findings.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and {finding_kind(r["kind"]) for r in rows} <= set(K)


def test_a_finding_built_from_a_kinds_text_holds_the_member_and_refuses_an_unknown_one():
    f = F.loads((OLD_REPORT / "findings.json").read_text())[0]
    again = dataclasses.replace(f, kind="cross-device difference")
    assert again.kind is K.DEVICE
    with pytest.raises(ValueError, match="finding kind='no such kind'"):
        dataclasses.replace(f, kind="no such kind")
