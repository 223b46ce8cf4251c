"""Bit views, ULP distance, NaN/Inf counts, and how an element and its value are named in messages.

Pure NumPy and the standard library; nothing here knows Chainer, subjects or files. :func:`bits` views an
array as the unsigned integer type of its width; :func:`ulp_distance` measures how far apart two arrays' values
are in units in the last place.

ULP distance (:func:`ulp_distance`). A float's bits are sign-magnitude; they are mapped onto
a monotonic integer line by keeping non-negative floats as their magnitude and mirroring
negative ones (``key = -magnitude``). On that line consecutive floats are one apart, ``-0.0``
and ``+0.0`` are both 0, subnormals are small integers, the infinities sit one past the
largest finite values and the distance is ``|key(a) - key(b)|``. NaNs are not on the line:
two NaNs (any payloads) are distance 0 -- the choice made here, since "both are NaN" is the
numerically equal case; their bits still count as different -- and a NaN against a non-NaN
is :data:`ULP_MAX`, larger than any real distance. Integer (and bool, datetime) dtypes use
``|a - b|`` as integers. Complex numbers use the greater of the real and imaginary distances.
"""

from __future__ import annotations

from typing import Sequence, cast

import numpy as np

__all__ = [
    "ULP_MAX", "BITS_KINDS", "GATHER_FRACTION", "SMALL_BYTES", "native", "canonical", "bits", "word_view",
    "bits_not_equal", "ulp_distance", "max_ulp_of", "item_path", "index_text", "unravel", "item_line",
    "value_text", "array_text", "dtype_name", "nonfinite_counts", "nonfinite_counts_all", "counted_nonfinite",
]


#: The ULP distance reported for NaN against non-NaN, for a shape/dtype mismatch and for
#: dtypes with no ULP line (strings, records): ``np.iinfo(np.uint64).max``. Every real
#: distance is smaller (the widest, ``-inf`` to ``+inf`` in float64, is below ``2**64 - 2**53``).
ULP_MAX: int = int(np.iinfo(np.uint64).max)

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

_SINT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}

BITS_KINDS = "biufcmM"  # kinds whose items are plain fixed-width words

#: Below this fraction of differing elements the ULP distances are computed on the gathered
#: differing elements only; above it on the whole arrays (gathering costs an int64 index each).
GATHER_FRACTION = 1 / 8

#: Arrays with more elements than this are summarized (``...``) in messages.
_PRINT_THRESHOLD = 100


def native(a: np.ndarray) -> np.ndarray:
    """``a`` in the machine's byte order (a copy only when it was not)."""
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return a


def canonical(a: object) -> np.ndarray:
    """``a`` as a native-order, C-contiguous ndarray; no copy when it already is one."""
    a = native(np.asarray(a))
    if not a.flags.c_contiguous:
        a = a.copy(order="C")
    return a


#: Arrays up to this many bytes take the small-tensor fast paths: digest of one ``bytes`` (header + data)
#: with a cached header, identity judged by comparing bytes before any hashing, NaN/Inf by one
#: ``isfinite`` pass. Most tensors of a campaign are a few KiB: there the fixed Python cost per call is
#: the comparator's whole cost (the bench's ``comparator`` section measures it against ``array_equal``).
SMALL_BYTES = 64 * 1024


def bits(a: np.ndarray) -> np.ndarray:
    """A view of ``a`` as the unsigned integer type of the same width (native byte order).

    float16 -> uint16, float32 -> uint32, float64 -> uint64; signed ints, bools, datetimes
    and complex64 (-> uint64) are viewed the same way. No copy unless ``a`` was not in native
    byte order.

    Raises:
        TypeError: for dtypes that are not 1, 2, 4 or 8-byte numeric words (e.g. complex128,
            longdouble, strings, records, objects).
    """
    a = np.asarray(a)
    if a.dtype.kind not in BITS_KINDS or a.dtype.itemsize not in _UINT:
        raise TypeError(f"no same-width unsigned integer view for dtype {a.dtype}")
    return native(a).view(_UINT[a.dtype.itemsize])


def word_view(a: np.ndarray) -> np.ndarray:
    """Flat bit view of a canonical array: 1-D uint words, or 2-D ``(size, itemsize)`` bytes."""
    if a.dtype.kind in BITS_KINDS and a.dtype.itemsize in _UINT:
        return a.reshape(-1).view(_UINT[a.dtype.itemsize])
    return a.reshape(-1).view(np.uint8).reshape(a.size, a.dtype.itemsize)


def bits_not_equal(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise "bits differ" of two :func:`word_view` views (1-D bool)."""
    ne: np.ndarray = np.not_equal(x, y)
    return ne if x.ndim == 1 else cast(np.ndarray, ne.any(axis=1))


def _absdiff(x: np.ndarray, y: np.ndarray, *, overwrite_x: bool = False) -> np.ndarray:
    """``|x - y|`` of two same-dtype 1-D integer arrays, exact, as the same-width uint.

    The subtraction is done modulo ``2**w`` on the unsigned views; the true difference of two
    ``w``-bit integers fits in ``w`` unsigned bits, so negating where ``x < y`` makes it exact.
    The negation is two's complement through a mask (``(d ^ m) - m``, ``m`` all ones where
    ``x < y``): branch-free whole-array operations (a masked ``np.negative(..., where=)`` or an
    ``np.where`` costs ten times as much per element). With ``overwrite_x`` (x is a temporary)
    the result is written over ``x``.
    """
    u = _UINT[x.dtype.itemsize]
    m = np.less(x, y).view(np.uint8).astype(u)
    np.negative(m, out=m)  # 0 -> 0, 1 -> all ones
    d: np.ndarray = np.subtract(x.view(u), y.view(u), out=x.view(u) if overwrite_x else None)
    np.bitwise_xor(d, m, out=d)
    np.subtract(d, m, out=d)
    return d


def _float_key(x: np.ndarray) -> np.ndarray:
    """Monotonic signed-integer key of 1-D floats: magnitude bits, negated for negative sign (the sign bit,
    shifted arithmetically, is the mask of a branch-free two's-complement negation)."""
    s = x.view(_SINT[x.dtype.itemsize])
    k: np.ndarray = np.bitwise_and(s, np.iinfo(s.dtype).max)
    m = np.right_shift(s, 8 * s.dtype.itemsize - 1)  # 0, or -1 (all ones) where the sign bit is set
    np.bitwise_xor(k, m, out=k)
    np.subtract(k, m, out=k)
    return k


def _ulp_flat(x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """ULP distances of two same-dtype native 1-D arrays, in the same-width uint.

    For floats a NaN against a non-NaN is that uint's maximum (a sentinel: no real distance
    reaches it). Returns ``None`` for dtypes with no ULP line.
    """
    kind, size = x.dtype.kind, x.dtype.itemsize
    if kind == "f" and size in (2, 4, 8):
        d = _absdiff(_float_key(x), _float_key(y), overwrite_x=True)
        nx, ny = np.isnan(x), np.isnan(y)
        if nx.any() or ny.any():
            d[nx & ny] = 0
            d[nx ^ ny] = np.iinfo(d.dtype).max
        return d
    if kind == "c" and size in (8, 16):
        part = np.dtype(f"f{size // 2}")
        parts = _ulp_flat(x.view(part), y.view(part))
        return None if parts is None else parts.reshape(-1, 2).max(axis=1)
    if kind == "b":
        return _absdiff(x.view(np.uint8), y.view(np.uint8))
    if kind in "iu":
        return _absdiff(x, y)
    if kind in "mM":
        return _absdiff(x.view(np.int64), y.view(np.int64))
    return None


def _is_nan_sentinel(d: np.ndarray, kind: str) -> np.ndarray | bool:
    return kind in "fc" and d == np.iinfo(d.dtype).max


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise ULP distance of two arrays of the same dtype and shape, as ``uint64``.

    Floats (float16/32/64) are measured on the monotonic integer line of their bit patterns
    (see the module docstring): ``k`` :func:`numpy.nextafter` steps are ``k`` ULPs, the step
    across zero from the smallest negative to the smallest positive subnormal is 2, ``-0.0``
    vs ``+0.0`` is 0, the largest finite value to infinity is 1. Both NaN (any payloads) is 0;
    NaN vs non-NaN is :data:`ULP_MAX`. Integers, bools and datetimes give the exact ``|a - b|``
    (up to ``2**64 - 1`` for int64). Complex gives the greater of the two parts' distances.

    Raises:
        TypeError: if the dtypes differ or have no ULP line (strings, records, objects).
        ValueError: if the shapes differ.
    """
    a, b = native(np.asarray(a)), native(np.asarray(b))
    if a.dtype != b.dtype:
        raise TypeError(f"ulp_distance needs one dtype, got {a.dtype} and {b.dtype}: cast first")
    if a.shape != b.shape:
        raise ValueError(f"ulp_distance needs one shape, got {a.shape} and {b.shape}")
    d = _ulp_flat(a.reshape(-1), b.reshape(-1))
    if d is None:
        raise TypeError(f"dtype {a.dtype} has no ULP distance")
    out = d.astype(np.uint64, copy=False)
    if d.dtype != np.uint64 and a.dtype.kind in "fc":
        out[_is_nan_sentinel(d, a.dtype.kind)] = ULP_MAX
    return out.reshape(a.shape)


def item_path(name: str) -> str:
    """Render a dotted item name as a subscript path: ``"grads.W"`` -> ``['grads']['W']``.

    Parts made only of ASCII digits become integer subscripts: ``"ys.0"`` -> ``['ys'][0]``.
    The empty name renders as ``""``.
    """
    if not name:
        return ""
    return "".join(
        f"[{int(p)}]" if p.isascii() and p.isdigit() else f"[{p!r}]" for p in name.split(".")
    )


def index_text(index: tuple[int, ...] | None) -> str:
    return "()" if index == () else str(index)


def unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape))


def item_line(name: str) -> list[str]:
    return [f"The failure occurred for item {item_path(name)}"] if name else []


def value_text(a: np.ndarray | None, index: tuple[int, ...] | None) -> str:
    """One element as ``repr`` and, for floats and ints, its bits in hex: ``-1.5e-07 (0xb4210fb6)``.

    ``""`` where there is no array or no index (or the index is outside it)."""
    if a is None or index is None:
        return ""
    a = np.asarray(a)
    try:
        v = a[tuple(index)]
    except (IndexError, TypeError):
        return ""
    if a.dtype.kind in BITS_KINDS and a.dtype.itemsize in _UINT:
        word = int(np.asarray(v).reshape(1).view(_UINT[a.dtype.itemsize])[0])
        return f"{str(v)} (0x{word:0{2 * a.dtype.itemsize}x})"
    return str(v)


def array_text(a: np.ndarray) -> str:
    return np.array2string(
        a, threshold=_PRINT_THRESHOLD, edgeitems=3, max_line_width=100, floatmode="unique"
    )


def dtype_name(dt: np.dtype) -> str:
    """``dt.name``, cached (NumPy computes it in Python on every access)."""
    name = _DTYPE_NAMES.get(dt)
    if name is None:
        name = _DTYPE_NAMES[dt] = dt.name
    return name


_DTYPE_NAMES: dict[np.dtype, str] = {}


def nonfinite_counts(a: np.ndarray) -> tuple[int, int]:
    if a.dtype.kind not in "fc":
        return 0, 0
    if a.nbytes <= SMALL_BYTES:  # one pass, no floating-point state to save: the small-tensor fast path
        if np.isfinite(a).all():
            return 0, 0
        return counted_nonfinite(a)
    # A probe first (a fraction of the cost of the two counts), and almost every tensor is all finite. A
    # real array's largest and smallest values are both finite exactly when none is NaN or +-inf (a NaN
    # propagates through both): the probe digest_counted takes, single-threaded and with no temporary (a
    # BLAS dot, the probe before, starts threads that compete with the other lane's or the measure pass's
    # other slice on a machine of few cores). A complex array's sum is finite only when no element is NaN or
    # infinite; one that overflows from finite values only sends us on to the exact counts.
    with np.errstate(over="ignore", invalid="ignore"):
        flat = a.reshape(-1)
        if a.dtype.kind == "f":
            if np.isfinite(np.maximum.reduce(flat)) and np.isfinite(np.minimum.reduce(flat)):
                return 0, 0
        elif np.isfinite(np.add.reduce(flat, dtype=a.dtype)):
            return 0, 0
    return counted_nonfinite(a)


def nonfinite_counts_all(arrays: Sequence[np.ndarray]) -> list[tuple[int, int]]:
    """:func:`nonfinite_counts` of each array, the small float arrays of one dtype probed together: one
    ``isfinite`` over their concatenation says they are all finite (almost always), instead of one call per
    array (an NStepBiLSTM run answers 74 arrays of a few hundred bytes: the per-call cost dominates).
    Where the probe finds something not finite, each array of that dtype is counted on its own."""
    out: list[tuple[int, int] | None] = [None] * len(arrays)
    groups: dict[np.dtype, list[int]] = {}
    for i, a in enumerate(arrays):
        if a.dtype.kind not in "fc":
            out[i] = (0, 0)
        elif a.nbytes <= SMALL_BYTES:
            groups.setdefault(a.dtype, []).append(i)
        else:
            out[i] = nonfinite_counts(a)
    for idx in groups.values():
        if len(idx) > 1 and np.isfinite(np.concatenate([arrays[i].reshape(-1) for i in idx])).all():
            for i in idx:
                out[i] = (0, 0)
        else:
            for i in idx:
                out[i] = nonfinite_counts(arrays[i])
    return out  # type: ignore[return-value]


def counted_nonfinite(a: np.ndarray) -> tuple[int, int]:
    """The exact NaN and Inf counts of a float array, taken where a probe (:func:`nonfinite_counts`,
    :func:`digest_counted`) found something not finite."""
    return int(np.count_nonzero(np.isnan(a))), int(np.count_nonzero(np.isinf(a)))


def max_ulp_of(x: np.ndarray, y: np.ndarray, ne: np.ndarray, nnz: int) -> tuple[int, int]:
    """(greatest ULP distance, flat index of the first differing element attaining it)."""
    kind = x.dtype.kind
    gather = nnz <= GATHER_FRACTION * x.size
    if gather:
        idx = np.flatnonzero(ne)
        d = _ulp_flat(x[idx], y[idx])
    else:
        d = _ulp_flat(x, y)
    if d is None:
        return ULP_MAX, int(np.argmax(ne))
    j = int(np.argmax(d))
    m = int(d[j])
    if kind in "fc" and m == int(np.iinfo(d.dtype).max):
        m = ULP_MAX
    if gather:
        return m, int(idx[j])
    return m, (j if m > 0 else int(np.argmax(ne)))
