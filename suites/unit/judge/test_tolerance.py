"""harness.judge.tolerance: the tolerance tables, and compare_oracle against the float64 oracle (within and beyond
tolerance, ULP in the subject's dtype, NaN and infinities, relative error at zero, caller tolerances, integers,
empty arrays, shape mismatches, the finite-only path), and assert_within_oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.errors import ComparisonFailure
from harness.judge.bits import ULP_MAX
from harness.judge.tolerance import TOLERANCES, OracleError, assert_within_oracle, compare_oracle, gradient_tolerance

# --------------------------------------------------------------------------- tolerances


def test_tolerance_tables():
    src = "torch.testing.assert_close defaults"
    assert TOLERANCES == {"float16": (1e-5, 1e-3, src), "float32": (1e-5, 1.3e-6, src),
                          "float64": (1e-7, 1e-7, src)}
    assert gradient_tolerance("float32")[:2] == (1e-4, 1e-3)
    assert gradient_tolerance("float16")[:2] == (1e-2, 1e-2)
    assert gradient_tolerance(np.float64)[:2] == (1e-9, 1e-7)
    assert "check_backward" in gradient_tolerance("float32")[2]
    atol, rtol, src100 = gradient_tolerance("float32", n_terms=100)
    assert math.isclose(atol, 1e-3) and rtol == 1e-3 and "sqrt(100)" in src100
    assert gradient_tolerance("float32", n_terms=0)[:2] == (1e-4, 1e-3)
    assert gradient_tolerance("int32")[:2] == (0.0, 0.0)
    with pytest.raises(ValueError):
        gradient_tolerance("U3")


# --------------------------------------------------------------------------- oracle


def test_oracle_within_tolerance():
    e = np.linspace(-2, 2, 12).reshape(3, 4)
    a = (e * (1 + 1e-5)).astype(np.float32)
    r = compare_oracle("grads.W", a, e)
    assert isinstance(r, OracleError)
    assert r.within_tolerance and not r.shape_mismatch and r.n_mismatch == 0
    assert (r.atol, r.rtol) == (1e-4, 1e-3) and "check_backward" in r.tolerance_source
    assert 0 < r.max_abs < 1e-4 and r.max_rel < 1e-4
    assert r.max_abs_index == tuple(int(i) for i in np.unravel_index(
        np.argmax(np.abs(a.astype(np.float64) - e)), e.shape))
    assert r.max_ulp > 0


def test_oracle_beyond_tolerance_and_dossier():
    e = np.arange(12, dtype=np.float64).reshape(3, 4)
    a = e.astype(np.float32)
    a[2, 1] += 0.5
    r = compare_oracle("grads.W", a, e)
    assert not r.within_tolerance and r.n_mismatch == 1
    assert r.max_abs == 0.5 and r.max_abs_index == (2, 1)
    assert math.isclose(r.max_rel, 0.5 / 9) and r.max_rel_index == (2, 1)
    assert r.max_ulp == 2**19  # float32 spacing in [8, 16) is 2**-20; 0.5 / 2**-20
    assert r.max_ulp_index == (2, 1)
    msg = r.message()
    assert msg.startswith("Gradient error against the float64 oracle exceeds tolerance!")
    for piece in ["atol=0.0001", "rtol=0.001", "check_backward", "Mismatched elements: 1 / 12",
                  "Greatest absolute difference: 0.5 at index (2, 1)",
                  "Greatest relative difference:", "Greatest ULP distance (in float32):",
                  "expected (float64 oracle):", "actual (float32):", "9.5",
                  "The failure occurred for item ['grads']['W']"]:
        assert piece in msg, piece


def test_oracle_ulp_is_measured_in_the_subject_dtype():
    e = np.array([0.1, 1 / 3, 2.0 / 7])
    a = e.astype(np.float32)              # correctly rounded: 0 ULP in float32
    r = compare_oracle("x", a, e)
    assert r.max_ulp == 0 and r.max_abs > 0 and r.within_tolerance
    a2 = a.copy()
    a2[1] = np.nextafter(a2[1], np.float32(1))
    assert compare_oracle("x", a2, e).max_ulp == 1


def test_oracle_nan_handling():
    e = np.array([1.0, np.nan, 3.0])
    matched = compare_oracle("x", np.array([1.0, np.nan, 3.0], np.float32), e)
    assert matched.within_tolerance and matched.max_abs == 0.0 and matched.max_ulp == 0
    assert matched.nan_count == 1 and matched.oracle_nan_count == 1
    new_nan = compare_oracle("x", np.array([1.0, np.nan, np.nan], np.float32), e)
    assert not new_nan.within_tolerance and new_nan.n_mismatch == 1
    assert new_nan.max_abs == math.inf and new_nan.max_abs_index == (2,)
    assert new_nan.max_ulp == ULP_MAX and new_nan.nan_count == 2
    assert "NaN vs non-NaN" in new_nan.message()
    lost_nan = compare_oracle("x", np.array([1.0, 2.0, 3.0], np.float32), e)
    assert not lost_nan.within_tolerance and lost_nan.max_abs_index == (1,)


def test_oracle_infinities_must_match_exactly():
    e = np.array([np.inf, -np.inf, 1.0])
    ok = compare_oracle("x", np.array([np.inf, -np.inf, 1.0], np.float32), e)
    assert ok.within_tolerance and ok.max_abs == 0.0 and ok.inf_count == ok.oracle_inf_count == 2
    bad = compare_oracle("x", np.array([3e38, -np.inf, 1.0], np.float32), e)
    assert not bad.within_tolerance and bad.max_abs == math.inf and bad.max_abs_index == (0,)
    flipped = compare_oracle("x", np.array([-np.inf, -np.inf, 1.0], np.float32), e)
    assert not flipped.within_tolerance


def test_oracle_relative_error_at_zero_and_caller_tolerances():
    e = np.array([0.0, 1.0])
    a = np.array([1e-6, 1.0], np.float32)
    r = compare_oracle("x", a, e)
    assert r.within_tolerance and r.max_rel == math.inf and r.max_rel_index == (0,)
    tight = compare_oracle("x", a, e, atol=1e-7, rtol=0.0)
    assert not tight.within_tolerance and tight.tolerance_source == "caller-supplied"
    named = compare_oracle("x", a, e, atol=1e-7, rtol=0.0, source="my table")
    assert named.tolerance_source == "my table" and "my table" in named.message()
    half = compare_oracle("x", a, e, atol=1e-7)
    assert half.rtol == 1e-3 and "caller-supplied atol" in half.tolerance_source
    scaled = compare_oracle("x", a, e, n_terms=16)
    assert math.isclose(scaled.atol, 4e-4)


def test_oracle_integer_empty_and_shape_mismatch():
    ints = compare_oracle("ids", np.array([1, 2, 3], np.int32), np.array([1.0, 2.0, 3.0]))
    assert ints.within_tolerance and ints.max_ulp == 0 and (ints.atol, ints.rtol) == (0.0, 0.0)
    off = compare_oracle("ids", np.array([1, 2, 5], np.int64), np.array([1.0, 2.0, 3.0]))
    assert not off.within_tolerance and off.max_ulp == 2 and off.max_abs == 2.0
    big = compare_oracle("ids", np.array([np.iinfo(np.int64).max], np.int64), np.array([1e300]))
    assert not big.within_tolerance
    empty = compare_oracle("e", np.zeros((0, 3), np.float16), np.zeros((0, 3)))
    assert empty.within_tolerance and empty.max_abs == 0.0 and empty.max_ulp == 0
    assert empty.max_abs_index is None and empty.n_total == 0
    mism = compare_oracle("w", np.zeros((2, 3), np.float32), np.zeros((3, 2)))
    assert mism.shape_mismatch and not mism.within_tolerance and mism.max_abs == math.inf
    assert "The shapes do not match: actual float32(2, 3), expected float64(3, 2)" \
        in mism.message()


def test_oracle_finite_only_path_is_the_full_path():
    # Tensors of finite numbers skip the NaN / infinity / overflow masks: every field must be what the full
    # path gives (values that overflow float16 or float32 on the way, a negative atol, signed zeros included)
    import dataclasses

    from harness.judge import tolerance

    ran = []

    @settings(max_examples=150, deadline=None, derandomize=True, database=None)
    @given(dtype=st.sampled_from(["float16", "float32", "float64", "int32", "bool"]),
           values=st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=24),
           noise=st.floats(-1e-2, 1e-2), atol=st.sampled_from([None, 0.0, -1.0, 1e-6]),
           normwise=st.booleans(), floor=st.sampled_from([None, 1e-3]), signed_zero=st.booleans())
    def run(dtype, values, noise, atol, normwise, floor, signed_zero):
        e = np.array(values)
        if signed_zero:
            e[0] = -0.0
        with np.errstate(over="ignore", invalid="ignore"):
            a = (e * (1 + noise)).astype(dtype) if dtype != "bool" else e != 0
        finite = np.isfinite(a.astype(np.float64))
        a = np.where(finite, a, 0).astype(a.dtype)  # what overflowed becomes 0: the input must be finite
        opts = dict(atol=atol, normwise=normwise, floor=floor)
        fast = compare_oracle("t", a, e, **opts)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(tolerance, "_finite_only", lambda *counts: False)
            full = compare_oracle("t", a, e, **opts)
        assert dataclasses.asdict(fast) == dataclasses.asdict(full)
        ran.append(1)

    run()
    assert len(ran) >= 100, len(ran)


def test_oracle_big_arrays_are_summarized():
    e = np.arange(10_000, dtype=np.float64)
    a = e.astype(np.float32)
    a[-1] = -1
    msg = compare_oracle("big", a, e).message()
    assert "..." in msg and len(msg) < 4000


def test_assert_within_oracle():
    e = np.arange(4, dtype=np.float64)
    assert assert_within_oracle("g", e.astype(np.float32), e).within_tolerance
    with pytest.raises(ComparisonFailure) as exc:
        assert_within_oracle("grads.W", e.astype(np.float32) + 1, e)
    assert isinstance(exc.value, AssertionError)
    assert str(exc.value).startswith("Gradient error against the float64 oracle exceeds")
    assert "['grads']['W']" in str(exc.value)
