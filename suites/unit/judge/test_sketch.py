"""A sketch's norms taken a piece at a time are those of the whole array widened to float64, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.judge import sketch
from harness.judge.sketch import tensor_sketch


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
