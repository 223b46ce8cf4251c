"""Self-tests of the comparator (harness/compare.py): positive and negative controls.

Every measure is checked on hand-made arrays whose answer is known in advance: ULP steps made
with ``np.nextafter``, signed zeros, NaN payloads, subnormals, infinities, integer extremes,
empty arrays and shape/dtype mismatches; then the properties that must hold for any input.
"""

from __future__ import annotations

import hashlib
import math
import struct
import tracemalloc

import blake3
import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness.core.errors import ComparisonFailure, HarnessError, InvalidArgument
from harness.judge import bits as B
from harness.judge import bitwise as C
from harness.judge import digest as D
from harness.judge.bits import ULP_MAX, bits, item_path, ulp_distance
from harness.judge.bitwise import (
    TensorComparison,
    assert_bit_identical,
    assert_results_identical,
    compare_pair,
    compare_repeats,
    compare_results,
)
from harness.judge.digest import (
    DIGEST_ALGORITHM,
    DIGEST_ALGORITHMS,
    digest,
    digest_algorithm_of,
    digest_all,
    digest_mismatch_reason,
    same_digest,
    short_digest,
)
from harness.judge.tolerance import TOLERANCES, OracleError, assert_within_oracle, compare_oracle, gradient_tolerance

FLOATS = [np.float16, np.float32, np.float64]
UINT_OF = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}


def steps(x, k, toward, dtype):
    """``x`` moved ``k`` representable values toward ``toward`` in ``dtype``."""
    x, toward = dtype(x), dtype(toward)
    with np.errstate(over="ignore"):
        for _ in range(k):
            x = np.nextafter(x, toward)
    return x


def from_bits(value: int, dtype) -> np.ndarray:
    return np.array([value], dtype=UINT_OF[dtype]).view(dtype)


def crafted_3x4() -> tuple[np.ndarray, np.ndarray]:
    """A (3, 4) float32 pair differing at (0, 3) by 1 ULP, (1, 2) by 4 ULP, (2, 0) by 1 ULP."""
    a = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    b = a.copy()
    u = b.view(np.uint32)
    u[0, 3] += 1
    u[1, 2] += 4
    u[2, 0] -= 1
    return a, b


# --------------------------------------------------------------------------- bits / digest


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


def test_digest_pins_the_format():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    payload = b"float32|(2, 3)|" + a.tobytes()
    assert DIGEST_ALGORITHM == "xxh3_128"
    assert digest(a) == "xxh3_128:" + xxhash.xxh3_128(payload).hexdigest()
    assert digest(a, "sha256") == "sha256:" + hashlib.sha256(payload).hexdigest()
    assert digest(a, "blake3") == "blake3:" + blake3.blake3(payload).hexdigest()
    for alg, n_hex in DIGEST_ALGORITHMS.items():
        assert len(digest(a, alg)) == len(alg) + 1 + n_hex


def test_digest_rejects_an_unknown_algorithm():
    with pytest.raises(ValueError, match="algorithm='md5' is not one of"):
        digest(np.zeros(3), "md5")


def test_digest_names_its_algorithm_and_old_sha256_digests_are_recognised():
    a = np.arange(6, dtype=np.float32)
    legacy = hashlib.sha256(b"float32|(6,)|" + a.tobytes()).hexdigest()  # what digest() wrote before
    for alg in DIGEST_ALGORITHMS:
        assert digest_algorithm_of(digest(a, alg)) == alg
    assert digest_algorithm_of(legacy) == "sha256"
    assert same_digest(legacy, digest(a, "sha256"))  # the old form and the prefixed one are one digest
    assert same_digest(digest(a), digest(a.copy()))
    assert not same_digest(digest(a), digest(a + 1))
    for bad in ("missing", "xxh3_128:zz", "sha256:" + "0" * 10, "md5:" + "0" * 32, "", None):
        with pytest.raises(ValueError, match="is not '<algorithm>:<hex>'"):
            digest_algorithm_of(bad)


def test_digests_of_two_algorithms_never_compare_silently():
    a = np.arange(6, dtype=np.float32)
    x, s = digest(a), digest(a, "sha256")
    reason = digest_mismatch_reason(x, s)
    assert reason is not None and "xxh3_128" in reason and "sha256" in reason and "\n" not in reason
    assert digest_mismatch_reason(x, digest(a + 1)) is None
    with pytest.raises(InvalidArgument, match="digests of different algorithms cannot be compared"):
        same_digest(x, s)
    with pytest.raises(InvalidArgument):
        same_digest(s[len("sha256:"):], x)  # a legacy digest against a new one: refused too
    # the missing marker is a plain difference, not a confusion of algorithms
    assert digest_mismatch_reason("missing", x) is None
    assert not same_digest("missing", x) and same_digest("missing", "missing")


def test_short_digest_keeps_the_algorithm():
    d = digest(np.zeros(3))
    assert short_digest(d) == d[: len("xxh3_128:") + 12] and short_digest(d, 4).startswith("xxh3_128:")
    legacy = "ab" * 32
    assert short_digest(legacy, 8) == legacy[:8]


def test_digest_all_matches_digest_and_marks_missing():
    big = np.random.default_rng(1).standard_normal(2 ** 19)  # 4 MiB each: the threaded path
    arrs = [big, None, big + 1, np.zeros(3, np.int8)]
    for alg in DIGEST_ALGORITHMS:
        want = tuple("missing" if a is None else digest(a, alg) for a in arrs)
        assert digest_all(arrs, alg) == want
    assert digest_all([np.zeros(2), None]) == (digest(np.zeros(2)), "missing")


def test_digest_changes_with_dtype_and_shape_even_for_equal_bytes():
    a = np.arange(12, dtype=np.float32)
    as_int = a.view(np.int32)
    assert a.tobytes() == as_int.tobytes()
    assert digest(a) != digest(as_int)
    assert digest(a) != digest(a.reshape(3, 4))
    assert digest(a.reshape(3, 4)) != digest(a.reshape(4, 3))
    assert digest(np.zeros(0, np.float32)) != digest(np.zeros((0, 3), np.float32))


def test_digest_is_layout_and_byte_order_independent():
    a = np.arange(20, dtype=np.float64).reshape(4, 5)
    assert digest(a.T) == digest(np.ascontiguousarray(a.T))
    assert digest(a) == digest(a.astype(">f8"))
    assert digest(a) != digest(a.T)


def test_digest_makes_no_full_size_copy_of_a_contiguous_array():
    a = np.ones(2_000_000, dtype=np.float32)  # 8 MB
    tracemalloc.start()
    try:
        digest(a)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < a.nbytes // 10
    # and the control: a non-contiguous view does need its one copy
    tracemalloc.start()
    try:
        digest(a[::2])
        _, peak_strided = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_strided >= a.nbytes // 2


def test_digest_rejects_object_arrays():
    with pytest.raises(TypeError):
        digest(np.array([1, "x"], dtype=object))


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
    assert "only the sign of zero or NaN payload bits differ" in c.message()


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
    assert "Greatest ULP distance: NaN vs non-NaN at index (1,)" in c.message()
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


@settings(max_examples=200, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False), st.integers(0, 50),
       st.booleans())
def test_float32_steps_property(x, k, up):
    toward = np.float32(np.inf if up else -np.inf)
    y = steps(x, k, toward, np.float32)
    if not np.isfinite(y):
        return
    assert ulp_distance(np.array([x], np.float32), np.array([y], np.float32))[0] == k


# --------------------------------------------------------------------------- compare_repeats


def test_crafted_case_measures_and_message():
    a, b = crafted_3x4()
    c = compare_repeats("grads.W", [a, a, b, a, a])
    assert isinstance(c, TensorComparison)
    assert not c.bitwise_identical and not c.shape_mismatch
    assert (c.n_diff, c.n_total, c.frac_diff) == (3, 12, 0.25)
    assert c.max_ulp == 4 and c.max_ulp_index == (1, 2)
    assert c.first_diff_index == (0, 3)
    assert c.n_unique == 2 and c.repeats == 5 and c.diff_reps == (2,)
    assert c.digests[0] == c.digests[1] != c.digests[2]
    assert (c.dtype, c.shape) == ("float32", (3, 4))
    msg = c.message()
    assert msg.startswith("Tensors are not bit-identical!\n\n")
    for line in ["Mismatched elements: 3 / 12 (25.0%)",
                 "Greatest ULP distance: 4 at index (1, 2)",
                 "First differing element at index (0, 3)",
                 "Unique results: 2 of 5 repetitions",
                 "The failure occurred for item ['grads']['W']"]:
        assert line in msg.splitlines()


def test_n_diff_is_the_union_over_repetitions_and_max_over_them():
    a = np.zeros((2, 3), np.float64)
    b, d = a.copy(), a.copy()
    b.view(np.uint64)[1, 1] = 2          # 2 ULP at (1, 1)
    d.view(np.uint64)[0, 2] = 9          # 9 ULP at (0, 2)
    d.view(np.uint64)[1, 1] = 2          # same element as b: counted once
    c = compare_repeats("x", [a, b, d])
    assert c.n_diff == 2
    assert c.max_ulp == 9 and c.max_ulp_index == (0, 2)
    assert c.first_diff_index == (0, 2)
    assert c.n_unique == 3 and c.diff_reps == (1, 2)


def test_max_ulp_ties_resolve_to_the_first_element_in_c_order():
    a = np.zeros((2, 2), np.float32)
    b, d = a.copy(), a.copy()
    b.view(np.uint32)[1, 0] = 5
    d.view(np.uint32)[0, 1] = 5
    assert compare_repeats("t", [a, b, d]).max_ulp_index == (0, 1)
    assert compare_repeats("t", [a, d, b]).max_ulp_index == (0, 1)


def test_one_repetition_is_trivially_identical_and_zero_is_an_error():
    c = compare_repeats("x", [np.arange(3.0)])
    assert c.bitwise_identical and c.repeats == 1 and c.n_unique == 1 and c.n_diff == 0
    with pytest.raises(ValueError):
        compare_repeats("x", [])


def test_identical_repetitions():
    a = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    c = compare_repeats("ys.0", [a, a.copy(), a.copy()])
    assert c.bitwise_identical and c.n_diff == 0 and c.max_ulp == 0
    assert c.first_diff_index is None and c.max_ulp_index is None
    assert c.n_unique == 1 and len(set(c.digests)) == 1
    assert c.message().startswith("Tensors are bit-identical.")
    assert "not bit-identical" not in c.message()


def test_nan_and_inf_counts_come_from_repetition_0():
    a = np.array([np.nan, np.inf, -np.inf, 1.0, np.nan], np.float32)
    b = np.zeros(5, np.float32)
    c = compare_pair("x", a, b)
    assert (c.nan_count, c.inf_count) == (2, 2)
    assert (compare_pair("x", b, a).nan_count, compare_pair("x", b, a).inf_count) == (0, 0)


def _large_cases():
    """Large arrays (several blocks of the one-pass hash and probe) with NaN/Inf in the first, a middle and the
    last block, an overflow from finite values alone, and the layouts and dtypes that take the two-pass path."""
    rng = np.random.default_rng(5)
    out = {}
    for dt in (np.float32, np.float64):
        base = rng.standard_normal(3 * D.BLOCK_BYTES // np.dtype(dt).itemsize + 17).astype(dt)
        out[f"{np.dtype(dt).name} plain"] = base
        for where, at in (("first", 3), ("middle", base.size // 2), ("last", base.size - 1)):
            a = base.copy()
            a[at] = np.nan
            a[at // 2] = -np.inf
            out[f"{np.dtype(dt).name} nan+inf {where}"] = a
        out[f"{np.dtype(dt).name} overflow"] = np.full(base.size, np.finfo(dt).max / 4, dt)  # squares overflow
    out["float32 strided"] = out["float32 nan+inf middle"][::2]
    out["float32 big-endian"] = out["float32 nan+inf last"].astype(">f4")
    out["float16"] = rng.standard_normal(D.BLOCK_BYTES).astype(np.float16)
    out["int32"] = np.arange(D.BLOCK_BYTES, dtype=np.int32)
    out["float32 small"] = np.array([np.nan, 1.0], np.float32)
    return out


@pytest.mark.parametrize("name", sorted(_large_cases()))
def test_the_one_pass_hash_and_probe_give_what_the_two_calls_give(name):
    a = _large_cases()[name]
    for alg in DIGEST_ALGORITHMS:
        assert D.digest_counted(a, alg) == (digest(a, alg), B.nonfinite_counts(a))
    exact = (int(np.isnan(a).sum()), int(np.isinf(a).sum())) if a.dtype.kind == "f" else (0, 0)
    assert B.nonfinite_counts(a) == exact


def test_large_repetitions_compare_with_their_counts_and_digests_from_one_pass():
    a = _large_cases()["float32 nan+inf middle"]
    b = a.copy()
    b[5] = -b[5]
    c = compare_pair("x", a, b)
    assert (c.nan_count, c.inf_count) == (1, 1) and c.digests == (digest(a), digest(b))
    assert not c.bitwise_identical and c.n_diff == 1
    same = C.compare_repeats("x", [a, a.copy(), a.copy()])
    assert same.bitwise_identical and (same.nan_count, same.inf_count) == (1, 1)


@pytest.mark.parametrize("dtype", FLOATS + [np.int8, np.int64, np.uint16])
def test_each_dtype_positive_and_negative_control(dtype):
    a = np.arange(10).astype(dtype)
    assert compare_pair("x", a, a.copy()).bitwise_identical
    b = a.copy()
    b[7] = b[7] + dtype(3) if np.dtype(dtype).kind in "iu" else steps(b[7], 3, 100, dtype)
    c = compare_pair("x", a, b)
    assert not c.bitwise_identical and c.n_diff == 1
    assert c.max_ulp == 3 and c.first_diff_index == (7,) and c.dtype == np.dtype(dtype).name


def test_bool_and_strings():
    a = np.array([True, False, True])
    c = compare_pair("m", a, ~a)
    assert c.n_diff == 3 and c.max_ulp == 1
    s = compare_pair("s", np.array(["ab", "cd"]), np.array(["ab", "ce"]))
    assert not s.bitwise_identical and s.n_diff == 1 and s.first_diff_index == (1,)
    assert s.max_ulp == ULP_MAX and "undefined for dtype" in s.message()
    assert compare_pair("s", np.array(["ab"]), np.array(["ab"])).bitwise_identical


def test_empty_arrays():
    e = np.zeros((0, 4), np.float32)
    c = compare_pair("e", e, e.copy())
    assert c.bitwise_identical and c.n_total == 0 and c.frac_diff == 0.0 and c.n_diff == 0
    assert not compare_pair("e", e, np.zeros((4, 0), np.float32)).bitwise_identical
    forced = compare_repeats("e", [e, e.copy()], early_exit=False)
    assert forced == c


def test_shape_and_dtype_mismatch():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for other in (a.reshape(4, 3), a.view(np.int32), a.astype(np.float64), a[:2]):
        c = compare_pair("grads.W", a, other)
        assert c.shape_mismatch and not c.bitwise_identical
        assert c.n_diff == c.n_total == 12 and c.frac_diff == 1.0
        assert c.max_ulp == ULP_MAX and c.first_diff_index is None
        msg = c.message()
        assert "repetition 0: float32(3, 4)" in msg
        assert f"repetition 1: {other.dtype.name}{other.shape}" in msg
        assert "The failure occurred for item ['grads']['W']" in msg


def test_non_contiguous_and_byte_swapped_inputs_compare_by_value_bits():
    a = np.arange(30, dtype=np.float64).reshape(5, 6)
    assert compare_pair("x", a.T, np.ascontiguousarray(a.T)).bitwise_identical
    assert compare_pair("x", a, a.astype(">f8")).bitwise_identical
    b = a.astype(">f8")
    b[2, 3] = np.nextafter(b[2, 3], 1e9)
    c = compare_pair("x", a, b)
    assert c.n_diff == 1 and c.max_ulp == 1 and c.first_diff_index == (2, 3)


def _perturbed(data, dtype, shape):
    base = data.draw(hnp.arrays(dtype, shape, elements=hnp.from_dtype(
        np.dtype(dtype), allow_nan=True, allow_infinity=True)))
    reps = [base]
    for _ in range(data.draw(st.integers(1, 3))):
        r = base.copy()
        flat = r.reshape(-1).view(UINT_OF[dtype])
        for i in data.draw(st.lists(st.integers(0, flat.size - 1), max_size=4)):
            flat[i] ^= UINT_OF[dtype](1 << data.draw(st.integers(0, 8 * flat.itemsize - 1)))
        reps.append(r)
    return reps


@settings(max_examples=100, deadline=None)
@given(st.data(), st.sampled_from(FLOATS), hnp.array_shapes(min_dims=1, max_dims=3, max_side=5))
def test_early_exit_gather_and_dense_paths_agree(data, dtype, shape):
    reps = _perturbed(data, dtype, shape)
    fast = compare_repeats("p", reps)
    slow = compare_repeats("p", reps, early_exit=False)
    assert fast == slow
    old = B.GATHER_FRACTION
    try:
        B.GATHER_FRACTION = 0.0     # always dense
        dense = compare_repeats("p", reps)
        B.GATHER_FRACTION = 2.0     # always gather
        gather = compare_repeats("p", reps)
    finally:
        B.GATHER_FRACTION = old
    assert dense == gather == fast
    # and an independent recount of n_diff from the bit views
    b0 = bits(reps[0])
    union = np.zeros(reps[0].shape, bool)
    for r in reps[1:]:
        union |= bits(r) != b0
    assert fast.n_diff == int(union.sum())
    assert fast.bitwise_identical == (fast.n_diff == 0)
    if fast.n_diff:
        assert union[fast.first_diff_index] and not union.reshape(-1)[
            :int(np.ravel_multi_index(fast.first_diff_index, shape))].any()
        worst = max(int(ulp_distance(reps[0], r)[fast.max_ulp_index]) for r in reps[1:])
        assert worst == fast.max_ulp


# --------------------------------------------------------------------------- compare_results


def test_compare_results_by_name_with_a_missing_name():
    a, b = crafted_3x4()
    reps = [{"y": a, "grads.W": a}, {"y": a, "grads.W": b, "extra": a}, {"y": a, "grads.W": a}]
    out = compare_results(reps)
    assert list(out) == ["y", "grads.W", "extra"]
    assert out["y"].bitwise_identical and out["y"].repeats == 3
    assert out["grads.W"].n_diff == 3 and out["grads.W"].max_ulp == 4
    assert out["extra"].shape_mismatch and not out["extra"].bitwise_identical
    assert out["extra"].signatures == ("missing", "float32(3, 4)", "missing")
    assert out["extra"].dtype == "float32"
    assert compare_results([]) == {}


def test_assert_results_identical():
    a, b = crafted_3x4()
    good = [{"y": a}, {"y": a.copy()}]
    assert assert_results_identical(good)["y"].bitwise_identical
    with pytest.raises(ComparisonFailure) as exc:
        assert_results_identical([{"y": a, "z": a}, {"y": b, "z": a}])
    assert "['y']" in str(exc.value) and "['z']" not in str(exc.value)


# --------------------------------------------------------------------------- item paths


@pytest.mark.parametrize("name, path", [
    ("grads.W", "['grads']['W']"), ("ys.0", "['ys'][0]"), ("ws.1.7", "['ws'][1][7]"),
    ("x", "['x']"), ("", ""), ("gys.10.a", "['gys'][10]['a']"),
])
def test_item_path(name, path):
    assert item_path(name) == path


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


# --------------------------------------------------------------------------- asserts


def test_comparison_failure_is_an_assertion_error():
    assert issubclass(ComparisonFailure, AssertionError)
    assert issubclass(ComparisonFailure, HarnessError)


def test_assert_bit_identical():
    a, b = crafted_3x4()
    assert assert_bit_identical(a, a.copy(), name="grads.W").bitwise_identical
    assert assert_bit_identical([a, a.copy(), a.copy()]).repeats == 3
    with pytest.raises(ComparisonFailure) as exc:
        assert_bit_identical(a, b, name="grads.W")
    assert isinstance(exc.value, AssertionError)
    assert "Mismatched elements: 3 / 12 (25.0%)" in str(exc.value)
    assert "['grads']['W']" in str(exc.value)
    with pytest.raises(AssertionError):
        assert_bit_identical([a, a, b])
    with pytest.raises(AssertionError):
        assert_bit_identical(np.zeros(1), np.array([-0.0]))
    with pytest.raises(TypeError):
        assert_bit_identical(a)


def test_assert_within_oracle():
    e = np.arange(4, dtype=np.float64)
    assert assert_within_oracle("g", e.astype(np.float32), e).within_tolerance
    with pytest.raises(ComparisonFailure) as exc:
        assert_within_oracle("grads.W", e.astype(np.float32) + 1, e)
    assert isinstance(exc.value, AssertionError)
    assert str(exc.value).startswith("Gradient error against the float64 oracle exceeds")
    assert "['grads']['W']" in str(exc.value)


def test_compare_results_with_the_recorded_digests_is_the_same_comparison():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = a.copy()
    b[1, 2] = np.nextafter(b[1, 2], np.float32(9))
    reps = [{"t": a, "u": a}, {"t": b, "u": a}]
    recorded = {k: [digest(r[k]) for r in reps] for k in ("t", "u")}
    assert compare_results(reps, recorded) == compare_results(reps)
    # a digest that does not match the array would be believed: so only this module's digest() feeds it
    assert compare_results(reps, recorded)["t"].digests == tuple(recorded["t"])


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
