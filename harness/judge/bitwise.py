"""The comparator: arrays in, frozen result objects out.

This module knows nothing of Chainer, CuPy, subjects, contexts or files. It imports only
NumPy, :mod:`hashlib` and the standard library. Every function is pure; only the ``assert_*``
functions raise :class:`~harness.core.errors.ComparisonFailure` (an ``AssertionError``), and the
other functions raise only on misuse (``TypeError``/``ValueError``: no repetitions, a dtype
with no bit pattern such as ``object``).

Two kinds of question are answered:

- *Are these results bit-identical?* :func:`compare_repeats` (N repetitions of one tensor),
  :func:`compare_pair` (two arrays, e.g. CPU vs GPU) and :func:`compare_results` (N
  repetitions of a whole name -> array mapping) return :class:`TensorComparison`. Identity is
  judged on the bit pattern: ``-0.0`` and ``+0.0`` differ, two NaNs with different payloads
  differ. Distances are measured in ULPs from the bit patterns (as NumPy's ``nulp_diff``
  does), and messages follow ``torch.testing.assert_close``.
- *Is this result close to the float64 oracle?* That is :mod:`harness.judge.tolerance`'s question.

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

import hashlib
import math
import sys
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from harness.core.errors import ComparisonFailure, InvalidArgument

__all__ = [
    "ULP_MAX", "value_text", "DIGEST_ALGORITHM", "DIGEST_ALGORITHMS", "digest", "digest_all",
    "digest_algorithm_of", "digest_mismatch_reason", "same_digest", "short_digest", "bits", "ulp_distance", "item_path",
    "TensorComparison", "compare_repeats", "compare_pair", "compare_results",
    "assert_bit_identical", "assert_results_identical",
]

#: The ULP distance reported for NaN against non-NaN, for a shape/dtype mismatch and for
#: dtypes with no ULP line (strings, records): ``np.iinfo(np.uint64).max``. Every real
#: distance is smaller (the widest, ``-inf`` to ``+inf`` in float64, is below ``2**64 - 2**53``).
ULP_MAX: int = int(np.iinfo(np.uint64).max)

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SINT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_BITS_KINDS = "biufcmM"  # kinds whose items are plain fixed-width words

#: Below this fraction of differing elements the ULP distances are computed on the gathered
#: differing elements only; above it on the whole arrays (gathering costs an int64 index each).
_GATHER_FRACTION = 1 / 8

#: Arrays with more elements than this are summarized (``...``) in messages.
_PRINT_THRESHOLD = 100

_MISSING = "missing"


# --------------------------------------------------------------------------- bit views


def _native(a: np.ndarray) -> np.ndarray:
    """``a`` in the machine's byte order (a copy only when it was not)."""
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return a


def _canon(a: object) -> np.ndarray:
    """``a`` as a native-order, C-contiguous ndarray; no copy when it already is one."""
    a = _native(np.asarray(a))
    if not a.flags.c_contiguous:
        a = a.copy(order="C")
    return a


#: The digest algorithm of run records, task records and audit files. Chosen by measurement (the bench's
#: ``digest`` section: on two 64 MiB float32 arrays xxh3_128 hashes at about ``numpy.array_equal``'s speed,
#: SHA-256 at a tenth of it). A digest here detects *accidental* change -- a different rounding, a different
#: summation order -- never an adversary: a 128-bit non-cryptographic hash makes an accidental collision
#: among even 10**12 tensors about 1e-15 likely (birthday bound n**2 / 2**129). Pass ``algorithm="sha256"``
#: where a digest must resist deliberate forgery.
DIGEST_ALGORITHM: str = "xxh3_128"

#: Every algorithm :func:`digest` can compute, and its hex length.
DIGEST_ALGORITHMS: dict[str, int] = {"xxh3_128": 32, "blake3": 64, "sha256": 64}

_HEX = frozenset("0123456789abcdef")


def _hasher(algorithm: str, header: bytes) -> object:
    """A fresh streaming hasher of ``algorithm`` that has consumed ``header``."""
    if algorithm == "xxh3_128":
        import xxhash  # imported here: only run records need it, not every user of this module

        return xxhash.xxh3_128(header)
    if algorithm == "sha256":
        return hashlib.sha256(header)
    if algorithm == "blake3":
        import blake3

        return blake3.blake3(header)
    raise ValueError(f"algorithm={algorithm!r} is not one of {', '.join(DIGEST_ALGORITHMS)}")


def digest(a: np.ndarray, algorithm: str = DIGEST_ALGORITHM) -> str:
    """``"<algorithm>:<hex>"`` of ``a``'s dtype name, shape and raw C-order little-endian bytes.

    Two arrays have the same digest exactly when they have the same dtype name, the same
    shape and the same bits (up to the hash's collision odds, see :data:`DIGEST_ALGORITHM`), so
    equal bytes under another dtype or shape hash differently. A C-contiguous little-endian
    array is hashed through a memoryview, with no copy; anything else is first made so (one copy).
    The string names its algorithm so that digests of two algorithms are never taken for a
    change of bits (:func:`same_digest`); SHA-256 digests written before the prefix existed
    (plain 64 hex) are still recognised by :func:`digest_algorithm_of`.

    Raises:
        TypeError: for ``object`` arrays, whose bytes are pointers.
        ValueError: for an algorithm not in :data:`DIGEST_ALGORITHMS`.
    """
    a = np.asarray(a)
    if algorithm == "xxh3_128" and a.flags.c_contiguous and a.nbytes <= _SMALL_BYTES:
        header = _header(a)  # None for byte orders and dtypes the general path must handle
        if header is not None:
            return _XXH_PREFIX + _xxh3_128_hexdigest(header + a.tobytes())
    if a.dtype.hasobject:
        raise TypeError(f"cannot digest an array of dtype {a.dtype}: its bytes are pointers")
    order = a.dtype.byteorder
    if order == ">" or (order == "=" and sys.byteorder == "big"):
        a = a.astype(a.dtype.newbyteorder("<"))
    if not a.flags.c_contiguous:
        a = a.copy(order="C")
    h = _hasher(algorithm, f"{a.dtype.name}|{tuple(int(n) for n in a.shape)}|".encode())
    h.update(memoryview(a.reshape(-1).view(np.uint8)))  # type: ignore[attr-defined]
    return f"{algorithm}:{h.hexdigest()}"  # type: ignore[attr-defined]


#: Arrays up to this many bytes take the small-tensor fast paths: digest of one ``bytes`` (header + data)
#: with a cached header, identity judged by comparing bytes before any hashing, NaN/Inf by one
#: ``isfinite`` pass. Most tensors of a campaign are a few KiB: there the fixed Python cost per call is
#: the comparator's whole cost (the bench's ``comparator`` section measures it against ``array_equal``).
_SMALL_BYTES = 64 * 1024

_XXH_PREFIX = "xxh3_128:"
_HEADERS: dict[tuple[np.dtype, tuple[int, ...]], bytes | None] = {}
_SIGNATURES: dict[tuple[np.dtype, tuple[int, ...]], str] = {}


def _xxh3_128_hexdigest(data: bytes) -> str:
    import xxhash

    global _xxh3_128_hexdigest  # noqa: PLW0603 -- bind the C function once, skipping the import afterwards
    _xxh3_128_hexdigest = xxhash.xxh3_128_hexdigest
    return xxhash.xxh3_128_hexdigest(data)


def _header(a: np.ndarray) -> bytes | None:
    """The digest header of ``a``'s dtype and shape (cached), or None where the general path is needed
    (object dtypes, a byte order other than little-endian)."""
    key = (a.dtype, a.shape)
    try:
        return _HEADERS[key]
    except KeyError:
        pass
    dt = a.dtype
    little = dt.byteorder == "<" or dt.byteorder == "|" or (dt.byteorder == "=" and sys.byteorder == "little")
    header = (None if dt.hasobject or not little or dt.fields is not None or dt.subdtype is not None
              else f"{dt.name}|{tuple(int(n) for n in a.shape)}|".encode())
    if len(_HEADERS) < 4096:  # a campaign has a few hundred distinct shapes; never grow without bound
        _HEADERS[key] = header
    return header


def digest_algorithm_of(d: str) -> str:
    """The algorithm that made digest ``d``: the prefix of ``"<algorithm>:<hex>"``, or ``"sha256"``
    for the plain 64-hex digests written before digests named their algorithm.

    Raises:
        ValueError: for a string that is no digest (the missing marker included), naming it.
    """
    if isinstance(d, str):
        alg, sep, hexpart = d.partition(":")
        if not sep:
            alg, hexpart = "sha256", d  # the legacy form: SHA-256, unprefixed
        if DIGEST_ALGORITHMS.get(alg) == len(hexpart) and set(hexpart) <= _HEX:
            return alg
    raise ValueError(f"digest={str(d)[:80]!r} is not '<algorithm>:<hex>' with an algorithm of "
                     f"{', '.join(DIGEST_ALGORITHMS)} (nor a legacy 64-hex SHA-256 digest)")


def digest_mismatch_reason(a: str, b: str) -> str | None:
    """Why digests ``a`` and ``b`` cannot be compared (one line), or None when they can.

    They can when both are of one algorithm, or when either is the missing marker (a missing
    array against a digest is a plain difference, not a confusion of algorithms).

    Raises:
        ValueError: when either is no digest at all.
    """
    if a == _MISSING or b == _MISSING:
        return None
    alg_a, alg_b = digest_algorithm_of(a), digest_algorithm_of(b)
    if alg_a != alg_b:
        return (f"digests of different algorithms cannot be compared: {alg_a} ({short_digest(a)}) "
                f"against {alg_b} ({short_digest(b)}); digest both sides with one algorithm")
    return None


def same_digest(a: str, b: str) -> bool:
    """Whether digests ``a`` and ``b`` say the same bits; never False just because the algorithms differ.

    A legacy plain-hex SHA-256 digest equals its ``"sha256:"``-prefixed form.

    Raises:
        ValueError: (:class:`~harness.core.errors.InvalidArgument`) with
            :func:`digest_mismatch_reason` when the algorithms differ, or when either is no digest.
    """
    reason = digest_mismatch_reason(a, b)
    if reason is not None:
        raise InvalidArgument(reason)
    if a == _MISSING or b == _MISSING:
        return a == b
    return a.rpartition(":")[2] == b.rpartition(":")[2]


def short_digest(d: str, n: int = 12) -> str:
    """``d`` for display: its algorithm and the first ``n`` hex digits (``"xxh3_128:0f3a9c..."``).

    Legacy plain SHA-256 digests and the missing marker are cut to ``n`` characters.
    """
    alg, sep, hexpart = d.partition(":")
    return f"{alg}:{hexpart[:n]}" if sep else d[:n]


#: Arrays at least this large are hashed on threads (xxhash, hashlib and blake3 release the GIL).
_PARALLEL_HASH_BYTES = 1 << 20

#: The most threads :func:`digest_all` hashes on, the calling thread included.
_MAX_HASH_THREADS = 8


#: A large float array is hashed and probed for NaN/Inf in one pass, block by block (each block's largest and
#: smallest value taken right after the block is hashed, while it is still in cache), so it is read once, not
#: twice. 1 MiB blocks measured best (256 KiB and 4 MiB slower). One pass beats the hash then the
#: sum-of-squares probe; the probe is no BLAS dot here, because a multithreaded dot competes with the hashing
#: thread for the cores.
_BLOCK_BYTES = 1 << 20


def _digest_counted(a: np.ndarray, algorithm: str) -> tuple[str, tuple[int, int]]:
    """``(digest(a, algorithm), _nonfinite_counts(a))``, reading ``a`` once where it is a large C-contiguous
    little-endian float32/float64 array. The results are those of the two calls: the digest is the streaming
    hash of the same bytes, and NaN/Inf are counted exactly as soon as a block's largest or smallest value is
    not finite, which is exactly when the block holds a NaN or an infinity (both propagate a NaN)."""
    a = np.asarray(a)
    header = (_header(a) if a.flags.c_contiguous and a.dtype.kind == "f" and a.dtype.itemsize in (4, 8)
              and a.nbytes > _SMALL_BYTES else None)
    if header is None:
        return digest(a, algorithm), _nonfinite_counts(a)
    h = _hasher(algorithm, header)
    flat = a.reshape(-1)
    step = _BLOCK_BYTES // a.itemsize
    finite = True
    with np.errstate(invalid="ignore"):
        for start in range(0, flat.size, step):
            block = flat[start:start + step]
            h.update(memoryview(block.view(np.uint8)))  # type: ignore[attr-defined]
            finite = finite and bool(np.isfinite(np.maximum.reduce(block))) and bool(
                np.isfinite(np.minimum.reduce(block)))
    counts = (0, 0) if finite else _counted_nonfinite(a)
    return f"{algorithm}:{h.hexdigest()}", counts  # type: ignore[attr-defined]


def digest_all(arrs: Sequence[np.ndarray | None], algorithm: str = DIGEST_ALGORITHM) -> tuple[str, ...]:
    """:func:`digest` of each array (``None`` -> the missing marker), large ones on parallel threads.

    The calling thread hashes too, and helper threads are plain threads started per call: on large arrays a
    ``ThreadPoolExecutor`` made per call cost more than it saved (against one helper thread).
    """
    return _digest_many(list(arrs), algorithm)[0]


def _digest_many(arrs: list[np.ndarray | None], algorithm: str, counted: int | None = None
                 ) -> tuple[tuple[str, ...], tuple[int, int] | None]:
    """:func:`digest_all`'s work; with ``counted`` (an index), also that array's NaN/Inf counts, taken in the
    pass that hashes it (:func:`_digest_counted`; None where that array is missing)."""
    out: list[str | None] = [None] * len(arrs)
    got: list[tuple[int, int]] = []

    def one(i: int) -> None:
        if i == counted:
            out[i], c = _digest_counted(arrs[i], algorithm)  # type: ignore[arg-type]
            got.append(c)
        else:
            out[i] = digest(arrs[i], algorithm)  # type: ignore[arg-type]

    big = [i for i, a in enumerate(arrs) if a is not None and np.asarray(a).nbytes >= _PARALLEL_HASH_BYTES]
    big.sort(key=lambda i: i != counted)  # the longer job (hash and probe) starts first
    if len(big) >= 2:
        import threading

        todo = iter(big)
        lock = threading.Lock()
        errors: list[BaseException] = []

        def work() -> None:
            while True:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                try:
                    one(i)
                except BaseException as exc:  # noqa: BLE001 -- re-raised in the calling thread
                    errors.append(exc)
                    return

        helpers = [threading.Thread(target=work, daemon=True)
                   for _ in range(min(len(big), _MAX_HASH_THREADS) - 1)]
        for t in helpers:
            t.start()
        work()
        for t in helpers:
            t.join()
        if errors:
            raise errors[0]
    for i, a in enumerate(arrs):
        if a is not None and out[i] is None:
            one(i)
    return tuple(_MISSING if a is None else out[i] for i, a in enumerate(arrs)), (got[0] if got else None)


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
    if a.dtype.kind not in _BITS_KINDS or a.dtype.itemsize not in _UINT:
        raise TypeError(f"no same-width unsigned integer view for dtype {a.dtype}")
    return _native(a).view(_UINT[a.dtype.itemsize])


def _words(a: np.ndarray) -> np.ndarray:
    """Flat bit view of a canonical array: 1-D uint words, or 2-D ``(size, itemsize)`` bytes."""
    if a.dtype.kind in _BITS_KINDS and a.dtype.itemsize in _UINT:
        return a.reshape(-1).view(_UINT[a.dtype.itemsize])
    return a.reshape(-1).view(np.uint8).reshape(a.size, a.dtype.itemsize)


def _not_equal(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise "bits differ" of two :func:`_words` views (1-D bool)."""
    if x.ndim == 1:
        return np.not_equal(x, y)
    return np.not_equal(x, y).any(axis=1)


# --------------------------------------------------------------------------- ULP distance


def _absdiff(x: np.ndarray, y: np.ndarray, *, overwrite_x: bool = False) -> np.ndarray:
    """``|x - y|`` of two same-dtype 1-D integer arrays, exact, as the same-width uint.

    The subtraction is done modulo ``2**w`` on the unsigned views; the true difference of two
    ``w``-bit integers fits in ``w`` unsigned bits, so negating where ``x < y`` makes it exact.
    With ``overwrite_x`` (x is a temporary) the result is written over ``x``.
    """
    u = _UINT[x.dtype.itemsize]
    lt = x < y
    d = np.subtract(x.view(u), y.view(u), out=x.view(u) if overwrite_x else None)
    np.negative(d, out=d, where=lt)
    return d


def _float_key(x: np.ndarray) -> np.ndarray:
    """Monotonic signed-integer key of 1-D floats: magnitude bits, negated for negative sign."""
    s = x.view(_SINT[x.dtype.itemsize])
    k = np.bitwise_and(s, np.iinfo(s.dtype).max)
    np.negative(k, out=k, where=s < 0)
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
        d = _ulp_flat(x.view(part), y.view(part))
        return d.reshape(-1, 2).max(axis=1)
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
    a, b = _native(np.asarray(a)), _native(np.asarray(b))
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


# --------------------------------------------------------------------------- messages


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


def _index_text(index: tuple | None) -> str:
    return "()" if index == () else str(index)


def _unravel(flat: int, shape: tuple) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape))


def _item_line(name: str) -> list[str]:
    return [f"The failure occurred for item {item_path(name)}"] if name else []


def value_text(a: np.ndarray | None, index: tuple | None) -> str:
    """One element as ``repr`` and, for floats and ints, its bits in hex: ``-1.5e-07 (0xb4210fb6)``.

    ``""`` where there is no array or no index (or the index is outside it)."""
    if a is None or index is None:
        return ""
    a = np.asarray(a)
    try:
        v = a[tuple(index)]
    except (IndexError, TypeError):
        return ""
    if a.dtype.kind in _BITS_KINDS and a.dtype.itemsize in _UINT:
        word = int(np.asarray(v).reshape(1).view(_UINT[a.dtype.itemsize])[0])
        return f"{str(v)} (0x{word:0{2 * a.dtype.itemsize}x})"
    return str(v)


def _array_text(a: np.ndarray) -> str:
    return np.array2string(
        a, threshold=_PRINT_THRESHOLD, edgeitems=3, max_line_width=100, floatmode="unique"
    )


# --------------------------------------------------------------------------- bitwise


@dataclass(frozen=True)
class TensorComparison:
    """Bitwise comparison of the repetitions of one tensor; every repetition against rep 0.

    Attributes:
        name: the item path, dotted (``"grads.W"``, ``"ys.0"``).
        dtype, shape: of repetition 0 (of the first present repetition if rep 0 is missing).
        repeats: how many repetitions were compared.
        bitwise_identical: every repetition has repetition 0's dtype, shape and bits.
        n_diff: elements whose bits differ between any repetition and repetition 0.
        n_total: elements per repetition; frac_diff = n_diff / n_total (0.0 when empty).
        max_ulp: the greatest ULP distance of any repetition from repetition 0;
            :data:`ULP_MAX` for NaN vs non-NaN, a shape/dtype mismatch or a dtype with no ULP.
        max_ulp_index: the first (C order) differing element attaining ``max_ulp``.
        first_diff_index: the first (C order) differing element.
        digests: :func:`digest` of each repetition (``"missing"`` where it had no array).
        n_unique: how many distinct digests.
        nan_count, inf_count: in repetition 0.
        shape_mismatch: some repetition differs in shape or dtype or is missing; then
            ``n_diff == n_total``, ``frac_diff == 1.0``, ``max_ulp == ULP_MAX``, indices None.
        signatures: ``"float32(3, 4)"`` per repetition (``"missing"`` where absent).
        diff_reps: the repetitions whose digest differs from repetition 0's.
        kind: ``dtype.kind`` of repetition 0 (``"f"``, ``"i"``, ``"U"``...), for messages.
    """

    name: str
    dtype: str
    shape: tuple
    repeats: int
    bitwise_identical: bool
    n_diff: int
    n_total: int
    frac_diff: float
    max_ulp: int
    max_ulp_index: tuple | None
    first_diff_index: tuple | None
    digests: tuple[str, ...]
    n_unique: int
    nan_count: int
    inf_count: int
    shape_mismatch: bool
    signatures: tuple[str, ...] = ()
    diff_reps: tuple[int, ...] = ()
    kind: str = ""

    def message(self) -> str:
        """A ``torch.testing.assert_close``-style report of the comparison."""
        if self.bitwise_identical:
            lines = [
                "Tensors are bit-identical.",
                "",
                f"Identical elements: {self.n_total} of {self.dtype}{self.shape}",
                f"Unique results: 1 of {self.repeats} repetitions (digest {short_digest(self.digests[0], 16)})",
            ]
            if self.name:
                lines.append(f"Item {item_path(self.name)}")
            return "\n".join(lines)
        lines = ["Tensors are not bit-identical!", ""]
        if self.shape_mismatch:
            lines.append("The shape or dtype differs between repetitions:")
            lines += [f"  repetition {i}: {s}" for i, s in enumerate(self.signatures)]
        else:
            pct = self.n_diff / self.n_total if self.n_total else 0.0
            lines.append(f"Mismatched elements: {self.n_diff} / {self.n_total} ({pct:.1%})")
            lines.append(self._ulp_line())
            lines.append(f"First differing element at index {_index_text(self.first_diff_index)}")
        lines.append(f"Unique results: {self.n_unique} of {self.repeats} repetitions")
        if self.diff_reps and self.repeats > 2:
            lines.append(f"Repetitions differing from repetition 0: {list(self.diff_reps)}")
        return "\n".join(lines + _item_line(self.name))

    def _ulp_line(self) -> str:
        at = f"at index {_index_text(self.max_ulp_index)}"
        if self.max_ulp == ULP_MAX:
            if self.kind in "fc":
                return f"Greatest ULP distance: NaN vs non-NaN {at}"
            if self.kind not in _BITS_KINDS:
                return f"Greatest ULP distance: undefined for dtype {self.dtype} (first {at})"
        note = " (only the sign of zero or NaN payload bits differ)" if self.max_ulp == 0 else ""
        return f"Greatest ULP distance: {self.max_ulp} {at}{note}"


def _signature(a: np.ndarray | None) -> str:
    if a is None:
        return _MISSING
    key = (a.dtype, a.shape)
    sig = _SIGNATURES.get(key)
    if sig is None:
        sig = f"{a.dtype.name}{tuple(int(n) for n in a.shape)}"
        if len(_SIGNATURES) < 4096:
            _SIGNATURES[key] = sig
    return sig


def _dtype_name(dt: np.dtype) -> str:
    """``dt.name``, cached (NumPy computes it in Python on every access)."""
    name = _DTYPE_NAMES.get(dt)
    if name is None:
        name = _DTYPE_NAMES[dt] = dt.name
    return name


_DTYPE_NAMES: dict[np.dtype, str] = {}


def _nonfinite_counts(a: np.ndarray) -> tuple[int, int]:
    if a.dtype.kind not in "fc":
        return 0, 0
    if a.nbytes <= _SMALL_BYTES:  # one pass, no floating-point state to save: the small-tensor fast path
        if np.isfinite(a).all():
            return 0, 0
        return _counted_nonfinite(a)
    # One reduction first (a fraction of the cost of the two counts): a sum of squares (BLAS dot,
    # float32/64) or a plain sum is finite only when no element is NaN or +-inf, and almost every
    # tensor is all finite. One that overflows from finite values only sends us on to the exact counts.
    with np.errstate(over="ignore", invalid="ignore"):
        flat = a.reshape(-1) if a.flags.c_contiguous else None
        if flat is not None and a.dtype.kind == "f" and a.dtype.itemsize in (4, 8):
            probe = np.dot(flat, flat)  # faster than np.add.reduce on large float arrays (a BLAS kernel)
        else:
            probe = np.add.reduce(a, axis=None, dtype=a.dtype)
        if np.isfinite(probe):
            return 0, 0
    return _counted_nonfinite(a)


def nonfinite_counts_all(arrays: Sequence[np.ndarray]) -> list[tuple[int, int]]:
    """:func:`_nonfinite_counts` of each array, the small float arrays of one dtype probed together: one
    ``isfinite`` over their concatenation says they are all finite (almost always), instead of one call per
    array (an NStepBiLSTM run answers 74 arrays of a few hundred bytes: the per-call cost dominates).
    Where the probe finds something not finite, each array of that dtype is counted on its own."""
    out: list[tuple[int, int] | None] = [None] * len(arrays)
    groups: dict[np.dtype, list[int]] = {}
    for i, a in enumerate(arrays):
        if a.dtype.kind not in "fc":
            out[i] = (0, 0)
        elif a.nbytes <= _SMALL_BYTES:
            groups.setdefault(a.dtype, []).append(i)
        else:
            out[i] = _nonfinite_counts(a)
    for idx in groups.values():
        if len(idx) > 1 and np.isfinite(np.concatenate([arrays[i].reshape(-1) for i in idx])).all():
            for i in idx:
                out[i] = (0, 0)
        else:
            for i in idx:
                out[i] = _nonfinite_counts(arrays[i])
    return out  # type: ignore[return-value]


def _counted_nonfinite(a: np.ndarray) -> tuple[int, int]:
    """The exact NaN and Inf counts of a float array, taken where a probe (:func:`_nonfinite_counts`,
    :func:`_digest_counted`) found something not finite."""
    return int(np.count_nonzero(np.isnan(a))), int(np.count_nonzero(np.isinf(a)))


def _max_ulp_of(x: np.ndarray, y: np.ndarray, ne: np.ndarray, nnz: int) -> tuple[int, int]:
    """(greatest ULP distance, flat index of the first differing element attaining it)."""
    kind = x.dtype.kind
    gather = nnz <= _GATHER_FRACTION * x.size
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


def _make(**fields: object) -> TensorComparison:
    """A :class:`TensorComparison` without the frozen dataclass's per-field ``__init__`` (a fifth of a small
    tensor's comparison): the same object, equal to one built the ordinary way."""
    return _from_dict(fields)


def _from_dict(fields: dict[str, object]) -> TensorComparison:
    obj = object.__new__(TensorComparison)
    object.__setattr__(obj, "__dict__", fields)
    return obj


_isfinite, _count_nonzero = np.isfinite, np.count_nonzero

#: (dtype, shape) -> (dtype name, digest header or None, signature): what the fast path needs of a layout.
_LAYOUTS: dict[tuple[np.dtype, tuple[int, ...]], tuple[str, bytes | None, str]] = {}


def _layout(dt: np.dtype, shape: tuple[int, ...], a: np.ndarray) -> tuple[str, bytes | None, str]:
    info = (_dtype_name(dt), _header(a), _signature(a))
    if len(_LAYOUTS) < 4096:
        _LAYOUTS[(dt, shape)] = info
    return info


def _identical_small(name: str, reps: Sequence[object]) -> TensorComparison | None:
    """The comparison of repetitions that are all the same small C-contiguous native array bytes, or None
    (then :func:`_compare` does the general work). The common case of a campaign, so it does the least:
    one bytes comparison per repetition, one hash, one ``isfinite`` pass, one cached layout lookup."""
    ref = reps[0]
    if type(ref) is not np.ndarray or ref.nbytes > _SMALL_BYTES or not ref.flags.c_contiguous:
        return None
    dt, shape = ref.dtype, ref.shape
    info = _LAYOUTS.get((dt, shape))
    if info is None:
        if not dt.isnative or dt.hasobject:
            return None
        info = _layout(dt, shape, ref)
    if info[1] is None:  # no fast digest for this layout (a big-endian machine)
        return None
    raw = ref.tobytes()
    for a in reps[1:]:
        if (type(a) is not np.ndarray or a.dtype is not dt and a.dtype != dt or a.shape != shape
                or not a.flags.c_contiguous or a.tobytes() != raw):
            return None
    kind = dt.kind
    size = ref.size
    if kind in "fc" and _count_nonzero(_isfinite(ref)) != size:
        return None  # NaN or Inf: counted on the general path
    n = len(reps)
    d0 = _XXH_PREFIX + _xxh3_128_hexdigest(info[1] + raw)
    return _from_dict({
        "name": name, "dtype": info[0], "shape": shape, "repeats": n, "bitwise_identical": True,
        "n_diff": 0, "n_total": size, "frac_diff": 0.0, "max_ulp": 0, "max_ulp_index": None,
        "first_diff_index": None, "digests": (d0,) * n, "n_unique": 1, "nan_count": 0, "inf_count": 0,
        "shape_mismatch": False, "signatures": (info[2],) * n, "diff_reps": (), "kind": kind})


def _compare(name: str, reps: Sequence[np.ndarray | None], early_exit: bool,
             digests: Sequence[str | None] | None = None,
             counts: tuple[int, int] | None = None) -> TensorComparison:
    if not reps:
        raise ValueError(f"compare {name!r}: needs at least one repetition")
    if early_exit and digests is None and counts is None:
        fast = _identical_small(name, reps)
        if fast is not None:
            return fast
    arrs = [None if r is None else _canon(r) for r in reps]
    ref = arrs[0] if arrs[0] is not None else next((a for a in arrs if a is not None), None)
    if ref is None:
        raise ValueError(f"compare {name!r}: no repetition holds an array")
    sigs = tuple(_signature(a) for a in arrs)
    same_sig = all(s == sigs[0] for s in sigs)
    ref_counts: tuple[int, int] | None = None
    if digests is not None and len(digests) == len(arrs) and all(d is not None for d, a in zip(digests, arrs)
                                                                  if a is not None):
        # taken already, by this module's digest(), when the runs were recorded: digest once
        digests = tuple(_MISSING if a is None else d for d, a in zip(digests, arrs))
    elif early_exit and same_sig and ref.nbytes <= _SMALL_BYTES and not ref.dtype.hasobject:
        # Small-tensor fast path: equal bytes under one signature are equal digests, so the common case
        # (every repetition identical) hashes one array, not every one.
        raw = ref.tobytes()
        d0 = digest(ref)
        digests = tuple(d0 if a.tobytes() == raw else digest(a) for a in arrs)  # type: ignore[union-attr]
    else:
        # the reference's NaN/Inf counts in the pass that hashes it, where they are not known yet
        at = None if counts is not None else next(i for i, a in enumerate(arrs) if a is ref)
        digests, ref_counts = _digest_many(arrs, DIGEST_ALGORITHM, at)
    n_total = int(ref.size)
    nan_count, inf_count = (counts if counts is not None else ref_counts if ref_counts is not None
                            else _nonfinite_counts(ref))
    d_first = digests[0]
    common = dict(
        name=name, dtype=_dtype_name(ref.dtype), shape=ref.shape,  # a tuple of Python ints already
        repeats=len(arrs), n_total=n_total, digests=digests, n_unique=len(set(digests)),
        nan_count=nan_count, inf_count=inf_count, signatures=sigs,
        diff_reps=tuple(i for i, d in enumerate(digests) if d != d_first),
        kind=ref.dtype.kind,
    )
    if not same_sig:
        return _make(
            bitwise_identical=False, n_diff=n_total, frac_diff=1.0, max_ulp=ULP_MAX,
            max_ulp_index=None, first_diff_index=None, shape_mismatch=True, **common)
    identical = _make(
        bitwise_identical=True, n_diff=0, frac_diff=0.0, max_ulp=0, max_ulp_index=None,
        first_diff_index=None, shape_mismatch=False, **common)
    if early_exit and common["n_unique"] == 1:
        return identical

    w0, f0 = _words(ref), ref.reshape(-1)
    mask: np.ndarray | None = None
    best, best_flat = -1, -1
    for r in range(1, len(arrs)):
        if early_exit and digests[r] == digests[0]:
            continue
        ne = _not_equal(w0, _words(arrs[r]))
        nnz = int(np.count_nonzero(ne))
        if nnz == 0:
            continue
        if mask is None:
            mask = ne
        else:
            np.logical_or(mask, ne, out=mask)
        m, flat = _max_ulp_of(f0, arrs[r].reshape(-1), ne, nnz)
        if m > best or (m == best and flat < best_flat):
            best, best_flat = m, flat
    if mask is None:
        return identical
    n_diff = int(np.count_nonzero(mask))
    return _make(
        bitwise_identical=False, n_diff=n_diff, frac_diff=n_diff / n_total, max_ulp=best,
        max_ulp_index=_unravel(best_flat, ref.shape),
        first_diff_index=_unravel(int(np.argmax(mask)), ref.shape),
        shape_mismatch=False, **common)


def compare_repeats(
    name: str, reps: Sequence[np.ndarray], *, early_exit: bool = True
) -> TensorComparison:
    """Compare the repetitions of one tensor bitwise, each against repetition 0.

    One repetition is trivially identical. When every digest equals repetition 0's the
    element-wise work is skipped (``early_exit``; pass False to force it, which gives the same
    result). Otherwise the bit views are compared without copies and ULP distances are
    computed only for repetitions that differ -- on the gathered differing elements when they
    are few. ``None`` in ``reps`` stands for a missing array and counts as a shape mismatch.

    Raises:
        ValueError: if ``reps`` is empty or holds no array.
        TypeError: for ``object`` arrays.
    """
    if early_exit and reps:
        fast = _identical_small(name, reps)
        if fast is not None:
            return fast
    return _compare(name, list(reps), early_exit)


def compare_pair(name: str, a: np.ndarray, b: np.ndarray) -> TensorComparison:
    """Compare two arrays bitwise (CPU vs GPU, context A vs B): :func:`compare_repeats` of 2."""
    return _compare(name, [a, b], True)


def compare_results(reps: Sequence[Mapping[str, np.ndarray]],
                    digests: Mapping[str, Sequence[str | None]] | None = None,
                    counts: Mapping[str, tuple[int, int]] | None = None) -> dict[str, TensorComparison]:
    """Compare every named array across repetitions, each a mapping name -> array.

    Names are taken in order of first appearance. A name present in some repetitions and
    missing from others is a shape mismatch (its signature reads ``"missing"``). ``digests`` (name ->
    :func:`digest` of each repetition, as a run record took them) saves hashing the arrays again, and
    ``counts`` (name -> NaN and Inf counts of the first repetition holding it) saves counting them: with
    both, a name whose digests all agree costs no array work at all (a campaign's common case).
    """
    reps = list(reps)
    names = dict.fromkeys(k for rep in reps for k in rep)
    digests = digests or {}
    counts = counts or {}
    out = {}
    for n in names:
        arrs = [rep.get(n) for rep in reps]
        d, c = digests.get(n), counts.get(n)
        fast = _identical_by_digest(n, arrs, d, c) if d is not None and c is not None else None
        out[n] = fast if fast is not None else _compare(n, arrs, True, d, c)
    return out


def _identical_by_digest(name: str, arrs: list[np.ndarray | None], digests: Sequence[str | None],
                         counts: tuple[int, int]) -> TensorComparison | None:
    """The comparison of repetitions whose recorded digests all agree and whose layouts match, built from
    the record alone (no array is read); None when that is not the case."""
    ref = arrs[0]
    if ref is None or len(digests) != len(arrs):
        return None
    d0 = digests[0]
    dt, shape = ref.dtype, ref.shape
    for a, d in zip(arrs, digests):
        if d != d0 or a is None or (a.dtype is not dt and a.dtype != dt) or a.shape != shape:
            return None
    if not isinstance(d0, str) or not dt.isnative:
        return None
    n = len(arrs)
    return _from_dict({
        "name": name, "dtype": _dtype_name(dt), "shape": shape, "repeats": n, "bitwise_identical": True,
        "n_diff": 0, "n_total": ref.size, "frac_diff": 0.0, "max_ulp": 0, "max_ulp_index": None,
        "first_diff_index": None, "digests": (d0,) * n, "n_unique": 1, "nan_count": int(counts[0]),
        "inf_count": int(counts[1]), "shape_mismatch": False, "signatures": (_signature(ref),) * n,
        "diff_reps": (), "kind": dt.kind})


# --------------------------------------------------------------------------- asserts


def assert_bit_identical(
    reps_or_a: Sequence[np.ndarray] | np.ndarray,
    b: np.ndarray | None = None,
    *,
    name: str = "tensor",
) -> TensorComparison:
    """Raise :class:`ComparisonFailure` unless the arrays are bit-identical.

    ``assert_bit_identical(a, b)`` compares two arrays; ``assert_bit_identical([r0, r1, ...])``
    compares repetitions. Returns the comparison when identical.

    Raises:
        ComparisonFailure: with :meth:`TensorComparison.message` when not identical.
        TypeError: for a single ndarray without ``b`` (ambiguous: pass a list of repetitions).
    """
    if b is not None:
        result = compare_pair(name, reps_or_a, b)
    elif isinstance(reps_or_a, np.ndarray):
        raise TypeError("assert_bit_identical(a) needs b, or a sequence of repetitions")
    else:
        result = compare_repeats(name, reps_or_a)
    if not result.bitwise_identical:
        raise ComparisonFailure(result.message())
    return result


def assert_results_identical(
    reps: Sequence[Mapping[str, np.ndarray]],
) -> dict[str, TensorComparison]:
    """Raise :class:`ComparisonFailure` unless every named array is bit-identical across reps.

    The message joins the messages of every differing name. Returns the comparisons.
    """
    results = compare_results(reps)
    bad = [r for r in results.values() if not r.bitwise_identical]
    if bad:
        raise ComparisonFailure("\n\n".join(r.message() for r in bad))
    return results
