"""Unit tests of the pure judges (harness/judge/verdicts.py): each verdict from hand-made measures and arrays,
with the contract that requires it and the one that does not."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.records import VERDICT_ORDER, TensorComparison, Verdict
from harness.judge import task_verdicts as T
from harness.judge import verdicts as V
from harness.judge import violations as W
from harness.judge.contracts import Contract
from harness.judge.tolerance import Tolerance, compare_oracle

KEY = {"case_id": "c", "subject": "s", "device": "cpu", "context": "default"}


def _contract(**kw) -> Contract:
    base = dict(subject="s", device="cpu", context="*", reproducible=True, across_processes=True,
                identical_across=("blas1",), oracle="within", tolerance={}, reason="test", line=7,
                invariant_under=("alone",), source="mine.toml")
    base.update(kw)
    return Contract(**base)


def _stats(identical: bool) -> TensorComparison:
    return TensorComparison(name="y", dtype="float32", shape=(2,), repeats=3, bitwise_identical=identical,
                            n_diff=0 if identical else 1, n_total=2, frac_diff=0.0 if identical else 0.5,
                            max_ulp=0 if identical else 4, max_ulp_index=None if identical else (1,),
                            first_diff_index=None if identical else (1,), n_unique=1 if identical else 2,
                            digests=("xxh3_128:" + "0" * 32,), nan_count=0, inf_count=0, shape_mismatch=False,
                            worst_values=None if identical else ("1.0 (0x3f800000)", "1.0000005"))


def test_worst_orders_every_verdict_and_skips_only_when_all_skipped():
    assert [v.value for v in Verdict] == sorted(VERDICT_ORDER, key=VERDICT_ORDER.get)
    assert V.worst(["bit-identical", "broken", "within tolerance"]) == "broken"
    assert V.worst(["skipped", "bit-identical"]) == "bit-identical"
    assert V.worst(["skipped", "skipped"]) == "skipped" and V.worst([]) == ""
    assert V.worst(["known defect", "not judged"]) == "not judged"
    assert Verdict.NOT_JUDGED.fails and Verdict.BROKEN.fails and not Verdict.KNOWN_DEFECT.fails


def test_repeats_pool_and_fresh_against_reproducible_and_across_processes():
    d = ["a", "a", "a", "b"]
    procs = ["pool", "pool", "pool", "fresh:0"]
    ms = V.judge_repeats(_contract(), KEY, "y", _stats(False), d, procs)
    by = {m.kind: m for m in ms}
    assert by["repeat"].verdict == V.BIT_IDENTICAL and by["repeat"].repeats == 3
    assert by["process"].verdict == V.BROKEN and by["process"].n_unique == 2
    assert "mine.toml line 7" in by["process"].contract
    lax = V.judge_repeats(_contract(reproducible=False, across_processes=False), KEY, "y", _stats(False),
                          ["a", "b", "a"], ["pool"] * 3)
    assert lax[0].verdict == V.ALLOWED and lax[0].actual.startswith("1.0")
    none = V.judge_repeats(None, KEY, "y", _stats(False), ["a", "b"], ["pool"] * 2)
    assert none[0].verdict == V.BROKEN and none[0].rule == V.NO_CONTRACT
    bad_input = V.judge_repeats(_contract(), KEY, "y", _stats(False), ["a", "b"], ["pool"] * 2, judged=False)
    assert bad_input[0].verdict == V.ALLOWED


@pytest.mark.parametrize("kind,other,relation,required", [
    ("context", "blas1", "", True), ("context", "blas2", "", False), ("relation", "alone:seq0", "alone", True),
    ("relation", "order:rev", "order", False), ("device", "cpu", "", False), ("baseline", "baseline", "", True)])
def test_pairs_identical_differing_and_missing(kind, other, relation, required):
    a = np.array([1.0, 2.0], np.float32)
    b = np.array([1.0, np.nextafter(np.float32(2.0), np.float32(3.0))], np.float32)
    same = V.judge_pair(kind, _contract(), KEY, "y", a, a.copy(), other, relation=relation)
    assert same.identical and same.verdict == V.BIT_IDENTICAL
    diff = V.judge_pair(kind, _contract(), KEY, "y", a, b, other, relation=relation)
    assert diff.identical is False and diff.max_ulp == 1 and diff.max_ulp_index == (1,)
    assert diff.verdict == (V.BROKEN if required else V.ALLOWED)
    gone = V.judge_pair(kind, _contract(), KEY, "y", a, None, other, relation=relation)
    assert gone.identical is False and "missing" in gone.detail


def test_oracle_within_beyond_and_record_only():
    exp = np.array([1.0, 2.0])
    tol = Tolerance(1e-4, 1e-3, "test", ())
    close = compare_oracle("y", np.float32(exp), exp, atol=1e-4, rtol=1e-3)
    far = compare_oracle("y", np.float32(exp * 1.1), exp, atol=1e-4, rtol=1e-3)
    assert V.judge_oracle(_contract(), KEY, "y", close, tol, "oracle.x").verdict == V.WITHIN
    m = V.judge_oracle(_contract(), KEY, "y", far, tol, "oracle.x")
    assert m.verdict == V.BROKEN and m.error_ratio > 1 and m.within is False
    assert V.judge_oracle(_contract(oracle="record"), KEY, "y", far, tol, "oracle.x").verdict == V.ALLOWED


def test_task_level_verdicts():
    assert T.judge_task(_contract(), KEY, "skipped", "skipped", None, "no GPU").verdict == V.SKIPPED
    err = T.judge_task(_contract(), KEY, "error", "error", {"type": "ValueError", "phase": "backward",
                                                            "message": "m"}, None)
    assert err.verdict == V.ERROR and err.actual == "ValueError in backward: m"
    assert T.judge_task(None, KEY, "ok", "ok", None, None).rule == V.NO_CONTRACT
    assert T.judge_task(_contract(), KEY, "ok", "ok", None, None) is None


def test_assert_no_violations_raises_only_what_it_is_given():
    from harness.core.errors import ContractViolation

    W.assert_no_violations([])
    m = V.judge_pair("context", _contract(), KEY, "y", np.zeros(2, np.float32), np.ones(2, np.float32), "blas1")
    with pytest.raises(ContractViolation, match="identical_across"):
        W.assert_no_violations(W.violations([m]))
