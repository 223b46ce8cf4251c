"""harness.judge.verdicts.judge_task: a task refused by what its case will cost is "not judged" (a finding that
fails the gate, saying what the case needs), while a device absent here is "skipped"."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.cases import Case
from harness.core.cost import over_limit
from harness.core.records import VERDICT_ORDER, TensorStats, Verdict
from harness.judge import tolerance, verdicts
from harness.judge import verdicts as V
from harness.judge.contracts import BadInputRule, Contract, KnownDefect, load_contracts
from harness.judge.findings import Classification, classify, kind_of
from harness.judge.tolerance import Tolerance, compare_oracle
from harness.judge.verdicts import NOT_JUDGED, SKIPPED, judge_task
from harness.subjects.embed import sequential_grad_W

LSTM_KEY = {"case_id": "c", "subject": "chainer.NStepLSTM", "device": "cpu", "context": "default"}


def test_a_case_over_the_memory_limit_is_not_judged_and_says_what_it_needs():
    case = Case("lstm", 0, {"n_layers": 1, "in_size": 4, "hidden": 8, "lengths": [1_000_000]})
    reason = over_limit(case, explicit=1 << 30)
    assert reason is not None
    m = judge_task(None, LSTM_KEY, "skipped", "skipped", None, reason)
    assert m.verdict == NOT_JUDGED and "needs about" in m.detail and "GiB" in m.detail


def test_an_absent_device_stays_a_skip():
    m = judge_task(None, {**LSTM_KEY, "device": "gpu:0"}, "skipped", "skipped", None, "no GPU: nvidia-smi not found")
    assert m.verdict == SKIPPED


# Unit tests of the pure judges (harness/judge/verdicts.py): each verdict from hand-made measures and arrays,
# with the contract that requires it and the one that does not.

KEY = {"case_id": "c", "subject": "s", "device": "cpu", "context": "default"}


def _contract(**kw) -> Contract:
    base = dict(subject="s", device="cpu", context="*", reproducible=True, across_processes=True,
                identical_across=("blas1",), oracle="within", tolerance={}, reason="test", line=7,
                invariant_under=("alone",), source="mine.toml")
    base.update(kw)
    return Contract(**base)


def _stats(identical: bool) -> TensorStats:
    return TensorStats(dtype="float32", shape=(2,), repeats=3, bitwise_identical=identical, n_diff=0 if identical
                       else 1, n_total=2, frac_diff=0.0 if identical else 0.5, max_ulp=0 if identical else 4,
                       max_ulp_index=None if identical else (1,), first_diff_index=None if identical else (1,),
                       n_unique=1 if identical else 2, digest="xxh3_128:" + "0" * 32, nan_count=0, inf_count=0,
                       shape_mismatch=False, worst_values=None if identical else ("1.0 (0x3f800000)", "1.0000005"))


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
    assert V.judge_task(_contract(), KEY, "skipped", "skipped", None, "no GPU").verdict == V.SKIPPED
    err = V.judge_task(_contract(), KEY, "error", "error", {"type": "ValueError", "phase": "backward",
                                                            "message": "m"}, None)
    assert err.verdict == V.ERROR and err.actual == "ValueError in backward: m"
    assert V.judge_task(None, KEY, "ok", "ok", None, None).rule == V.NO_CONTRACT
    assert V.judge_task(_contract(), KEY, "ok", "ok", None, None) is None


def test_assert_no_violations_raises_only_what_it_is_given():
    from harness.core.errors import ContractViolation

    V.assert_no_violations([])
    m = V.judge_pair("context", _contract(), KEY, "y", np.zeros(2, np.float32), np.ones(2, np.float32), "blas1")
    with pytest.raises(ContractViolation, match="identical_across"):
        V.assert_no_violations(V.violations([m]))


# The judges of bad inputs, known defects and declared accumulation order, as pure functions on records.

BAD_KEY = {"case_id": "c0", "subject": "s", "device": "cpu", "context": "default"}
RAISES_FORWARD = BadInputRule(tag="bad:id_out_of_range_high", subjects=("s",), device="cpu", outcome="raises",
                              errors=("IndexError",), reason="ids >= vocab", line=7, phase="forward")
ANY = BadInputRule(tag="bad:zero_length", subjects=("*",), device="*", outcome="any", errors=(), reason="r", line=9)
NO_ERROR = BadInputRule(tag="bad:id_out_of_range_negative", subjects=("s",), device="cpu", outcome="no_error",
                        errors=(), reason="wraps", line=8)
EMPTY = KnownDefect(subjects=("s",), device="cpu", tags=("ids:empty",), error="ValueError", phase="backward",
                    reason="reshape of an empty array", reference="https://example.invalid/1", line=11)
ZEROED_ROW = KnownDefect(subjects=("s",), device="gpu", tags=("edge:ignore:negative_row_used",), error="", phase="",
                         reason="a column zeroed", reference="https://example.invalid/2", line=12, wrong=("grad.W",))


def _err(type_: str, phase: str, **returned: str) -> dict:
    return {"type": type_, "phase": phase, "message": "m", **({"returned": returned} if returned else {})}


def test_error_in_its_phase_is_expected_and_a_moved_one_is_broken_with_what_the_forward_returned():
    exp = verdicts.expectation_for([RAISES_FORWARD], None, "s", "cpu")
    assert exp.describe() == "raise IndexError in forward"
    ok = verdicts.judge_bad_input(exp, BAD_KEY, "error", _err("IndexError", "forward"))
    assert ok.verdict == verdicts.EXPECTED_ERROR
    moved = verdicts.judge_bad_input(exp, BAD_KEY, "error", _err("IndexError", "backward", y="shape (2, 3) float32"))
    assert moved.verdict == verdicts.BROKEN
    assert moved.detail == ("expected IndexError in forward, forward returned y (shape (2, 3) float32), "
                            "IndexError raised in backward")
    assert "contracts.toml line 7" in moved.contract


def test_outcome_that_differs_run_to_run_is_broken_even_under_any():
    exp = verdicts.expectation_for([ANY], None, "s", "cpu")
    assert exp.any_outcome
    assert verdicts.judge_bad_input(exp, BAD_KEY, "error", _err("IndexError", "forward")).verdict == \
        verdicts.EXPECTED_ERROR
    partial = verdicts.judge_bad_input(exp, BAD_KEY, "partial", _err("IndexError", "forward"))
    assert partial.verdict == verdicts.BROKEN and "values returned" in partial.detail
    two = verdicts.judge_bad_input(exp, BAD_KEY, "error", _err("IndexError", "forward"),
                                   errors=[_err("IndexError", "forward"), _err("ValueError", "backward")])
    assert two.verdict == verdicts.BROKEN and "ValueError in backward" in two.detail


def test_no_error_rule_documents_values_and_any_does_not():
    assert verdicts.expectation_for([NO_ERROR], None, "s", "cpu").values
    assert not verdicts.expectation_for([ANY], None, "s", "cpu").values
    assert not verdicts.expectation_for([RAISES_FORWARD], None, "s", "cpu").values


def test_known_defect_wins_over_any_rule_and_is_never_expected_error():
    exp = verdicts.expectation_for([ANY], None, "s", "cpu")
    m = verdicts.judge_bad_input(exp, BAD_KEY, "error", _err("ValueError", "backward"), known=[EMPTY])
    assert m.verdict == verdicts.KNOWN_DEFECT and "example.invalid" in m.detail
    other = verdicts.judge_bad_input(exp, BAD_KEY, "error", _err("ValueError", "forward"), known=[EMPTY])
    assert other.verdict == verdicts.EXPECTED_ERROR  # not the declared phase: the any rule judges it


def test_valid_input_error_is_known_defect_only_when_every_run_matches_it():
    got = verdicts.judge_task(None, BAD_KEY, "error", "error", _err("ValueError", "backward"), None, known=[EMPTY])
    assert got.verdict == verdicts.KNOWN_DEFECT and got.rule == "known defect (ValueError in backward)"
    assert verdicts.judge_task(None, BAD_KEY, "error", "error", _err("ValueError", "forward"), None,
                               known=[EMPTY]).verdict == verdicts.ERROR
    assert verdicts.judge_task(None, BAD_KEY, "partial", "partial", _err("ValueError", "backward"), None,
                               known=[EMPTY]).verdict == verdicts.ERROR
    assert verdicts.judge_task(None, BAD_KEY, "error", "error", _err("ValueError", "backward"), None).verdict == \
        verdicts.ERROR


def test_same_outcome_compares_errors_and_digests():
    digests = {"y": ("a", "a", "b")}
    assert verdicts.outcome_text("ok", (), digests, [0, 1]).startswith("values ")
    assert verdicts.outcome_text("ok", (), digests) == "values that differ run to run"
    assert verdicts.outcome_text("ok", (), digests, bits=False) == "values returned"
    assert verdicts.outcome_text("error", [_err("IndexError", "forward")], {}) == "IndexError in forward"
    exp = verdicts.expectation_for([ANY], None, "s", "cpu")
    same = verdicts.judge_same_outcome(exp, BAD_KEY, "context", "IndexError in forward", "IndexError in forward", "x")
    differ = verdicts.judge_same_outcome(exp, BAD_KEY, "context", "IndexError in forward", "values returned", "x")
    assert same.verdict == verdicts.BIT_IDENTICAL and differ.verdict == verdicts.BROKEN


def _collisions(seed: int = 0, n: int = 300, vocab: int = 3, width: int = 4) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    arrays = {"x": rng.integers(0, vocab, n).astype(np.int32), "W": rng.standard_normal((vocab, width)).astype("f"),
              "gy": rng.standard_normal((n, width)).astype("f")}
    return {"ignore_label": None}, arrays


def test_sequential_reference_is_chainer_cpu_backward_bit_for_bit():
    from harness.core.compat import import_chainer

    chainer = import_chainer()
    spec, a = _collisions()
    W = chainer.Variable(a["W"].copy())
    y = chainer.functions.embed_id(a["x"], W)
    y.grad = a["gy"]
    y.backward()
    ref = sequential_grad_W(spec, a)["grad.W"]
    assert ref.dtype == np.float32 and np.array_equal(ref.view(np.uint32), W.grad.view(np.uint32))


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


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_sequential_reference_sums_in_the_subjects_dtype(dtype):
    spec, a = _collisions(seed=1)
    a = {**a, "W": a["W"].astype(dtype), "gy": a["gy"].astype(dtype)}
    ref = sequential_grad_W(spec, a)["grad.W"]
    assert ref.dtype == np.dtype(dtype)
    acc = np.zeros_like(ref)
    for ix, row in zip(a["x"], a["gy"]):
        acc[ix] = acc[ix] + row
    assert np.array_equal(acc, ref)


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
    assert kind_of(m) == "beyond oracle tolerance" and classify(m) == Classification.KNOWN_DEFECT
    assert not verdicts.Verdict(m.verdict).fails  # the gate passes on it
    # Another tensor, no declaration, or a crash declaration: the contract's verdict.
    for tensor, known in (("y", [ZEROED_ROW]), ("grad.W", []), ("grad.W", [EMPTY])):
        other = verdicts.judge_oracle(contract, key, tensor, err, tol, "oracle.embed", known=known)
        assert other.verdict == verdicts.BROKEN, (tensor, known)
    right, rtol = tolerance.judge_oracle(None, "grad.W", exact.astype(np.float32), exact)
    ok = verdicts.judge_oracle(contract, key, "grad.W", right, rtol, "oracle.embed", known=[ZEROED_ROW])
    assert ok.verdict == verdicts.WITHIN  # a declaration never hides values that are right
