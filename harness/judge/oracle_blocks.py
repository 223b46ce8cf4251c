"""The elementwise measures of :func:`harness.judge.tolerance.compare_oracle`, taken block by block.

Every measure of a result against its oracle is elementwise (the error, the relative error, the error over
what is allowed, the ULP distance, within or not) and then reduced: a greatest value and the first index where
it is reached, as :func:`numpy.argmax` gives it over the whole array (the first NaN where there is one), and a
count. Taken over blocks of :data:`BLOCK` elements the temporaries stay small and each element is computed by
the same NumPy operations as over the whole array, so every value is the same; the block maxima combine into
the whole array's (:func:`_better`).

Most elements of a correct result equal the oracle (rows gathered unchanged, rows of the gradient no id
touched). Where a float result equals its oracle as a float64 number (or both are NaN) every measure is 0 and
the element is within tolerance (the oracle is then a value of the result's dtype, so its rounding to that dtype
is the result up to the sign of a zero: 0 ULP); a block with few differing elements computes the measures on
those alone.

Pure NumPy: :func:`normwise_max` and :func:`measure_blocks` over a whole tensor, :func:`elementwise` for some of
its elements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from harness.judge.ulp import ULP_MAX, ulp_distance

__all__ = ["BLOCK", "GATHER_BELOW", "GATHER_MIN", "Worst", "Settings", "Elementwise", "Reduced", "measure_blocks",
           "elementwise", "expected_as_compared", "normwise_max", "oracle_cast", "rounded_overflow"]

#: Elements per block: the dozen float64 temporaries of a block stay within a core's caches.
BLOCK = 1 << 17

#: A float block whose elements differ from the oracle in fewer than this fraction is measured on the
#: differing elements alone (gathered by index); otherwise on the whole block.
GATHER_BELOW = 0.5

#: Tensors smaller than this are never gathered: there the count of NumPy calls is the cost.
GATHER_MIN = 1 << 16


def oracle_cast(expected: np.ndarray, dt: np.dtype) -> tuple[np.ndarray, np.ndarray | None]:
    """The oracle in the subject's dtype, and where (for integer dtypes) it was not finite."""
    with np.errstate(over="ignore", invalid="ignore"):
        if dt.kind == "f":
            return expected.astype(dt), None
        bad = ~np.isfinite(expected)
        if dt.kind == "b":
            return np.where(bad, False, expected != 0), bad
        info = np.iinfo(dt)
        e = np.clip(np.rint(np.where(bad, 0.0, expected)), float(info.min), float(info.max))
        # float(2**63 - 1) is 2**63, which does not cast to int64: saturate those explicitly
        return np.where(e >= float(info.max), info.max, e.astype(dt)).astype(dt), bad


def rounded_overflow(e: np.ndarray, a64: np.ndarray, dt: np.dtype) -> np.ndarray:
    """The oracle as the subject's dtype can hold it, where that is an infinity: an exact value beyond the
    dtype's range (float16's 65,504) correctly rounds to ``inf``, so a subject's ``inf`` there is exact, not an
    error. Only there: a partial sum that overflows while the exact value fits stays an error."""
    if dt.kind != "f" or dt.itemsize >= 8 or e.shape != a64.shape:
        return e
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = e.astype(dt).astype(np.float64)
    ok = np.isinf(rounded) & np.isfinite(e) & (a64 == rounded)
    return np.where(ok, a64, e) if ok.any() else e


class Settings(NamedTuple):
    """What every block is measured with: the subject's dtype, the tolerance pair, the optional looser
    acceptances (``normwise`` is ``rtol * max|expected|`` of the whole tensor, already computed), and whether
    the subject's tensor and the oracle hold only finite numbers."""

    dtype: np.dtype
    atol: float
    rtol: float
    normwise: float | None
    floor: float | None
    finite_only: bool


class Elementwise(NamedTuple):
    """The measures of some elements: the oracle as compared (overflow rounded), the error, relative error,
    error over allowed, what is allowed, within tolerance, and the ULP distance."""

    expected: np.ndarray
    err: np.ndarray
    rel: np.ndarray
    ratio: np.ndarray
    allowed: np.ndarray
    ok: np.ndarray
    ulp: np.ndarray


def expected_as_compared(a: np.ndarray, e: np.ndarray, s: Settings) -> np.ndarray:
    """The oracle (1-D float64) as it is compared with the 1-D result ``a``: where the exact value overflows the
    subject's dtype and the subject holds that infinity, the infinity."""
    if s.finite_only:
        return e
    return rounded_overflow(e, a.astype(np.float64), s.dtype)


def elementwise(a: np.ndarray, e: np.ndarray, bound: np.ndarray | None,
                s: Settings) -> Elementwise:
    """Every measure of the 1-D result ``a`` against the 1-D float64 oracle ``e`` (as compared:
    :func:`expected_as_compared`), ``bound`` the summation bound of those elements or None. The definitions are
    :class:`harness.judge.tolerance.OracleError`'s."""
    a64 = a.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        same = a64 == e
        err = np.abs(a64 - e)  # exactly 0 where they are equal numbers
        finite: Any
        if s.finite_only:
            finite = True
        else:
            same |= np.isnan(a64) & np.isnan(e)
            err[same] = 0.0
            err[np.isnan(err)] = math.inf  # NaN against a number
            finite = np.isfinite(a64) & np.isfinite(e)
        magnitude = np.abs(e)
        allowed = s.atol + s.rtol * magnitude
        if bound is not None:
            allowed = np.maximum(allowed, bound)
        if s.normwise is not None:
            allowed = np.maximum(allowed, s.normwise)
        if s.floor:
            allowed = np.maximum(allowed, float(s.floor))
        ok = same | (finite & (err <= allowed))
        # rel is 0 where err is; ratio is 0 where err is, inf where nothing is allowed. Where every divisor is
        # positive the plain quotient is both (0 / d is 0); only a zero or NaN divisor takes the masked forms
        # (ten times the cost per element).
        rel = err / magnitude
        if not bool(np.all(magnitude > 0)):
            rel[err == 0] = 0.0
        if bool(np.all(allowed > 0)):
            ratio = err / allowed
        else:
            ratio = np.where(err == 0, 0.0,
                             np.where(allowed > 0, err / np.where(allowed > 0, allowed, 1.0), np.inf))
        if not s.finite_only:
            ratio[~(same | finite)] = np.inf
    ecast, bad = oracle_cast(e, s.dtype)
    ulp = ulp_distance(a, ecast)
    if bad is not None:
        ulp[bad] = ULP_MAX
    return Elementwise(e, err, rel, ratio, allowed, ok, ulp)


@dataclass(slots=True)
class Worst:
    """The greatest value of a measure so far and the flat index of its first occurrence (``numpy.argmax``'s
    choice: the first NaN, else the first greatest value); ``measures`` and ``at`` are the measures of its block
    and its position there, None where it is an element equal to the oracle (not measured: every measure 0)."""

    value: float = -math.inf
    index: int = -1
    measures: Elementwise | None = None
    at: int = 0

    def offer(self, value: float, index: int, measures: Elementwise | None, at: int) -> None:
        if self.index < 0 or _better(value, self.value):
            self.value, self.index, self.measures, self.at = value, index, measures, at


def _better(value: float, best: float) -> bool:
    """Whether a later block's maximum replaces the earlier one: a NaN is kept once found; ties keep the
    earlier."""
    if math.isnan(best):
        return False
    return math.isnan(value) or value > best


def _block_worst(m: Elementwise, values: np.ndarray, where: np.ndarray | None, start: int, worst: Worst) -> None:
    """Offer a block's maximum. ``values`` are one measure of ``m`` at the block's elements ``where`` (None: all
    of them); the others equal the oracle, where every measure is 0. Every measure is >= 0 or NaN, so where the
    greatest is 0 it is first reached at the block's first element."""
    if values.size == 0:
        worst.offer(0.0, start, None, 0)
        return
    j = int(values.argmax())
    v = values[j].item()
    if where is None:
        worst.offer(v, start + j, m, j)
    elif math.isnan(v) or v > 0:
        worst.offer(v, start + int(where[j]), m, j)
    else:
        worst.offer(0.0, start, None, 0)


class Reduced(NamedTuple):
    """The reductions of :func:`measure_blocks`: the greatest error, relative error, ULP distance and error over
    allowed (each with its flat index), and how many elements are within tolerance."""

    abs: Worst
    rel: Worst
    ulp: Worst
    ratio: Worst
    n_ok: int


def measure_blocks(a: np.ndarray, e: np.ndarray, bound: np.ndarray | None, s: Settings) -> Reduced:
    """The reductions of :func:`elementwise` over the whole of the 1-D ``a`` and ``e`` (same length, at least
    one element), block by block."""
    size = a.size
    # The elements that equal the oracle have every measure 0 only in a float dtype with a ULP line; an integer
    # result can equal the oracle as float64 and still be an integer away.
    may_gather = s.dtype.kind == "f" and s.dtype.itemsize in (2, 4, 8) and size >= GATHER_MIN
    if size <= BLOCK and not may_gather:  # one block, measured whole: no reduction across blocks
        m = elementwise(a, expected_as_compared(a, e, s), bound, s)
        w = [Worst(v[j].item(), j, m, j) for v in (m.err, m.rel, m.ulp, m.ratio) for j in (int(v.argmax()),)]
        return Reduced(w[0], w[1], w[2], w[3], int(np.count_nonzero(m.ok)))
    worsts = Worst(), Worst(), Worst(), Worst()
    n_ok = 0
    for start in range(0, size, BLOCK):
        stop = min(start + BLOCK, size)
        n = stop - start
        ab = a[start:stop]
        eb = expected_as_compared(ab, e[start:stop], s)
        bb = None if bound is None else bound[start:stop]
        where = None
        if may_gather:
            with np.errstate(invalid="ignore"):
                differ = ab.astype(np.float64) != eb
            if not s.finite_only:
                differ &= ~(np.isnan(ab) & np.isnan(eb))
            if np.count_nonzero(differ) < GATHER_BELOW * n:
                where = np.flatnonzero(differ)
                ab, eb = ab[where], eb[where]
                bb = None if bb is None else bb[where]
        m = elementwise(ab, eb, bb, s)
        n_ok += (n - ab.size) + int(np.count_nonzero(m.ok))
        for worst, values in zip(worsts, (m.err, m.rel, m.ulp, m.ratio)):
            _block_worst(m, values, where, start, worst)
    return Reduced(*worsts, n_ok)


def normwise_max(a: np.ndarray, e: np.ndarray, dtype: np.dtype, finite_only: bool) -> float | None:
    """The greatest ``|expected|`` over the finite elements of the oracle as compared with the 1-D ``a``
    (:func:`expected_as_compared`; None where there are none), block by block."""
    most: float | None = None
    for start in range(0, a.size, BLOCK):
        eb = e[start:start + BLOCK]
        if not finite_only:
            eb = rounded_overflow(eb, a[start:start + BLOCK].astype(np.float64), dtype)
            eb = eb[np.isfinite(eb)]
        if eb.size:
            m = float(np.abs(eb).max())
            most = m if most is None else max(most, m)
    return most
