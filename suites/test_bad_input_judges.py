"""The judges of bad inputs, known defects and declared accumulation order, as pure functions on records."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.classification import Classification, classify
from harness.judge import task_verdicts, tolerance, verdicts
from harness.judge.contracts import BadInputRule, KnownDefect, load_contracts
from harness.judge.findings import kind_of
from harness.subjects.embed import sequential_grad_W

KEY = {"case_id": "c0", "subject": "s", "device": "cpu", "context": "default"}
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
    exp = task_verdicts.expectation_for([RAISES_FORWARD], None, "s", "cpu")
    assert exp.describe() == "raise IndexError in forward"
    ok = task_verdicts.judge_bad_input(exp, KEY, "error", _err("IndexError", "forward"))
    assert ok.verdict == verdicts.EXPECTED_ERROR
    moved = task_verdicts.judge_bad_input(exp, KEY, "error", _err("IndexError", "backward", y="shape (2, 3) float32"))
    assert moved.verdict == verdicts.BROKEN
    assert moved.detail == ("expected IndexError in forward, forward returned y (shape (2, 3) float32), "
                            "IndexError raised in backward")
    assert "contracts.toml line 7" in moved.contract


def test_outcome_that_differs_run_to_run_is_broken_even_under_any():
    exp = task_verdicts.expectation_for([ANY], None, "s", "cpu")
    assert exp.any_outcome
    assert task_verdicts.judge_bad_input(exp, KEY, "error", _err("IndexError", "forward")).verdict == \
        verdicts.EXPECTED_ERROR
    partial = task_verdicts.judge_bad_input(exp, KEY, "partial", _err("IndexError", "forward"))
    assert partial.verdict == verdicts.BROKEN and "values returned" in partial.detail
    two = task_verdicts.judge_bad_input(exp, KEY, "error", _err("IndexError", "forward"),
                                   errors=[_err("IndexError", "forward"), _err("ValueError", "backward")])
    assert two.verdict == verdicts.BROKEN and "ValueError in backward" in two.detail


def test_no_error_rule_documents_values_and_any_does_not():
    assert task_verdicts.expectation_for([NO_ERROR], None, "s", "cpu").values
    assert not task_verdicts.expectation_for([ANY], None, "s", "cpu").values
    assert not task_verdicts.expectation_for([RAISES_FORWARD], None, "s", "cpu").values


def test_known_defect_wins_over_any_rule_and_is_never_expected_error():
    exp = task_verdicts.expectation_for([ANY], None, "s", "cpu")
    m = task_verdicts.judge_bad_input(exp, KEY, "error", _err("ValueError", "backward"), known=[EMPTY])
    assert m.verdict == verdicts.KNOWN_DEFECT and "example.invalid" in m.detail
    other = task_verdicts.judge_bad_input(exp, KEY, "error", _err("ValueError", "forward"), known=[EMPTY])
    assert other.verdict == verdicts.EXPECTED_ERROR  # not the declared phase: the any rule judges it


def test_valid_input_error_is_known_defect_only_when_every_run_matches_it():
    got = task_verdicts.judge_task(None, KEY, "error", "error", _err("ValueError", "backward"), None, known=[EMPTY])
    assert got.verdict == verdicts.KNOWN_DEFECT and got.rule == "known defect (ValueError in backward)"
    assert task_verdicts.judge_task(None, KEY, "error", "error", _err("ValueError", "forward"), None,
                               known=[EMPTY]).verdict == verdicts.ERROR
    assert task_verdicts.judge_task(None, KEY, "partial", "partial", _err("ValueError", "backward"), None,
                               known=[EMPTY]).verdict == verdicts.ERROR
    assert task_verdicts.judge_task(None, KEY, "error", "error", _err("ValueError", "backward"), None).verdict == \
        verdicts.ERROR


def test_same_outcome_compares_errors_and_digests():
    digests = {"y": ("a", "a", "b")}
    assert task_verdicts.outcome_text("ok", (), digests, [0, 1]).startswith("values ")
    assert task_verdicts.outcome_text("ok", (), digests) == "values that differ run to run"
    assert task_verdicts.outcome_text("ok", (), digests, bits=False) == "values returned"
    assert task_verdicts.outcome_text("error", [_err("IndexError", "forward")], {}) == "IndexError in forward"
    exp = task_verdicts.expectation_for([ANY], None, "s", "cpu")
    same = task_verdicts.judge_same_outcome(exp, KEY, "context", "IndexError in forward", "IndexError in forward", "x")
    differ = task_verdicts.judge_same_outcome(exp, KEY, "context", "IndexError in forward", "values returned", "x")
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
    assert verdicts.judge_order(KEY, "grad.W", ref["grad.W"].copy(), ref, "r", "sequential").verdict == \
        verdicts.BIT_IDENTICAL
    m = verdicts.judge_order(KEY, "grad.W", rev, ref, "r", "sequential")
    assert m.verdict == verdicts.BROKEN and m.kind == "order"
    first = tuple(int(i) for i in np.argwhere(rev != ref["grad.W"])[0])
    assert m.detail.startswith(f"accumulation order differs from the declared one: first differing element at "
                               f"index {first}: ")
    assert verdicts.judge_order(KEY, "grad.W", rev, None, "r", "sequential").verdict == verdicts.NOT_JUDGED
    assert verdicts.judge_order(KEY, "grad.W", None, ref, "r", "sequential").verdict == verdicts.BROKEN


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
    key = {**KEY, "device": "gpu:0"}
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
