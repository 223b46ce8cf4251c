"""harness.judge.verdicts: the tensor judges (repeats, pairs, the oracle, the declared order), the worst of
verdicts, and the violations they make."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.classification import Classification, classify
from harness.core.records import VERDICT_ORDER, TensorComparison, Verdict
from harness.judge import tolerance, verdicts
from harness.judge import verdicts as V
from harness.judge import violations as W
from harness.judge.contracts import Contract, KnownDefect, load_contracts
from harness.judge.finding_kinds import kind_of
from harness.judge.tolerance import Tolerance, compare_oracle
from harness.subjects.embed import sequential_grad_W

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


def test_assert_no_violations_raises_only_what_it_is_given():
    from harness.core.errors import ContractViolation

    W.assert_no_violations([])
    m = V.judge_pair("context", _contract(), KEY, "y", np.zeros(2, np.float32), np.ones(2, np.float32), "blas1")
    with pytest.raises(ContractViolation, match="identical_across"):
        W.assert_no_violations(W.violations([m]))


BAD_KEY = {"case_id": "c0", "subject": "s", "device": "cpu", "context": "default"}


EMPTY = KnownDefect(subjects=("s",), device="cpu", tags=("ids:empty",), error="ValueError", phase="backward",
                    reason="reshape of an empty array", reference="https://example.invalid/1", line=11)


ZEROED_ROW = KnownDefect(subjects=("s",), device="gpu", tags=("edge:ignore:negative_row_used",), error="", phase="",
                         reason="a column zeroed", reference="https://example.invalid/2", line=12, wrong=("grad.W",))


def _collisions(seed: int = 0, n: int = 300, vocab: int = 3, width: int = 4) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    arrays = {"x": rng.integers(0, vocab, n).astype(np.int32), "W": rng.standard_normal((vocab, width)).astype("f"),
              "gy": rng.standard_normal((n, width)).astype("f")}
    return {"ignore_label": None}, arrays


def test_order_judge_names_the_first_differing_element():
    spec, a = _collisions()
    ref = sequential_grad_W(spec, a)
    rev = np.zeros_like(ref["grad.W"])
    for ix, row in reversed(list(zip(a["x"], a["gy"]))):
        rev[ix] += row
    assert not np.array_equal(rev, ref["grad.W"])  # the planted order must change bits here
    assert verdicts.judge_order(BAD_KEY, "grad.W", ref["grad.W"].copy(), ref, "r", "sequential").verdict == \
        verdicts.BIT_IDENTICAL
    m = verdicts.judge_order(BAD_KEY, "grad.W", rev, ref, "r", "sequential")
    assert m.verdict == verdicts.BROKEN and m.kind == "order"
    first = tuple(int(i) for i in np.argwhere(rev != ref["grad.W"])[0])
    assert m.detail.startswith(f"accumulation order differs from the declared one: first differing element at "
                               f"index {first}: ")
    assert verdicts.judge_order(BAD_KEY, "grad.W", rev, None, "r", "sequential").verdict == verdicts.NOT_JUDGED
    assert verdicts.judge_order(BAD_KEY, "grad.W", None, ref, "r", "sequential").verdict == verdicts.BROKEN


def test_known_wrong_values_are_a_known_defect_for_the_declared_tensor_only():
    contract = load_contracts(None).find("espnet.embed_id", "gpu", "default")
    key = {**BAD_KEY, "device": "gpu:0"}
    exact = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    zeroed = exact.astype(np.float32)
    zeroed[2] = 0.0  # the row a negative ignore label names, as ESPnet's GPU backward leaves it
    err, tol = tolerance.judge_oracle(None, "grad.W", zeroed, exact)
    assert not err.within_tolerance

    m = verdicts.judge_oracle(contract, key, "grad.W", err, tol, "oracle.embed", known=[ZEROED_ROW])
    assert m.verdict == verdicts.KNOWN_DEFECT and m.rule == "known defect (grad.W beyond the oracle's tolerance)"
    assert m.contract == "contracts.toml line 12: a column zeroed" and "example.invalid/2" in m.detail
    assert m.max_abs == 6.0 and m.within is False  # the measured error is kept (row 2 is [5, 6])
    assert kind_of(m) == "beyond oracle tolerance" and classify(m.verdict) == Classification.KNOWN_DEFECT
    assert not verdicts.Verdict(m.verdict).fails  # the gate passes on it
    # Another tensor, no declaration, or a crash declaration: the contract's verdict.
    for tensor, known in (("y", [ZEROED_ROW]), ("grad.W", []), ("grad.W", [EMPTY])):
        other = verdicts.judge_oracle(contract, key, tensor, err, tol, "oracle.embed", known=known)
        assert other.verdict == verdicts.BROKEN, (tensor, known)
    right, rtol = tolerance.judge_oracle(None, "grad.W", exact.astype(np.float32), exact)
    ok = verdicts.judge_oracle(contract, key, "grad.W", right, rtol, "oracle.embed", known=[ZEROED_ROW])
    assert ok.verdict == verdicts.WITHIN  # a declaration never hides values that are right
