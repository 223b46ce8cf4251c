"""harness.judge.tolerance: the tolerance tables, and compare_oracle against the float64 oracle (within and beyond
tolerance, ULP in the subject's dtype, NaN and infinities, relative error at zero, caller tolerances, integers,
empty arrays, shape mismatches, the finite-only path), and assert_within_oracle; compare_oracle's measures, taken
block by block and on the elements that differ from the oracle only, are exactly what the documented definitions
give over the whole array; rounding_bounds' row sums are the sums of the rows in the order of the ids."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.errors import ComparisonFailure
from harness.judge import oracle_blocks as blocks
from harness.judge.tolerance import (
    TOLERANCES,
    OracleError,
    assert_within_oracle,
    compare_oracle,
    gradient_tolerance,
    rounding_bounds,
)
from harness.judge.ulp import ULP_MAX, ulp_distance, unravel, value_text

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


# --------------------------------------------------------------------------- block by block, against the definitions

# Values that take the special paths: NaN, both infinities, signed zeros, float64 / float32 / float16
# subnormals, the edges of float16 and float32 (and beyond them), and ordinary numbers.
SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-45, -1.4e-45,
           6e-8, 6.1e-5, 65504.0, 65520.0, 70000.0, -70000.0, 3.4028234663852886e38, 3.5e38, 1e300, 1.0, -1.0,
           1 / 3, 2.5, -7.0]
VALUES = st.one_of(st.sampled_from(SPECIAL), st.floats(-4, 4), st.floats(allow_nan=True, allow_infinity=True))
SHAPES = [(), (0,), (0, 3), (1,), (2,), (7,), (3, 5), (2, 3, 4), (41,)]
MEASURED = ["max_abs", "max_abs_index", "max_rel", "max_rel_index", "max_ulp", "max_ulp_index", "error_ratio",
            "error_ratio_index", "actual_at", "expected_at", "allowed_at", "n_mismatch", "within_tolerance"]


def _cast(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` in ``dtype`` (integers: rounded, clipped, 0 where not finite)."""
    dt = np.dtype(dtype)
    with np.errstate(all="ignore"):
        if dt.kind == "f":
            return values.astype(dt)
        if dt.kind == "b":
            return np.where(np.isfinite(values), values != 0, False)
        info = np.iinfo(dt)
        return np.clip(np.rint(np.where(np.isfinite(values), values, 0.0)), info.min, info.max).astype(dt)


def _definition(a: np.ndarray, e: np.ndarray, atol: float, rtol: float, bound: np.ndarray | None, normwise: bool,
                floor: float | None) -> dict[str, object]:
    """The measured fields of OracleError from its documented definitions, over the whole array at once."""
    if a.size == 0:
        return dict(max_abs=0.0, max_abs_index=None, max_rel=0.0, max_rel_index=None, max_ulp=0,
                    max_ulp_index=None, error_ratio=0.0, error_ratio_index=None, actual_at="", expected_at="",
                    allowed_at=0.0, n_mismatch=0, within_tolerance=True)
    dt, shape = a.dtype, a.shape
    a, e = a.reshape(-1), e.reshape(-1).astype(np.float64)
    a64 = a.astype(np.float64)
    with np.errstate(all="ignore"):
        if dt.kind == "f" and dt.itemsize < 8:
            # an exact value beyond the dtype's range is an infinity there: a subject's equal infinity is exact
            rounded = e.astype(dt).astype(np.float64)
            e = np.where(np.isinf(rounded) & np.isfinite(e) & (a64 == rounded), a64, e)
        same = (a64 == e) | (np.isnan(a64) & np.isnan(e))
        finite = np.isfinite(a64) & np.isfinite(e)
        diff = np.abs(a64 - e)
        err = np.where(same, 0.0, np.where(np.isnan(diff), np.inf, diff))  # NaN against a number: inf
        allowed = atol + rtol * np.abs(e)
        if bound is not None and bound.shape == shape:
            allowed = np.maximum(allowed, bound.reshape(-1).astype(np.float64))
        if normwise and np.isfinite(e).any():
            allowed = np.maximum(allowed, rtol * float(np.abs(e[np.isfinite(e)]).max()))
        if floor:
            allowed = np.maximum(allowed, floor)
        ok = same | (finite & (err <= allowed))
        rel = np.where(err == 0, 0.0, err / np.abs(e))
        ratio = np.where(err == 0, 0.0, np.where(~(same | finite), np.inf,
                                                 np.where(allowed > 0, err / allowed, np.inf)))
    if dt.kind == "f":
        with np.errstate(over="ignore"):
            ulp = ulp_distance(a, e.astype(dt))
    else:  # on the integer line, the oracle rounded (True/False for bool); not finite: as far as can be
        target = _cast(e, dt.name).astype(np.int64)
        ulp = np.abs(a.astype(np.int64) - target).astype(np.uint64)
        ulp[~np.isfinite(e)] = ULP_MAX
    ia, ir, iu, iq = (int(np.argmax(v)) for v in (err, rel, ulp, ratio))
    return dict(max_abs=float(err[ia]), max_abs_index=unravel(ia, shape), max_rel=float(rel[ir]),
                max_rel_index=unravel(ir, shape), max_ulp=int(ulp[iu]), max_ulp_index=unravel(iu, shape),
                error_ratio=float(ratio[iq]), error_ratio_index=unravel(iq, shape),
                actual_at=value_text(a.reshape(shape), unravel(iq, shape)), expected_at=repr(float(e[iq])),
                allowed_at=float(allowed[iq]), n_mismatch=int(a.size - np.count_nonzero(ok)),
                within_tolerance=bool(ok.all()))


@st.composite
def _pairs(draw):
    """A subject's result and its oracle: mostly the oracle rounded to the dtype (often an oracle the dtype holds
    exactly, so that they are equal), some a few ULPs off, some unrelated values."""
    dtype = draw(st.sampled_from(["float16", "float32", "float64", "int32", "bool"]))
    shape = draw(st.sampled_from(SHAPES))
    n = math.prod(shape)
    e = np.array(draw(st.lists(VALUES, min_size=n, max_size=n)), dtype=np.float64)
    held = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    if dtype.startswith("float"):
        with np.errstate(all="ignore"):
            e = np.where(held, e.astype(dtype).astype(np.float64), e)
    a = _cast(e, dtype)
    modes = draw(st.lists(st.sampled_from([0, 0, 0, 1, 2]), min_size=n, max_size=n))
    other = _cast(np.array(draw(st.lists(VALUES, min_size=n, max_size=n)), dtype=np.float64), dtype)
    steps = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))
    with np.errstate(over="ignore"):  # a step past the largest finite value is an infinity
        for i, (mode, k) in enumerate(zip(modes, steps)):
            if mode == 1 and dtype.startswith("float"):
                for _ in range(abs(k)):
                    a[i] = np.nextafter(a[i], a.dtype.type(math.copysign(math.inf, k)))
            elif mode == 2:
                a[i] = other[i]
    return a.reshape(shape), e.reshape(shape)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(pair=_pairs(), atol=st.sampled_from([None, 0.0, -1.0, 1e-6, 1e-2]), rtol=st.sampled_from([None, 0.0, 1e-3]),
       bound=st.sampled_from([None, "same", "other"]), bound_value=st.sampled_from([0.0, 1e-3, 5e-324, math.nan,
                                                                                      math.inf]),
       normwise=st.booleans(), floor=st.sampled_from([None, 0.0, 1e-3]),
       block=st.sampled_from([1, 2, 3, 8, blocks.BLOCK]), gather_min=st.sampled_from([0, blocks.GATHER_MIN]),
       gather_below=st.sampled_from([0.0, blocks.GATHER_BELOW, 2.0]))
def test_compare_oracle_is_the_whole_array_definition_for_any_block_size_and_gathering(
        pair, atol, rtol, bound, bound_value, normwise, floor, block, gather_min, gather_below):
    a, e = pair
    b = None if bound is None else np.full(a.shape if bound == "same" else (a.size + 1,), bound_value)
    options = dict(atol=atol, rtol=rtol, bound=b, normwise=normwise, floor=floor, text=False)
    if a.ndim == 0:  # never compared (measure_task skips it): kept so
        with pytest.raises(TypeError, match="0-d"):
            compare_oracle("t", a, e, **options)
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(blocks, "BLOCK", block)
        mp.setattr(blocks, "GATHER_MIN", gather_min)
        mp.setattr(blocks, "GATHER_BELOW", gather_below)
        got = compare_oracle("t", a, e, **options)
    want = _definition(a, e, got.atol, got.rtol, b, normwise, floor)
    assert {k: repr(getattr(got, k)) for k in MEASURED} == {k: repr(v) for k, v in want.items()}


def test_compare_oracle_gathers_a_large_float_tensor_that_mostly_equals_its_oracle():
    # The fast path on a real size: most rows of a gradient untouched (equal), a few rounded and one far off.
    rng = np.random.default_rng(0)
    e = np.zeros((300, 1000))
    e[rng.integers(0, 300, 40)] = rng.standard_normal((40, 1000))
    a = e.astype(np.float32)
    a[17, 3] = np.nextafter(a[17, 3], np.float32(np.inf))
    a[250, 999] = 1.0
    got = compare_oracle("g", a, e, normwise=True, bound=np.full(e.shape, 1e-9), text=False)
    want = _definition(a, e, got.atol, got.rtol, np.full(e.shape, 1e-9), True, None)
    assert {k: repr(getattr(got, k)) for k in MEASURED} == {k: repr(v) for k, v in want.items()}


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(vocab=st.integers(1, 6), width=st.integers(1, 4), batch=st.sampled_from([(0,), (1,), (5,), (3, 4), (2, 9)]),
       data=st.data(), dtype=st.sampled_from(["float16", "float32", "float64"]),
       id_dtype=st.sampled_from(["int32", "int64", "uint8"]), ignore_label=st.sampled_from([None, -1, 0, 2]))
def test_rounding_bounds_sums_each_row_in_the_order_of_its_ids(vocab, width, batch, data, dtype, id_dtype,
                                                              ignore_label):
    n = math.prod(batch)
    low = 0 if id_dtype == "uint8" else -2
    ids = np.array(data.draw(st.lists(st.integers(low, vocab + 1), min_size=n, max_size=n)), dtype=id_dtype)
    gy = np.array(data.draw(st.lists(VALUES, min_size=n * width, max_size=n * width)), dtype=np.float64)
    with np.errstate(all="ignore"):
        gy = gy.astype(dtype).reshape(batch + (width,))
    spec = {"vocab": vocab, "width": width, "ignore_label": ignore_label}
    arrays = {"x": ids.reshape(batch), "gy": gy}
    if n == 0:  # no ids: gy's rows cannot be told apart (the judge then has no bound)
        with pytest.raises(ValueError):
            rounding_bounds("embed", spec, arrays, dtype)
        return
    # The definition: mass[v] adds the |gy| rows with id v one at a time, in the order of the ids, from 0.0.
    mass, counts = np.zeros((vocab, width)), np.zeros(vocab)
    for v, row in zip(ids.reshape(-1).astype(np.int64), np.abs(gy.astype(np.float64)).reshape(n, width)):
        if 0 <= v < vocab and v != ignore_label:
            mass[v] = mass[v] + row
            counts[v] += 1
    u = float(np.finfo(dtype).eps) / 2
    with np.errstate(all="ignore"):
        want = 2.0 * np.maximum(counts - 1, 0)[:, None] * u * mass
        got = rounding_bounds("embed", spec, arrays, dtype)["grad.W"]
    assert got.dtype == np.float64 and got.shape == (vocab, width)
    assert got.view(np.uint64).tolist() == want.view(np.uint64).tolist()  # the bits, NaN payloads and zero signs


@pytest.mark.parametrize("steps, block", [(1, 1), (2, 3), (5, 64), (64, 4096)])
def test_the_row_sums_of_a_pile_up_add_its_rows_one_after_the_other(monkeypatch, steps, block):
    from harness.judge import tolerance

    monkeypatch.setattr(tolerance, "_STEPS", steps)
    monkeypatch.setattr(tolerance, "_BLOCK", block)
    rng = np.random.default_rng(steps)
    ids = np.where(rng.random(500) < 0.8, 3, rng.integers(0, 9, 500))  # most on one row, the rest spread
    rows = np.abs(rng.standard_normal((500, 3)) * 10.0 ** rng.integers(-8, 8, (500, 1)))
    named, mass = tolerance._row_sums(ids, rows)
    want = np.zeros((9, 3))
    for v, row in zip(ids, rows):  # the definition: one row after the other, in the order of the ids
        want[v] = want[v] + row
    assert named.tolist() == sorted(set(ids.tolist()))
    assert mass.tobytes() == want[named].tobytes()


# The oracle is rounded to the subject's dtype before judging: an exact value beyond float16's range is ``inf``
# there, so a subject's ``inf`` is then correct; a partial sum that overflows while the exact value fits is not.

def test_an_exact_value_beyond_float16s_range_correctly_rounds_to_inf():
    exact = np.array([104078.0, 1.5, -70000.0])
    got = exact.astype(np.float16)  # [inf, 1.5, -inf]: the correctly rounded values
    assert np.isinf(got[0]) and np.isinf(got[2])
    e = compare_oracle("grad.W", got, exact)
    assert e.within_tolerance and e.max_abs == 0.0


def test_a_partial_sum_that_overflows_while_the_total_fits_stays_an_error():
    exact = np.array([60000.0, 1.5])  # fits in float16 (max 65,504)
    got = np.array([np.inf, 1.5], dtype=np.float16)  # e.g. 40000 + 30000 - 10000 summed in float16
    e = compare_oracle("grad.W", got, exact)
    assert not e.within_tolerance and e.max_abs == np.inf


def test_an_inf_of_the_wrong_sign_is_an_error():
    exact = np.array([104078.0])
    got = np.array([-np.inf], dtype=np.float16)
    assert not compare_oracle("grad.W", got, exact).within_tolerance


def test_the_summation_bounds_kept_are_bounded_by_bytes_and_built_once_while_kept(monkeypatch) -> None:
    """A case's bounds are built once while they are kept; beyond BOUND_BYTES the oldest cases' go (the newest
    always stays), so judging case after case of a word LM's size holds one table, not one a case."""
    from harness.core.cases import Case
    from harness.core.kept import ArrayCache
    from harness.judge import tolerance

    built: list[str] = []

    def fake_bounds(family, spec, arrays, dtype):
        built.append(spec["vocab"])
        return {"grad.W": np.zeros((spec["vocab"], spec["width"]))}

    monkeypatch.setattr(tolerance, "rounding_bounds", fake_bounds)
    monkeypatch.setattr(tolerance, "_BOUND_CACHE", ArrayCache())
    monkeypatch.setattr(tolerance, "BOUND_BYTES", 3 * 40 * 8)
    cases = [Case("embed", 1, {"vocab": v, "width": 4, "ids_shape": [3]}) for v in (10, 11, 12, 13)]
    for c in cases + cases[-1:]:
        assert tolerance._bounds(c, "float32")["grad.W"].shape == (c.spec["vocab"], 4)
    assert built == [10, 11, 12, 13]  # the last case judged again: its bound kept, not built again
    assert tolerance._BOUND_CACHE.held <= tolerance.BOUND_BYTES
    assert [k[0] for k in tolerance._BOUND_CACHE] == [c.id for c in cases[-2:]]
    tolerance._bounds(cases[0], "float32")  # gone: built again
    assert built == [10, 11, 12, 13, 10]
