"""The harness's one digest of an array: ``"<algorithm>:<hex>"`` of its dtype, shape and bits.

:func:`digest` of one array, :func:`digest_all` of several (large ones on threads), and what can be said of two
digests (:func:`same_digest`, :func:`digest_mismatch_reason`, :func:`short_digest`). A large float array is
hashed and probed for NaN/Inf in one pass (:func:`digest_counted`). Pure NumPy, :mod:`hashlib` and the optional
hash packages (xxhash, blake3).
"""

from __future__ import annotations

import hashlib
import sys
from typing import Sequence

import numpy as np

from harness.core.errors import InvalidArgument
from harness.judge.ulp import SMALL_BYTES, counted_nonfinite, nonfinite_counts

__all__ = [
    "MISSING", "DIGEST_ALGORITHM", "DIGEST_ALGORITHMS", "digest", "digest_bytes", "digest_header",
    "digest_algorithm_of", "digest_mismatch_reason", "same_digest", "short_digest", "BLOCK_BYTES",
    "digest_counted", "digest_all", "digest_many",
]


MISSING = "missing"

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
    if algorithm == "xxh3_128" and a.flags.c_contiguous and a.nbytes <= SMALL_BYTES:
        header = digest_header(a)  # None for byte orders and dtypes the general path must handle
        if header is not None:
            return digest_bytes(header, a.tobytes())
    if a.dtype.hasobject:
        raise TypeError(f"cannot digest an array of dtype {a.dtype}: its bytes are pointers")
    order = a.dtype.byteorder
    if order == ">" or (order == "=" and sys.byteorder == "big"):
        a = a.astype(a.dtype.newbyteorder("<"))
    if not a.flags.c_contiguous:
        a = a.copy(order="C")
    h = _hasher(algorithm, f"{a.dtype.name}|{tuple(int(n) for n in a.shape)}|".encode())
    h.update(a.reshape(-1).view(np.uint8).data)  # type: ignore[attr-defined]
    return f"{algorithm}:{h.hexdigest()}"  # type: ignore[attr-defined]


_XXH_PREFIX = "xxh3_128:"

_HEADERS: dict[tuple[np.dtype, tuple[int, ...]], bytes | None] = {}


def digest_bytes(header: bytes, data: bytes) -> str:
    """The xxh3_128 :func:`digest` of a small array from its :func:`digest_header` and raw little-endian bytes."""
    return _XXH_PREFIX + _xxh3_128_hexdigest(header + data)


def _xxh3_128_hexdigest(data: bytes) -> str:
    import xxhash

    global _xxh3_128_hexdigest  # noqa: PLW0603 -- bind the C function once, skipping the import afterwards
    _xxh3_128_hexdigest = xxhash.xxh3_128_hexdigest
    return xxhash.xxh3_128_hexdigest(data)


def digest_header(a: np.ndarray) -> bytes | None:
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
    if a == MISSING or b == MISSING:
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
    if a == MISSING or b == MISSING:
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
BLOCK_BYTES = 1 << 20


def digest_counted(a: np.ndarray, algorithm: str) -> tuple[str, tuple[int, int]]:
    """``(digest(a, algorithm), nonfinite_counts(a))``, reading ``a`` once where it is a large C-contiguous
    little-endian float32/float64 array. The results are those of the two calls: the digest is the streaming
    hash of the same bytes, and NaN/Inf are counted exactly as soon as a block's largest or smallest value is
    not finite, which is exactly when the block holds a NaN or an infinity (both propagate a NaN)."""
    a = np.asarray(a)
    header = (digest_header(a) if a.flags.c_contiguous and a.dtype.kind == "f" and a.dtype.itemsize in (4, 8)
              and a.nbytes > SMALL_BYTES else None)
    if header is None:
        return digest(a, algorithm), nonfinite_counts(a)
    h = _hasher(algorithm, header)
    flat = a.reshape(-1)
    step = BLOCK_BYTES // a.itemsize
    finite = True
    with np.errstate(invalid="ignore"):
        for start in range(0, flat.size, step):
            block = flat[start:start + step]
            h.update(block.view(np.uint8).data)  # type: ignore[attr-defined]
            finite = finite and bool(np.isfinite(np.maximum.reduce(block))) and bool(
                np.isfinite(np.minimum.reduce(block)))
    counts = (0, 0) if finite else counted_nonfinite(a)
    return f"{algorithm}:{h.hexdigest()}", counts  # type: ignore[attr-defined]


def digest_all(arrs: Sequence[np.ndarray | None], algorithm: str = DIGEST_ALGORITHM) -> tuple[str, ...]:
    """:func:`digest` of each array (``None`` -> the missing marker), large ones on parallel threads.

    The calling thread hashes too, and helper threads are plain threads started per call: on large arrays a
    ``ThreadPoolExecutor`` made per call cost more than it saved (against one helper thread).
    """
    return digest_many(list(arrs), algorithm)[0]


def digest_many(arrs: list[np.ndarray | None], algorithm: str, counted: int | None = None
                 ) -> tuple[tuple[str, ...], tuple[int, int] | None]:
    """:func:`digest_all`'s work; with ``counted`` (an index), also that array's NaN/Inf counts, taken in the
    pass that hashes it (:func:`digest_counted`; None where that array is missing)."""
    out: list[str | None] = [None] * len(arrs)
    got: list[tuple[int, int]] = []

    def one(i: int) -> None:
        if i == counted:
            out[i], c = digest_counted(arrs[i], algorithm)  # type: ignore[arg-type]
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
    return tuple(MISSING if a is None else str(out[i]) for i, a in enumerate(arrs)), (got[0] if got else None)
