"""harness.judge.ulp: the unsigned bit view of an array and the ULP distance, checked on hand-made arrays whose
answer is known in advance (ULP steps made with ``np.nextafter``, signed zeros, NaN payloads, subnormals,
infinities, integer extremes), against an independent ``struct`` reference, and the item paths and batched
non-finite counts the comparator's messages are built from."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.judge import ulp as B
from harness.judge.comparator import compare_pair, message
from harness.judge.ulp import ULP_MAX, bits, item_path, ulp_distance
from suites.unit.judge.known_arrays import FLOATS, UINT_OF, steps


def from_bits(value: int, dtype) -> np.ndarray:
    return np.array([value], dtype=UINT_OF[dtype]).view(dtype)


@pytest.mark.parametrize("dtype, utype", [
    (np.float16, np.uint16), (np.float32, np.uint32), (np.float64, np.uint64),
    (np.int8, np.uint8), (np.int32, np.uint32), (np.int64, np.uint64), (np.bool_, np.uint8),
])
def test_bits_is_a_same_width_unsigned_view(dtype, utype):
    a = np.zeros(5, dtype=dtype)
    v = bits(a)
    assert v.dtype == utype
    assert v.shape == a.shape
    assert np.shares_memory(v, a)


def test_bits_values_and_byte_order():
    assert bits(np.float32(1.0)) == 0x3F800000
    assert bits(np.array([-0.0], np.float64))[0] == 1 << 63
    big = np.array([1.0], dtype=">f4")
    assert bits(big)[0] == 0x3F800000  # native-order view, value independent of storage order


@pytest.mark.parametrize("bad", [np.zeros(2, np.complex128), np.array([object()]),
                                 np.array(["ab"])])
def test_bits_rejects_non_word_dtypes(bad):
    with pytest.raises(TypeError):
        bits(bad)


# --------------------------------------------------------------------------- ULP distance


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("k", [0, 1, 2, 7, 100])
def test_k_nextafter_steps_are_k_ulps(dtype, k):
    for start, toward in [(1.0, 2.0), (1.0, 0.0), (-3.5, -10.0), (1e-3, 1.0)]:
        a = np.array([dtype(start)])
        b = np.array([steps(start, k, toward, dtype)])
        assert ulp_distance(a, b)[0] == k
        assert ulp_distance(b, a)[0] == k


@pytest.mark.parametrize("dtype", FLOATS)
def test_across_zero(dtype):
    lo = np.array([np.nextafter(dtype(0), dtype(-1))])
    hi = np.array([np.nextafter(dtype(0), dtype(1))])
    assert ulp_distance(lo, hi)[0] == 2
    assert ulp_distance(lo, np.zeros(1, dtype))[0] == 1
    assert ulp_distance(np.array([dtype(-1)]), np.array([dtype(1)]))[0] == 2 * int(
        bits(np.array([dtype(1)]))[0])


@pytest.mark.parametrize("dtype", FLOATS)
def test_signed_zeros_are_ulp_0_but_bitwise_different(dtype):
    pz, nz = np.array([0.0], dtype), np.array([-0.0], dtype)
    assert ulp_distance(pz, nz)[0] == 0
    c = compare_pair("z", pz, nz)
    assert not c.bitwise_identical
    assert c.n_diff == 1 and c.max_ulp == 0
    assert c.max_ulp_index == (0,) and c.first_diff_index == (0,)
    assert "only the sign of zero or NaN payload bits differ" in message(c)


@pytest.mark.parametrize("dtype, qnan", [(np.float16, 0x7E00), (np.float32, 0x7FC00000),
                                         (np.float64, 0x7FF8000000000000)])
def test_nan_payloads(dtype, qnan):
    n1, n2 = from_bits(qnan, dtype), from_bits(qnan | 1, dtype)
    assert np.isnan(n1[0]) and np.isnan(n2[0])
    c = compare_pair("n", n1, n2)
    assert not c.bitwise_identical and c.n_diff == 1
    assert c.max_ulp == 0  # both NaN: ULP distance defined as 0
    assert ulp_distance(n1, n2)[0] == 0
    same = compare_pair("n", n1, n1.copy())
    assert same.bitwise_identical and same.nan_count == 1
    neg_nan = from_bits(qnan | (1 << (8 * n1.itemsize - 1)), dtype)
    assert ulp_distance(n1, neg_nan)[0] == 0


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_vs_number_is_maximal(dtype):
    nan, one = np.array([np.nan], dtype), np.array([1.0], dtype)
    assert ulp_distance(nan, one)[0] == ULP_MAX == np.iinfo(np.uint64).max
    assert ulp_distance(one, nan)[0] == ULP_MAX
    c = compare_pair("n", np.array([1.0, 1.0], dtype), np.array([1.0, np.nan], dtype))
    assert c.max_ulp == ULP_MAX and c.max_ulp_index == (1,)
    assert "Greatest ULP distance: NaN vs non-NaN at index (1,)" in message(c)
    # NaN vs inf is still "NaN vs non-NaN", bigger than -inf vs +inf
    inf = np.array([np.inf], dtype)
    assert ulp_distance(nan, inf)[0] > ulp_distance(-inf, inf)[0]


@pytest.mark.parametrize("dtype", FLOATS)
def test_subnormals_and_infinities(dtype):
    info = np.finfo(dtype)
    tiny_sub = np.array([info.smallest_subnormal], dtype)
    zero = np.zeros(1, dtype)
    assert ulp_distance(tiny_sub, zero)[0] == 1
    assert ulp_distance(tiny_sub, -tiny_sub)[0] == 2
    assert ulp_distance(np.array([info.smallest_normal], dtype), zero)[0] == 1 << (info.nmant)
    big, inf = np.array([info.max], dtype), np.array([np.inf], dtype)
    assert ulp_distance(big, inf)[0] == 1
    assert ulp_distance(-inf, inf)[0] == 2 * int(bits(inf)[0])
    assert ulp_distance(inf, inf.copy())[0] == 0


def test_integer_ulp_is_absolute_difference():
    a = np.array([0, 5, -7, 100], np.int32)
    b = np.array([3, 5, 7, -100], np.int32)
    assert ulp_distance(a, b).tolist() == [3, 0, 14, 200]
    assert ulp_distance(a, b).dtype == np.uint64
    i64 = np.iinfo(np.int64)
    extremes = ulp_distance(np.array([i64.min], np.int64), np.array([i64.max], np.int64))
    assert int(extremes[0]) == 2**64 - 1
    i32 = np.iinfo(np.int32)
    assert int(ulp_distance(np.array([i32.max], np.int32),
                            np.array([i32.min], np.int32))[0]) == 2**32 - 1
    assert ulp_distance(np.array([0, 255], np.uint8), np.array([255, 0], np.uint8)).tolist() \
        == [255, 255]
    assert ulp_distance(np.array([True, False]), np.array([False, False])).tolist() == [1, 0]


def test_ulp_distance_keeps_shape_and_rejects_mismatches():
    a = np.ones((2, 3), np.float32)
    assert ulp_distance(a, a).shape == (2, 3)
    assert ulp_distance(np.float32(1), np.float32(1)).shape == ()
    with pytest.raises(TypeError):
        ulp_distance(a, a.astype(np.float64))
    with pytest.raises(ValueError):
        ulp_distance(a, a.T)
    with pytest.raises(TypeError):
        ulp_distance(np.array(["a"]), np.array(["b"]))


def test_complex_ulp_is_the_greater_part():
    a = np.array([1 + 1j], np.complex64)
    b = np.array([np.nextafter(np.float32(1), np.float32(2)) + 1j * steps(1.0, 3, 0.0, np.float32)],
                 np.complex64)
    assert ulp_distance(a, b)[0] == 3


def _ref_key(x: float) -> int:
    u = struct.unpack("<Q", struct.pack("<d", x))[0]
    mag = u & ((1 << 63) - 1)
    return -mag if u >> 63 else mag


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False), st.floats(allow_nan=False))
def test_float64_ulp_matches_an_independent_struct_reference(x, y):
    d = ulp_distance(np.array([x]), np.array([y]))[0]
    assert int(d) == abs(_ref_key(x) - _ref_key(y))
    assert int(d) == int(ulp_distance(np.array([y]), np.array([x]))[0])
    assert (d == 0) == (x == y)


@pytest.mark.parametrize("dtype", FLOATS)
def test_whole_arrays_of_mixed_signs_give_each_elements_own_distance(dtype):
    """Arrays of random bit patterns (both signs, subnormals, infinities and NaNs among them, in one array) give,
    element by element, the distance of Python integers on the sign-magnitude line: an element's sign never
    changes its neighbour's result."""
    width = np.dtype(dtype).itemsize * 8
    rng = np.random.default_rng(width)
    a_bits = rng.integers(0, 2 ** width, 4000, dtype=np.uint64, endpoint=False).astype(UINT_OF[dtype])
    b_bits = a_bits.copy()
    b_bits[::2] = rng.integers(0, 2 ** width, 2000, dtype=np.uint64, endpoint=False).astype(UINT_OF[dtype])
    b_bits[1::4] ^= 1 << (width - 1)  # the same magnitude, the other sign
    a, b = a_bits.view(dtype), b_bits.view(dtype)
    got = ulp_distance(a, b)

    def key(u: int) -> int:
        mag = u & ((1 << (width - 1)) - 1)
        return -mag if u >> (width - 1) else mag

    nan = np.isnan(a) | np.isnan(b)
    want = [0 if np.isnan(x) and np.isnan(y) else ULP_MAX if n else abs(key(int(p)) - key(int(q)))
            for x, y, n, p, q in zip(a, b, nan, a_bits, b_bits)]
    assert got.tolist() == want
    assert (np.isnan(a) & ~np.isnan(b)).any() and (np.signbit(a) != np.signbit(b)).any()


@settings(max_examples=200, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False), st.integers(0, 50),
       st.booleans())
def test_float32_steps_property(x, k, up):
    toward = np.float32(np.inf if up else -np.inf)
    y = steps(x, k, toward, np.float32)
    if not np.isfinite(y):
        return
    assert ulp_distance(np.array([x], np.float32), np.array([y], np.float32))[0] == k


# --------------------------------------------------------------------------- item paths


@pytest.mark.parametrize("name, path", [
    ("grads.W", "['grads']['W']"), ("ys.0", "['ys'][0]"), ("ws.1.7", "['ws'][1][7]"),
    ("x", "['x']"), ("", ""), ("gys.10.a", "['gys'][10]['a']"),
])
def test_item_path(name, path):
    assert item_path(name) == path


def test_the_batched_nonfinite_counts_are_each_arrays_own():
    """nonfinite_counts_all probes the small float arrays of one dtype together: for any mix of dtypes, sizes
    (one past the small-array bound too) and planted NaN/Inf, its counts are each array's own."""
    ran = []

    @settings(max_examples=120, deadline=None, derandomize=True, database=None)
    @given(st.lists(st.tuples(st.sampled_from(["float16", "float32", "float64", "int32", "bool", "complex64"]),
                              st.sampled_from([0, 1, 7, 300, B.SMALL_BYTES // 4 + 1]),
                              st.lists(st.sampled_from([math.nan, math.inf, -math.inf]), max_size=3)),
                    min_size=1, max_size=8))
    def run(specs):
        arrays = []
        for k, (dtype, n, planted) in enumerate(specs):
            a = np.random.default_rng(k).standard_normal(n).astype(dtype)
            if a.dtype.kind in "fc" and n:
                for j, v in enumerate(planted):
                    a[(j * 7919) % n] = v
            arrays.append(a.reshape(-1, 1) if n % 2 else a)
        assert B.nonfinite_counts_all(arrays) == [B.nonfinite_counts(a) for a in arrays]
        ran.append(any(c != (0, 0) for c in B.nonfinite_counts_all(arrays)))

    run()
    assert len(ran) >= 100 and 0 < sum(ran) < len(ran), (len(ran), sum(ran))  # both answers were checked


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64"])
@pytest.mark.parametrize("planted", [(), (math.nan,), (math.inf,), (-math.inf, math.nan, math.nan)])
def test_counts_of_a_large_array_are_exact_whatever_its_values(dtype, planted):
    """Above the small-array bound the counts start from a probe: finite values far beyond a sum of squares'
    range, a NaN, an infinity of either sign, a strided view all give the exact counts."""
    n = B.SMALL_BYTES // 2 + 3
    a = (np.random.default_rng(1).standard_normal(n) * (1e4 if dtype == "float16" else 1e30)).astype(dtype)
    for j, v in enumerate(planted):
        a[(j * 7919) % n] = v
    exact = (int(np.count_nonzero(np.isnan(a))), int(np.count_nonzero(np.isinf(a))))
    assert B.nonfinite_counts(a) == exact
    assert exact == (0, 0) or sum(exact) == len(planted)
    strided = a[::2]
    assert B.nonfinite_counts(strided) == (int(np.count_nonzero(np.isnan(strided))),
                                           int(np.count_nonzero(np.isinf(strided))))
