"""Correctly rounded scatter-adds for the float64 oracle (:mod:`harness.subjects.oracle`).

``grad.W`` of an embedding is a scatter-add of the upstream gradient's rows into the rows its ids name. The oracle
sums each row's terms **correctly rounded** in float64, so its value does not depend on any summation order:
a single term or a pair is one IEEE operation (already correctly rounded); longer segments are summed exactly,
whole arrays at once, with integer limbs (:func:`_exact_segment_sums`), or plainly where every partial sum is
exact (:func:`_fits_53_bits`), and with :func:`math.fsum` column by column where the values span more binary
orders of magnitude than the limbs take. NaN and infinities give their IEEE sums. Also here: reading rows as
float64 a block at a time (:func:`gather_rows`), and the zeros a sparse scatter writes into
(:func:`harness.core.sparse_zeros.sparse_zeros`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from harness.core.sparse_zeros import sparse_zeros

__all__ = ["exact_sum", "special_sum", "gather_rows", "scatter_rows"]

_F64 = np.float64


def special_sum(col: np.ndarray) -> float:
    """The IEEE sum of a column holding a NaN or an infinity (order does not matter here)."""
    if np.isnan(col).any() or (np.isposinf(col).any() and np.isneginf(col).any()):
        return math.nan
    return math.inf if np.isposinf(col).any() else -math.inf


def exact_sum(values: list[float]) -> float:
    """The correctly rounded float64 sum of finite float64 values."""
    try:
        return math.fsum(values)
    except OverflowError:  # an intermediate partial overflowed; the exact sum may still be finite
        exact = sum((Fraction(v) for v in values), Fraction(0))
        try:
            return float(exact)
        except OverflowError:
            return math.inf if exact > 0 else -math.inf


def gather_rows(table: np.ndarray, index: np.ndarray, out: np.ndarray | None = None,
                 at: np.ndarray | None = None) -> np.ndarray:
    """``table[index]`` read as float64 (exactly), a block of rows at a time; with ``out`` and ``at``, written to
    ``out[at]`` instead (a scatter). No temporary of the whole gather in the table's dtype: at a word LM's sizes
    (12,000 rows of 1,000) gathering then casting wrote every byte twice, into freshly faulted pages."""
    index = np.asarray(index)
    width = table.shape[1]
    if out is None:
        out = np.empty((len(index), width), dtype=_F64)
    step = max(1, _GATHER_BYTES // max(1, width * table.itemsize))
    for s in range(0, len(index), step):
        if at is None:
            out[s:s + step] = table[index[s:s + step]]
        else:
            out[at[s:s + step]] = table[index[s:s + step]]
    return out


#: Bytes of the table's rows per block of :func:`gather_rows` (a block stays in cache while it is cast).
_GATHER_BYTES = 1 << 18


def scatter_rows(ids: np.ndarray, rows: np.ndarray, n_rows: int, positions: np.ndarray | None = None
                  ) -> np.ndarray:
    """``out[r] = sum of rows[p] with ids[p] == r``, each sum correctly rounded in float64.

    ``ids`` is 1-D (already filtered of ignored positions), ``rows`` is ``(len(ids), D)`` of a float dtype (its
    values are read as float64: exactly); or, with ``positions`` (the kept positions' row numbers, as long as
    ``ids``), ``rows`` holds every position and ``ids[k]`` goes with ``rows[positions[k]]`` (no filtered copy of
    the rows).
    A single term or a pair is one IEEE operation (already correctly rounded); longer segments are summed
    exactly (:func:`_exact_segment_sums`, whole arrays at once; :func:`math.fsum` column by column where the
    values span more exponents than that handles). The result does not depend on the order of the positions.
    """
    width = rows.shape[1]
    out = sparse_zeros((n_rows, width))
    n = ids.shape[0]
    if n == 0 or width == 0:
        return out
    order = np.argsort(ids, kind="stable")
    sid = ids[order]
    if positions is not None:  # from here on, order names rows of ``rows``
        order = np.asarray(positions)[order]
    starts = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]])
    ends = np.r_[starts[1:], n]
    counts = ends - starts
    one, two = starts[counts == 1], starts[counts == 2]
    gather_rows(rows, order[one], out=out, at=sid[one])
    if len(two):
        out[sid[two]] = gather_rows(rows, order[two]) + gather_rows(rows, order[two + 1])  # one IEEE addition
    many = counts > 2
    if many.any():
        # The longer segments, a chunk at a time (bounded memory: the limbs hold several copies of a chunk).
        m_starts, m_counts = starts[many], counts[many]
        chunk = (np.cumsum(m_counts) - m_counts) // max(1, _CHUNK // width)
        for c in sorted(set(chunk.tolist())):
            c_starts, c_counts = m_starts[chunk == c], m_counts[chunk == c]
            offsets = np.cumsum(c_counts) - c_counts  # where each segment starts within the chunk's block
            take = np.repeat(c_starts - offsets, c_counts) + np.arange(int(c_counts.sum()))
            block = rows[order[take]].astype(_F64)
            sums = _exact_segment_sums(block, offsets, np.finfo(rows.dtype).nmant + 1)
            if sums is None:  # too wide a range of exponents for the limbs: column by column
                ends = (offsets + c_counts).tolist()
                sums = _with_special(block, offsets, np.array(
                    [[exact_sum(col.tolist()) if np.isfinite(col).all() else 0.0 for col in block[s0:s1].T]
                     for s0, s1 in zip(offsets.tolist(), ends)], dtype=_F64).reshape(len(offsets), width))
            out[sid[c_starts]] = sums
    return out


#: Bits per limb of the exact sums (:func:`_exact_segment_sums`): a limb of a value is below 2^32, so a segment
#: of up to 2^31 values sums its limbs in int64 without overflow.
_LIMB = 32
#: Values per chunk of :func:`scatter_rows`'s longer segments.
_CHUNK = 1 << 21


def _with_special(block: np.ndarray, seg_starts: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """``sums`` with the (segment, column) entries whose values hold a NaN or an infinity set to their IEEE sum."""
    bad = np.add.reduceat((~np.isfinite(block)).astype(np.int64), seg_starts, axis=0) > 0
    ends = np.r_[seg_starts[1:], len(block)]
    for g, j in zip(*np.nonzero(bad)):
        sums[g, j] = special_sum(block[seg_starts[g]:ends[g], j])
    return sums


def _exact_segment_sums(block: np.ndarray, seg_starts: np.ndarray, bits: int = 53) -> np.ndarray | None:
    """The correctly rounded float64 sum of each segment (rows ``seg_starts[g]`` up to the next start) of
    ``block``, column by column, computed exactly with integers: every finite value is an integer multiple of
    ``2^E`` (E from the smallest exponent present), split into 32-bit limbs of that integer, the limbs summed per
    segment in int64 (exact), carried, and the exact total rounded once (to nearest, ties to even) to float64.
    ``bits``: the significant bits the values came with (24 from float32). None where the values span too many
    binary orders of magnitude for that (the caller sums with fsum)."""
    finite = np.isfinite(block)
    easy = _fits_53_bits(np.where(finite, block, 0.0), seg_starts, bits)
    if easy is not None:
        return _with_special(block, seg_starts, easy)
    a = np.where(finite, np.abs(block), 0.0)
    nonzero = a[a > 0]
    n_seg, width = len(seg_starts), block.shape[1]
    if nonzero.size == 0:
        return _with_special(block, seg_starts, np.zeros((n_seg, width), dtype=_F64))
    exps = np.frexp(nonzero)[1]
    low, high = int(exps.min()) - 53, int(exps.max())  # every value is k * 2^low with |value| < 2^high
    longest = int(np.diff(np.r_[seg_starts, len(block)]).max())
    if high - low > 960 or longest >= 1 << 31:
        return None
    n_limbs = (high - low + longest.bit_length() + 1) // _LIMB + 3  # room for the carries and the sign
    sign = np.sign(np.where(finite, block, 0.0)).astype(np.int64)
    limbs = np.zeros((n_limbs + 2, n_seg, width), dtype=np.int64)  # two zero limbs below, for the rounding
    base = float(1 << _LIMB)
    for j in range(n_limbs):
        q = np.floor(np.ldexp(a, -(low + _LIMB * j)))  # exact: a power-of-two scaling, then dropping bits
        if not q.any():
            break
        limb = (q - np.floor(q / base) * base).astype(np.int64)  # q mod 2^32, exact
        limbs[j + 2] = np.add.reduceat(limb * sign, seg_starts, axis=0)
    _carry(limbs)
    negative = limbs[-1] < 0
    limbs[:, negative] *= -1
    _carry(limbs)
    # The highest limb that is not zero, its bit length, and a 63-bit window starting at its top bit.
    nz = limbs != 0
    top = limbs.shape[0] - 1 - np.argmax(nz[::-1], axis=0)
    zero = ~nz.any(axis=0)
    top = np.where(zero, 2, np.maximum(top, 2))
    g = np.take_along_axis
    hi = g(limbs, top[None], 0)[0]
    mid = g(limbs, (top - 1)[None], 0)[0]
    lo = g(limbs, (top - 2)[None], 0)[0]
    hb = np.where(hi > 0, np.frexp(hi.astype(_F64))[1], 1).astype(np.int64)  # the top limb's bit length, 1..32
    window = (hi << (63 - hb)) | np.where(hb <= 31, mid << np.maximum(31 - hb, 0), mid >> 1) | (lo >> (hb + 1))
    lost = ((hb == 32) & ((mid & 1) != 0)) | ((lo & ((np.int64(1) << (hb + 1)) - 1)) != 0)
    bottom = np.argmax(nz, axis=0)  # the lowest limb that is not zero: below the window, the sticky bit
    lost |= bottom < top - 2
    # Bits 0..8 of the window lie below the rounding bit of a 53-bit significand: a sticky 1 there rounds right.
    value = (window | lost.astype(np.int64)).astype(_F64)  # one rounding, to nearest even
    exponent = low + _LIMB * (top - 2 - 2) + hb + 1
    with np.errstate(over="ignore"):
        result = np.ldexp(value, exponent)
    tiny = (result != 0) & (np.abs(result) < np.ldexp(1.0, -1021))
    if tiny.any():  # a subnormal total would round twice: leave it to fsum
        return None
    result = np.where(zero, 0.0, np.where(negative, -result, result))
    return _with_special(block, seg_starts, result)


def _fits_53_bits(block: np.ndarray, seg_starts: np.ndarray, bits: int = 53) -> np.ndarray | None:
    """The plain float64 sums of the segments where every one of them is exact, else None: a segment's sum is
    exact when its values' bits, from the lowest set bit of any to the top of the largest, plus the bits the
    count adds, fit a 53-bit significand (then no partial sum rounds, in any order). Values that came from
    float32 (24 significant bits, ``bits``), as the subjects' gradients do, nearly always fit."""
    mant, exp = np.frexp(block)
    zero = mant == 0
    if bits < 53:  # a value of ``bits`` significant bits is a multiple of 2^(exp - bits)
        lowest = -bits
    else:  # the trailing zero bits of the significand as an integer below 2^53
        ints = np.ldexp(np.abs(mant), 53).astype(np.int64)
        lowest = np.frexp((ints & -ints).astype(_F64))[1] - 1 - 53
    hi = np.where(zero, -(1 << 20), exp)  # |value| < 2^exp
    lo = np.where(zero, 1 << 20, exp + lowest)  # the value is a multiple of 2^lo
    counts = np.diff(np.r_[seg_starts, len(block)])
    room = np.maximum.reduceat(hi, seg_starts, axis=0) - np.minimum.reduceat(lo, seg_starts, axis=0)
    if (room + np.ceil(np.log2(counts + 1)).astype(np.int64)[:, None] > 53).any():
        return None
    return np.add.reduceat(block, seg_starts, axis=0)


def _carry(limbs: np.ndarray) -> None:
    """Carry every limb but the last into ``[0, 2^32)``, in place (the last keeps the sign)."""
    for j in range(limbs.shape[0] - 1):
        c = limbs[j] >> _LIMB  # floor division: an arithmetic shift
        limbs[j] -= c << _LIMB
        limbs[j + 1] += c
