"""Hand-made arrays whose comparison answers are known in advance, shared by test_ulp, test_comparator and
test_digest: ULP steps made with ``np.nextafter`` and large arrays with NaN/Inf planted in chosen blocks. Plain
helpers, not fixtures: ``parametrize`` reads them when the tests are collected."""

from __future__ import annotations

import numpy as np

from harness.judge import digest as D

FLOATS = [np.float16, np.float32, np.float64]
UINT_OF = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}


def steps(x, k, toward, dtype):
    """``x`` moved ``k`` representable values toward ``toward`` in ``dtype``."""
    x, toward = dtype(x), dtype(toward)
    with np.errstate(over="ignore"):
        for _ in range(k):
            x = np.nextafter(x, toward)
    return x


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
