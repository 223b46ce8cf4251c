"""A tensor's sketch: a few numbers that say *how much* a tensor changed without keeping its array.

An audit file keeps digests, which say only *whether* bits changed. The sketch of a tensor, taken once where
the arrays are (the campaign's task summary, from repetition 0) and stored in the task record and the audit
entry, is:

- ``n``: the element count; ``nan`` and ``inf``: how many elements are NaN and infinite;
- ``l2`` and ``max_abs``: the L2 norm and the greatest magnitude of the finite elements (in float64);
- ``index`` and ``bits``: a fixed sample of up to :data:`SAMPLE` elements, their flat (C-order) indices and
  their values as big-endian hex bits (``3f800000`` is float32 1.0).

The sample's indices depend on the shape alone (:func:`sample_indices`: a BLAKE2b counter over the flat
index, not NumPy's generators, whose streams may change between NumPy releases -- and a NumPy upgrade is one
of the changes an audit compares across), so two sketches of one shape sample the same elements.
:func:`sketch_delta` then gives the ULP distance at the sampled elements and the relative change of the norm.

Pure NumPy and the standard library, like :mod:`harness.judge.ulp`.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from harness.judge.parallel import map_sized
from harness.judge.ulp import ulp_distance

__all__ = ["SAMPLE", "sample_indices", "tensor_sketch", "sketch_all", "sample_values", "SketchDelta",
           "sketch_delta"]

#: Elements sampled per tensor (all of them when a tensor has fewer).
SAMPLE = 16

_KINDS = "biufc"  # dtypes a sketch covers: bool, integers, floats, complex


def sample_indices(shape: Sequence[int], k: int = SAMPLE) -> list[int]:
    """``min(k, size)`` distinct flat indices into an array of ``shape``, sorted; the same for the same shape.

    >>> sample_indices((3,))
    [0, 1, 2]
    >>> sample_indices((1000, 64)) == sample_indices([1000, 64]) and len(sample_indices((1000, 64)))
    16
    """
    return list(_sample_indices(tuple(int(d) for d in shape), k))


@functools.lru_cache(maxsize=1024)
def _sample_indices(shape: tuple[int, ...], k: int) -> tuple[int, ...]:
    n = int(math.prod(shape))
    if n <= k:
        return tuple(range(n))
    key = ",".join(str(int(d)) for d in shape).encode()
    seen: set[int] = set()
    counter = 0
    while len(seen) < k:
        h = hashlib.blake2b(key + b":" + str(counter).encode(), digest_size=8).digest()
        seen.add(int.from_bytes(h, "little") % n)
        counter += 1
    return tuple(sorted(seen))


def _hex_bits(values: np.ndarray) -> list[str]:
    big = np.ascontiguousarray(values).astype(values.dtype.newbyteorder(">"), copy=False)
    size = big.dtype.itemsize
    raw = big.tobytes()
    return [raw[i * size:(i + 1) * size].hex() for i in range(big.size)]


def sample_values(dtype: str | np.dtype, bits: Sequence[str]) -> np.ndarray:
    """The values a sketch's ``bits`` stand for, as a native-order array of ``dtype``.

    >>> sample_values("float32", ["3f800000", "c0000000"]).tolist()
    [1.0, -2.0]
    """
    dt = np.dtype(dtype)
    raw = b"".join(bytes.fromhex(b) for b in bits)
    return np.frombuffer(raw, dtype=dt.newbyteorder(">")).astype(dt.newbyteorder("="))


def _l2(x: np.ndarray, max_abs: float) -> float:
    # NumPy's own pairwise sum, not BLAS's dot: no threads, so the norm does not move with the BLAS thread count
    # (one of the changes an audit measures), and no thread start-up on small tensors.
    if not x.size or max_abs == 0:
        return 0.0
    if max_abs > 1e150 or max_abs < 1e-150:  # squares would overflow or underflow float64: scale first
        x = x / max_abs
        return max_abs * math.sqrt(float(np.square(x, out=x).sum()))
    return math.sqrt(float(np.square(x, out=x).sum()))


#: Elements :func:`_norms` widens to float64 at a time (1 MiB of float64; at least 128: NumPy sums 128 or
#: fewer in one block, unsplit).
_LEAF = 1 << 17


def _norms(flat: np.ndarray) -> tuple[float, float]:
    """``max_abs`` and ``l2`` of a real array with no NaN or Inf, in float64, as :func:`_l2` of the whole array
    widened gives them, bit for bit, without widening the whole array (a 260 MB float32 gradient was a 520 MB
    temporary): the maximum piece by piece (of a float array: from its min and max), the sum of squares along
    NumPy's own pairwise tree (:func:`_squares`). Module functions, not closures: a recursive closure is a
    reference cycle, and it would hold the tensor until the garbage collector's next full pass."""
    n = flat.size
    if not n:
        max_abs = 0.0
    elif flat.dtype.kind == "f":  # the greatest magnitude is the larger of -min and max (+ 0.0: never -0.0)
        max_abs = max(float(flat.max()), -float(flat.min())) + 0.0
    else:
        max_abs = max(float(_widened(flat, lo, min(_LEAF, n - lo)).max()) for lo in range(0, n, _LEAF))
    if not n or max_abs == 0:
        return max_abs, 0.0
    scaled = max_abs > 1e150 or max_abs < 1e-150  # squares would overflow or underflow float64: scale first
    total = _squares(flat, 0, n, max_abs if scaled else None)
    return max_abs, (max_abs * math.sqrt(total) if scaled else math.sqrt(total))


def _widened(flat: np.ndarray, lo: int, m: int) -> np.ndarray:
    """``|flat[lo:lo + m]|`` in float64 (a new array)."""
    x = flat[lo:lo + m].astype(np.float64)
    return np.abs(x, out=x)


def _squares(flat: np.ndarray, lo: int, m: int, scale: float | None) -> float:
    """The sum of the squares of ``|flat[lo:lo + m]|`` (each divided by ``scale`` first, where given) as NumPy
    sums a contiguous float64 array: the sums of its first ``half`` and of the rest, ``half`` half of ``m``
    rounded down to a multiple of 8, each piece of at most :data:`_LEAF` elements summed by NumPy itself."""
    if m <= _LEAF:
        x = _widened(flat, lo, m)
        if scale is not None:
            np.divide(x, scale, out=x)
        return float(np.square(x, out=x).sum())
    half = m // 2
    half -= half % 8
    return _squares(flat, lo, half, scale) + _squares(flat, lo + half, m - half, scale)


def tensor_sketch(a: Any, counts: tuple[int, int] | None = None) -> dict[str, Any] | None:
    """The sketch of one array (see the module docstring), or None for an array with no bits to sketch
    (objects, strings, records) or no array at all. ``counts``: the array's NaN and Inf counts where they
    were taken already (a worker's answer carries them), so they are not counted again here.

    >>> s = tensor_sketch(np.array([3.0, -4.0, np.inf], dtype=np.float32))
    >>> (s["n"], s["l2"], s["max_abs"], s["nan"], s["inf"], s["bits"])
    (3, 5.0, 4.0, 0, 1, ['40400000', 'c0800000', '7f800000'])
    """
    if a is None:
        return None
    a = np.asarray(a)
    if a.dtype.kind not in _KINDS:
        return None
    flat = a.reshape(-1)
    idx = sample_indices(a.shape)
    nan = inf = 0
    if a.dtype.kind in "fc" and counts is not None:
        nan, inf = int(counts[0]), int(counts[1])
    elif a.dtype.kind in "fc":
        nan = int(np.count_nonzero(np.isnan(flat)))
        inf = int(np.count_nonzero(np.isinf(flat)))
    if nan or inf or a.dtype.kind == "c":
        mag = np.abs(flat) if a.dtype.kind == "c" else flat
        x = mag.astype(np.float64)  # a copy: the abs below works in place
        np.abs(x, out=x)
        if nan or inf:
            x = x[np.isfinite(x)]
        max_abs = float(x.max()) if x.size else 0.0
        l2 = _l2(x, max_abs)
    else:
        max_abs, l2 = _norms(flat)
    return {"n": int(flat.size), "l2": l2 if math.isfinite(l2) else None, "max_abs": max_abs,
            "nan": nan, "inf": inf, "index": idx, "bits": _hex_bits(flat[idx])}


def sketch_all(arrays: Sequence[Any], counts: Sequence[tuple[int, int] | None]) -> list[dict[str, Any] | None]:
    """:func:`tensor_sketch` of each array with its ``counts``, in order; large ones on threads
    (:func:`harness.judge.parallel.map_sized`)."""
    return map_sized(lambda i: tensor_sketch(arrays[i], counts[i]), range(len(arrays)),
                     [int(np.size(a)) if a is not None else 0 for a in arrays])


@dataclass(frozen=True)
class SketchDelta:
    """How much a tensor changed, from two sketches: ``ulps`` the ULP distances at the sampled elements
    both sketches hold (in index order), ``norm_rel`` ``|l2_b - l2_a| / l2_a`` (0 when both are 0, inf when
    only A's is, NaN when a norm is unknown), and the changes of the NaN and inf counts."""

    ulps: tuple[int, ...]
    norm_rel: float
    nan_change: int
    inf_change: int

    @property
    def max_ulp(self) -> float:
        return float(max(self.ulps)) if self.ulps else math.nan

    @property
    def median_ulp(self) -> float:
        return float(np.median(np.array(self.ulps, dtype=np.float64))) if self.ulps else math.nan


def _norm_rel(a: float | None, b: float | None) -> float:
    if a is None or b is None:
        return math.nan
    if a == 0:
        return 0.0 if b == 0 else math.inf
    return abs(b - a) / a


def sketch_delta(dtype: str, a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> SketchDelta | None:
    """B's change against A, from their sketches of one tensor of ``dtype`` (None when either has no sketch).

    >>> one = np.float32(1.0)
    >>> a = tensor_sketch(np.array([one, 2], dtype=np.float32))
    >>> b = tensor_sketch(np.array([np.nextafter(one, np.float32(2)), 2], dtype=np.float32))
    >>> d = sketch_delta("float32", a, b)
    >>> (d.ulps, d.max_ulp, round(d.norm_rel, 9))
    ((1, 0), 1.0, 2.4e-08)
    """
    if not a or not b:
        return None
    ia = dict(zip(a["index"], a["bits"]))
    ib = dict(zip(b["index"], b["bits"]))
    common = sorted(set(ia) & set(ib))
    ulps: tuple[int, ...] = ()
    if common:
        try:
            xa = sample_values(dtype, [ia[i] for i in common])
            xb = sample_values(dtype, [ib[i] for i in common])
            ulps = tuple(int(u) for u in ulp_distance(xa, xb))
        except (TypeError, ValueError):
            ulps = ()
    return SketchDelta(ulps, _norm_rel(a.get("l2"), b.get("l2")), int(b["nan"]) - int(a["nan"]),
                       int(b["inf"]) - int(a["inf"]))
