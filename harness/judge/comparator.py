"""The comparator: arrays in, frozen result objects out.

This module knows nothing of Chainer, CuPy, subjects, contexts or files. It imports only
NumPy, the standard library and its neighbours :mod:`harness.judge.ulp` (bit views, ULP distance, NaN/Inf
counts) and :mod:`harness.judge.digest` (the digest). Every function is pure; only the ``assert_*``
functions raise :class:`~harness.core.errors.ComparisonFailure` (an ``AssertionError``), and the
other functions raise only on misuse (``TypeError``/``ValueError``: no repetitions, a dtype
with no bit pattern such as ``object``).

Two kinds of question are answered:

- *Are these results bit-identical?* :func:`compare_repeats` (N repetitions of one tensor),
  :func:`compare_pair` (two arrays, e.g. CPU vs GPU) and :func:`compare_results` (N
  repetitions of a whole name -> array mapping) return :class:`~harness.core.records.TensorComparison`
  (the one record of a comparison, which a task record keeps), :func:`message` says it in words. Identity is
  judged on the bit pattern: ``-0.0`` and ``+0.0`` differ, two NaNs with different payloads
  differ. Distances are measured in ULPs from the bit patterns (:func:`harness.judge.ulp.ulp_distance`, as
  NumPy's ``nulp_diff`` does), and messages follow ``torch.testing.assert_close``.
- *Is this result close to the float64 oracle?* That is :mod:`harness.judge.tolerance`'s question.
"""

from __future__ import annotations

from typing import Mapping, Sequence, cast

import numpy as np

from harness.core.errors import ComparisonFailure
from harness.core.records import TensorComparison
from harness.judge.digest import (
    DIGEST_ALGORITHM,
    MISSING,
    digest,
    digest_bytes,
    digest_header,
    digest_many,
    short_digest,
)
from harness.judge.ulp import (
    BITS_KINDS,
    SMALL_BYTES,
    ULP_MAX,
    bits_not_equal,
    canonical,
    dtype_name,
    index_text,
    item_line,
    item_path,
    max_ulp_of,
    nonfinite_counts,
    unravel,
    word_view,
)

__all__ = [
    "compare_repeats", "compare_pair", "compare_results", "message",
    "assert_bit_identical", "assert_results_identical",
]


_SIGNATURES: dict[tuple[np.dtype, tuple[int, ...]], str] = {}


def message(c: TensorComparison) -> str:
    """A ``torch.testing.assert_close``-style report of comparison ``c``."""
    if c.bitwise_identical:
        lines = [
            "Tensors are bit-identical.",
            "",
            f"Identical elements: {c.n_total} of {c.dtype}{c.shape}",
            f"Unique results: 1 of {c.repeats} repetitions (digest {short_digest(c.digests[0], 16)})",
        ]
        if c.name:
            lines.append(f"Item {item_path(c.name)}")
        return "\n".join(lines)
    lines = ["Tensors are not bit-identical!", ""]
    if c.shape_mismatch:
        lines.append("The shape or dtype differs between repetitions:")
        lines += [f"  repetition {i}: {s}" for i, s in enumerate(c.signatures)]
    else:
        pct = c.n_diff / c.n_total if c.n_total else 0.0
        lines.append(f"Mismatched elements: {c.n_diff} / {c.n_total} ({pct:.1%})")
        lines.append(_ulp_line(c))
        lines.append(f"First differing element at index {index_text(c.first_diff_index)}")
    lines.append(f"Unique results: {c.n_unique} of {c.repeats} repetitions")
    if c.diff_reps and c.repeats > 2:
        lines.append(f"Repetitions differing from repetition 0: {list(c.diff_reps)}")
    return "\n".join(lines + item_line(c.name))


def _ulp_line(c: TensorComparison) -> str:
    at = f"at index {index_text(c.max_ulp_index)}"
    if c.max_ulp == ULP_MAX:
        if c.kind in "fc":
            return f"Greatest ULP distance: NaN vs non-NaN {at}"
        if c.kind not in BITS_KINDS:
            return f"Greatest ULP distance: undefined for dtype {c.dtype} (first {at})"
    note = " (only the sign of zero or NaN payload bits differ)" if c.max_ulp == 0 else ""
    return f"Greatest ULP distance: {c.max_ulp} {at}{note}"


def _signature(a: np.ndarray | None) -> str:
    if a is None:
        return MISSING
    key = (a.dtype, a.shape)
    sig = _SIGNATURES.get(key)
    if sig is None:
        sig = f"{a.dtype.name}{tuple(int(n) for n in a.shape)}"
        if len(_SIGNATURES) < 4096:
            _SIGNATURES[key] = sig
    return sig


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
    info = (dtype_name(dt), digest_header(a), _signature(a))
    if len(_LAYOUTS) < 4096:
        _LAYOUTS[(dt, shape)] = info
    return info


def _identical_small(name: str, reps: Sequence[object]) -> TensorComparison | None:
    """The comparison of repetitions that are all the same small C-contiguous native array bytes, or None
    (then :func:`_compare` does the general work). The common case of a campaign, so it does the least:
    one bytes comparison per repetition, one hash, one ``isfinite`` pass, one cached layout lookup."""
    ref = reps[0]
    if type(ref) is not np.ndarray or ref.nbytes > SMALL_BYTES or not ref.flags.c_contiguous:
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
    d0 = digest_bytes(info[1], raw)
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
    arrs = [None if r is None else canonical(r) for r in reps]
    ref = arrs[0] if arrs[0] is not None else next((a for a in arrs if a is not None), None)
    if ref is None:
        raise ValueError(f"compare {name!r}: no repetition holds an array")
    sigs = tuple(_signature(a) for a in arrs)
    same_sig = all(s == sigs[0] for s in sigs)
    ref_counts: tuple[int, int] | None = None
    if digests is not None and len(digests) == len(arrs) and all(d is not None for d, a in zip(digests, arrs)
                                                                  if a is not None):
        # taken already, by this module's digest(), when the runs were recorded: digest once
        digests = tuple(MISSING if a is None else d for d, a in zip(digests, arrs))
    elif early_exit and same_sig and ref.nbytes <= SMALL_BYTES and not ref.dtype.hasobject:
        # Small-tensor fast path: equal bytes under one signature are equal digests, so the common case
        # (every repetition identical) hashes one array, not every one.
        raw = ref.tobytes()
        d0 = digest(ref)
        digests = tuple(d0 if a.tobytes() == raw else digest(a) for a in arrs)  # type: ignore[union-attr,arg-type]
    else:
        # the reference's NaN/Inf counts in the pass that hashes it, where they are not known yet
        at = None if counts is not None else next(i for i, a in enumerate(arrs) if a is ref)
        digests, ref_counts = digest_many(arrs, DIGEST_ALGORITHM, at)
    n_total = int(ref.size)
    nan_count, inf_count = (counts if counts is not None else ref_counts if ref_counts is not None
                            else nonfinite_counts(ref))
    d_first = digests[0]
    common = dict(
        name=name, dtype=dtype_name(ref.dtype), shape=ref.shape,  # a tuple of Python ints already
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

    w0, f0 = word_view(ref), ref.reshape(-1)
    mask: np.ndarray | None = None
    best, best_flat = -1, -1
    for r in range(1, len(arrs)):
        if early_exit and digests[r] == digests[0]:
            continue
        rep = arrs[r]
        assert rep is not None  # every repetition is present here (a missing one returned above)
        ne = bits_not_equal(w0, word_view(rep))
        nnz = int(np.count_nonzero(ne))
        if nnz == 0:
            continue
        if mask is None:
            mask = ne
        else:
            np.logical_or(mask, ne, out=mask)
        m, flat = max_ulp_of(f0, rep.reshape(-1), ne, nnz)
        if m > best or (m == best and flat < best_flat):
            best, best_flat = m, flat
    if mask is None:
        return identical
    n_diff = int(np.count_nonzero(mask))
    return _make(
        bitwise_identical=False, n_diff=n_diff, frac_diff=n_diff / n_total, max_ulp=best,
        max_ulp_index=unravel(best_flat, ref.shape),
        first_diff_index=unravel(int(np.argmax(mask)), ref.shape),
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
        "name": name, "dtype": dtype_name(dt), "shape": shape, "repeats": n, "bitwise_identical": True,
        "n_diff": 0, "n_total": ref.size, "frac_diff": 0.0, "max_ulp": 0, "max_ulp_index": None,
        "first_diff_index": None, "digests": (d0,) * n, "n_unique": 1, "nan_count": int(counts[0]),
        "inf_count": int(counts[1]), "shape_mismatch": False, "signatures": (_signature(ref),) * n,
        "diff_reps": (), "kind": dt.kind})


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
        ComparisonFailure: with :func:`message` when not identical.
        TypeError: for a single ndarray without ``b`` (ambiguous: pass a list of repetitions).
    """
    if b is not None:
        result = compare_pair(name, cast(np.ndarray, reps_or_a), b)
    elif isinstance(reps_or_a, np.ndarray):
        raise TypeError("assert_bit_identical(a) needs b, or a sequence of repetitions")
    else:
        result = compare_repeats(name, reps_or_a)
    if not result.bitwise_identical:
        raise ComparisonFailure(message(result))
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
        raise ComparisonFailure("\n\n".join(message(r) for r in bad))
    return results
