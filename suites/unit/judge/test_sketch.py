"""A sketch's norms taken a piece at a time are those of the whole array widened to float64, bit for bit."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

from harness.judge import parallel, sketch
from harness.judge import sketch as S
from harness.judge.sketch import tensor_sketch
from harness.judge.ulp import ulp_distance


def _whole(a: np.ndarray) -> tuple[float, float]:
    """The definition: the whole array widened, its greatest magnitude and its L2 norm (NumPy's sum)."""
    x = np.abs(a.reshape(-1).astype(np.float64))
    max_abs = float(x.max()) if x.size else 0.0
    if not x.size or max_abs == 0:
        return max_abs, 0.0
    if max_abs > 1e150 or max_abs < 1e-150:
        return max_abs, max_abs * math.sqrt(float(np.square(x / max_abs).sum()))
    return max_abs, math.sqrt(float(np.square(x).sum()))


@pytest.mark.parametrize("leaf", [128, 200, 1000, 1 << 17])  # (NumPy splits no sum of 128 or fewer)
@pytest.mark.parametrize("n, dtype, scale", [
    (0, "float32", 1.0), (1, "float32", 1.0), (7, "float16", 1.0), (1001, "float32", 1.0),
    (123457, "float32", 1e-3), (300000, "float64", 1e200), (300000, "float64", 1e-200), (5000, "int32", 1.0),
    (4096, "float32", 0.0), (4096, "float32", -0.0),
])
def test_the_norms_of_a_sketch_are_those_of_the_whole_array(monkeypatch, leaf, n, dtype, scale):
    monkeypatch.setattr(sketch, "_LEAF", leaf)
    rng = np.random.default_rng(n)
    if dtype == "int32":
        a = rng.integers(-2 ** 31, 2 ** 31 - 1, n, dtype=np.int64).astype(dtype)
    else:
        a = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n) * scale).astype(dtype)
    s = tensor_sketch(a.reshape(-1, 1) if n else a)
    max_abs, l2 = _whole(a)
    assert (s["max_abs"], s["l2"]) == (max_abs, l2)
    assert s["n"] == n and s["nan"] == s["inf"] == 0


def test_a_sketch_leaves_nothing_that_holds_its_tensor(monkeypatch):
    import gc
    import weakref

    monkeypatch.setattr(sketch, "_LEAF", 128)  # the pairwise tree's recursion runs
    a = np.arange(5000, dtype=np.float32)
    gone = weakref.ref(a)
    gc.disable()  # freed when the last reference goes, not by a collection of cycles
    try:
        tensor_sketch(a)
        del a
        assert gone() is None
    finally:
        gc.enable()


# The tensor sketch (harness/judge/sketch.py): what an audit keeps of a tensor to say how much it changed.

def test_the_doctests_hold():
    res = doctest.testmod(S)
    assert res.attempted >= 5 and res.failed == 0


def test_sample_indices_depend_on_the_shape_alone_and_never_change():
    # Pinned: audits are compared across NumPy releases, so the sampled elements must not move with them
    # (the indices come from BLAKE2b over the shape, not from a NumPy generator).
    assert S.sample_indices((1000, 64)) == [2427, 3639, 13831, 15497, 23264, 27048, 27775, 27888, 36360, 37908,
                                            38517, 43053, 44209, 45778, 46465, 51800]
    for shape in [(0,), (1,), (16,), (17,), (3, 0, 2), (7, 9, 11)]:
        idx = S.sample_indices(shape)
        n = math.prod(shape)
        assert idx == sorted(set(idx)) and len(idx) == min(S.SAMPLE, n) and all(0 <= i < n for i in idx)
    assert S.sample_indices((64, 1000)) != S.sample_indices((1000, 64))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "uint8", "bool", "complex64"])
def test_sampled_bits_round_trip_exactly(dtype):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((9, 7)) * 50).astype(dtype)
    if np.dtype(dtype).kind == "f":
        a.flat[[1, 2, 3]] = [-0.0, np.nan, -np.inf]
    sk = S.tensor_sketch(a)
    back = S.sample_values(dtype, sk["bits"])
    want = a.reshape(-1)[sk["index"]]
    assert back.dtype == want.dtype and back.tobytes() == want.tobytes()  # bit for bit, -0.0 and NaN included


def test_norms_and_counts_leave_nan_and_inf_out():
    a = np.array([3, -4, np.nan, np.inf, -np.inf, 0], dtype=np.float32)
    sk = S.tensor_sketch(a)
    assert (sk["n"], sk["nan"], sk["inf"], sk["l2"], sk["max_abs"]) == (6, 1, 2, 5.0, 4.0)
    big = np.full(4, 1e300)  # the squares overflow float64: the norm is scaled, not inf
    assert S.tensor_sketch(big)["l2"] == pytest.approx(2e300)
    assert S.tensor_sketch(np.zeros((0, 3), np.float32)) == {"n": 0, "l2": 0.0, "max_abs": 0.0, "nan": 0, "inf": 0,
                                                              "index": [], "bits": []}
    assert S.tensor_sketch(np.array(["a"])) is None and S.tensor_sketch(None) is None


def test_delta_measures_ulps_at_the_sample_like_the_comparator():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((40, 30)).astype(np.float32)
    b = a.copy()
    b.flat[::7] = np.nextafter(b.flat[::7], np.float32(np.inf))
    b.flat[::11] *= np.float32(1.001)
    d = S.sketch_delta("float32", S.tensor_sketch(a), S.tensor_sketch(b))
    idx = S.sample_indices(a.shape)
    assert d.ulps == tuple(int(u) for u in ulp_distance(a.reshape(-1)[idx], b.reshape(-1)[idx]))
    assert d.max_ulp == max(d.ulps) and d.median_ulp == float(np.median(d.ulps))
    la, lb = np.linalg.norm(a.astype(np.float64)), np.linalg.norm(b.astype(np.float64))
    assert d.norm_rel == pytest.approx(abs(lb - la) / la, rel=1e-9)
    same = S.sketch_delta("float32", S.tensor_sketch(a), S.tensor_sketch(a))
    assert set(same.ulps) == {0} and same.norm_rel == 0 and (same.nan_change, same.inf_change) == (0, 0)
    assert S.sketch_delta("float32", None, S.tensor_sketch(a)) is None
    zero = S.tensor_sketch(np.zeros(3, np.float32))
    assert S.sketch_delta("float32", zero, S.tensor_sketch(np.ones(3, np.float32))).norm_rel == math.inf


def test_the_task_record_keeps_the_sketch_through_its_json_round_trip():
    from dataclasses import replace

    from harness.core.errors import RecordError
    from harness.core.records import TensorComparison
    from harness.judge.comparator import compare_repeats

    a = np.linspace(-1, 1, 40, dtype=np.float32).reshape(8, 5)
    t = replace(compare_repeats("y", [a, a]), sketch=S.tensor_sketch(a))
    back = TensorComparison.from_dict(t.to_dict(), name="y")
    assert back.to_dict() == t.to_dict() and back.sketch["bits"] == S.tensor_sketch(a)["bits"]
    assert TensorComparison.from_dict({**t.to_dict(), "sketch": None}).sketch is None  # records before sketches
    with pytest.raises(RecordError, match="sketch"):
        TensorComparison.from_dict({**t.to_dict(), "sketch": [1, 2]})


def test_counts_taken_already_give_the_sketch_counting_them_would():
    tensor_sketch = S.tensor_sketch
    a = np.array([1.0, np.nan, -3.0, np.inf, np.nan, 2.0], dtype=np.float32)
    assert tensor_sketch(a, (2, 1)) == tensor_sketch(a)
    clean = np.linspace(-1, 1, 50, dtype=np.float64)
    assert tensor_sketch(clean, (0, 0)) == tensor_sketch(clean)
    assert tensor_sketch(a, (2, 1))["nan"] == 2  # the counts given are the ones it reports
    assert tensor_sketch(a, (5, 1))["nan"] == 5


def test_sketches_taken_on_threads_are_each_arrays_own_in_order(monkeypatch):
    """sketch_all on threads (a large total) gives each array's own sketch in the arrays' order, as one thread
    does; a missing array's sketch is None and given counts are used, not counted again."""
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(300).astype(np.float32), None, rng.standard_normal((40, 50)),
              np.arange(7, dtype=np.int32), np.array([1.0, np.nan, np.inf], dtype=np.float32)]
    counts = [None, None, (0, 0), (0, 0), (1, 1)]
    monkeypatch.setattr(parallel, "THREADED_ELEMENTS", 10 ** 12)
    one = S.sketch_all(arrays, counts)
    monkeypatch.setattr(parallel, "THREADED_ELEMENTS", 0)
    threaded = S.sketch_all(arrays, counts)
    assert threaded == one == [S.tensor_sketch(a, c) for a, c in zip(arrays, counts)]
    assert one[1] is None and one[4]["nan"] == 1 and one[2]["n"] == 2000
