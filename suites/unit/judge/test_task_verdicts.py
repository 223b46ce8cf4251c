"""harness.judge.task_verdicts: a task's verdict (a case refused by its cost is "not judged", an absent device
"skipped"), bad inputs judged by their rules and phases, known defects, the same outcome across runs; and the
sequential reference the order rule compares with."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.cases import Case
from harness.core.cost import over_limit
from harness.judge import task_verdicts, verdicts
from harness.judge import task_verdicts as T
from harness.judge import verdicts as V
from harness.judge.contracts import BadInputRule, KnownDefect
from harness.judge.task_verdicts import judge_task
from harness.judge.verdicts import NOT_JUDGED, SKIPPED
from harness.subjects.embed import sequential_grad_W
from suites.unit.judge.test_verdicts import KEY, _contract

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


def test_task_level_verdicts():
    assert T.judge_task(_contract(), KEY, "skipped", "skipped", None, "no GPU").verdict == V.SKIPPED
    err = T.judge_task(_contract(), KEY, "error", "error", {"type": "ValueError", "phase": "backward",
                                                            "message": "m"}, None)
    assert err.verdict == V.ERROR and err.actual == "ValueError in backward: m"
    assert T.judge_task(None, KEY, "ok", "ok", None, None).rule == V.NO_CONTRACT
    assert T.judge_task(_contract(), KEY, "ok", "ok", None, None) is None


BAD_KEY = {"case_id": "c0", "subject": "s", "device": "cpu", "context": "default"}


RAISES_FORWARD = BadInputRule(tag="bad:id_out_of_range_high", subjects=("s",), device="cpu", outcome="raises",
                              errors=("IndexError",), reason="ids >= vocab", line=7, phase="forward")


ANY = BadInputRule(tag="bad:zero_length", subjects=("*",), device="*", outcome="any", errors=(), reason="r", line=9)


NO_ERROR = BadInputRule(tag="bad:id_out_of_range_negative", subjects=("s",), device="cpu", outcome="no_error",
                        errors=(), reason="wraps", line=8)


EMPTY = KnownDefect(subjects=("s",), device="cpu", tags=("ids:empty",), error="ValueError", phase="backward",
                    reason="reshape of an empty array", reference="https://example.invalid/1", line=11)


def _err(type_: str, phase: str, **returned: str) -> dict:
    return {"type": type_, "phase": phase, "message": "m", **({"returned": returned} if returned else {})}


def test_error_in_its_phase_is_expected_and_a_moved_one_is_broken_with_what_the_forward_returned():
    exp = task_verdicts.expectation_for([RAISES_FORWARD], None, "s", "cpu")
    assert exp.describe() == "raise IndexError in forward"
    ok = task_verdicts.judge_bad_input(exp, BAD_KEY, "error", _err("IndexError", "forward"))
    assert ok.verdict == verdicts.EXPECTED_ERROR
    moved = task_verdicts.judge_bad_input(exp, BAD_KEY, "error",
                                          _err("IndexError", "backward", y="shape (2, 3) float32"))
    assert moved.verdict == verdicts.BROKEN
    assert moved.detail == ("expected IndexError in forward, forward returned y (shape (2, 3) float32), "
                            "IndexError raised in backward")
    assert "contracts.toml line 7" in moved.contract


def test_outcome_that_differs_run_to_run_is_broken_even_under_any():
    exp = task_verdicts.expectation_for([ANY], None, "s", "cpu")
    assert exp.any_outcome
    assert task_verdicts.judge_bad_input(exp, BAD_KEY, "error", _err("IndexError", "forward")).verdict == \
        verdicts.EXPECTED_ERROR
    partial = task_verdicts.judge_bad_input(exp, BAD_KEY, "partial", _err("IndexError", "forward"))
    assert partial.verdict == verdicts.BROKEN and "values returned" in partial.detail
    two = task_verdicts.judge_bad_input(exp, BAD_KEY, "error", _err("IndexError", "forward"),
                                   errors=[_err("IndexError", "forward"), _err("ValueError", "backward")])
    assert two.verdict == verdicts.BROKEN and "ValueError in backward" in two.detail


def test_no_error_rule_documents_values_and_any_does_not():
    assert task_verdicts.expectation_for([NO_ERROR], None, "s", "cpu").values
    assert not task_verdicts.expectation_for([ANY], None, "s", "cpu").values
    assert not task_verdicts.expectation_for([RAISES_FORWARD], None, "s", "cpu").values


def test_known_defect_wins_over_any_rule_and_is_never_expected_error():
    exp = task_verdicts.expectation_for([ANY], None, "s", "cpu")
    m = task_verdicts.judge_bad_input(exp, BAD_KEY, "error", _err("ValueError", "backward"), known=[EMPTY])
    assert m.verdict == verdicts.KNOWN_DEFECT and "example.invalid" in m.detail
    other = task_verdicts.judge_bad_input(exp, BAD_KEY, "error", _err("ValueError", "forward"), known=[EMPTY])
    assert other.verdict == verdicts.EXPECTED_ERROR  # not the declared phase: the any rule judges it


def test_valid_input_error_is_known_defect_only_when_every_run_matches_it():
    got = task_verdicts.judge_task(None, BAD_KEY, "error", "error", _err("ValueError", "backward"), None, known=[EMPTY])
    assert got.verdict == verdicts.KNOWN_DEFECT and got.rule == "known defect (ValueError in backward)"
    assert task_verdicts.judge_task(None, BAD_KEY, "error", "error", _err("ValueError", "forward"), None,
                               known=[EMPTY]).verdict == verdicts.ERROR
    assert task_verdicts.judge_task(None, BAD_KEY, "partial", "partial", _err("ValueError", "backward"), None,
                               known=[EMPTY]).verdict == verdicts.ERROR
    assert task_verdicts.judge_task(None, BAD_KEY, "error", "error", _err("ValueError", "backward"), None).verdict == \
        verdicts.ERROR


def test_same_outcome_compares_errors_and_digests():
    digests = {"y": ("a", "a", "b")}
    assert task_verdicts.outcome_text("ok", (), digests, [0, 1]).startswith("values ")
    assert task_verdicts.outcome_text("ok", (), digests) == "values that differ run to run"
    assert task_verdicts.outcome_text("ok", (), digests, bits=False) == "values returned"
    assert task_verdicts.outcome_text("error", [_err("IndexError", "forward")], {}) == "IndexError in forward"
    exp = task_verdicts.expectation_for([ANY], None, "s", "cpu")
    same = task_verdicts.judge_same_outcome(exp, BAD_KEY, "context", "IndexError in forward",
                                            "IndexError in forward", "x")
    differ = task_verdicts.judge_same_outcome(exp, BAD_KEY, "context", "IndexError in forward", "values returned", "x")
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
