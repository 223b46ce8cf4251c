"""harness.subjects.exact_sums: the vectorized exact scatter-add sums equal math.fsum's correctly rounded ones bit
for bit, whatever the exponents, cancellations, ties, long pile-ups on one row and non-finite values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.subjects.exact_sums import exact_sum, scatter_rows, special_sum


def _fsum_rows(ids: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, rows.shape[1]))
    for r in np.unique(ids):
        block = rows[ids == r]
        for j in range(rows.shape[1]):
            col = block[:, j]
            out[r, j] = exact_sum(col.tolist()) if np.isfinite(col).all() else special_sum(col)
    return out


def _draw(rng: np.random.Generator, kind: str) -> tuple[np.ndarray, np.ndarray, int]:
    n, width, vocab = int(rng.integers(3, 400)), int(rng.integers(1, 6)), int(rng.integers(1, 8))
    ids = rng.integers(0, vocab, n)
    rows = rng.standard_normal((n, width))
    if kind == "exponents":
        rows *= np.ldexp(1.0, rng.integers(-80, 80, (n, width)))
    elif kind == "ties":  # values one or half an ULP of 1 apart: the rounding and its sticky bit decide
        pick = np.array([1.0, -1.0, 2.0 ** -53, -2.0 ** -53, 2.0 ** -54, 2.0 ** -106, -2.0 ** -107, 2.0 ** 52, 0.5])
        rows = rng.choice(pick, (n, width)) * 2.0 ** int(rng.integers(-3, 3))
    elif kind == "cancel":
        m = n // 2
        rows[:m] = -rows[m:2 * m]
    elif kind == "float32":  # what the subjects' gradients are: 24 significant bits, read without a cast
        rows = (rows * np.ldexp(1.0, rng.integers(-30, 30, (n, width)))).astype(np.float32)
    elif kind == "special":
        rows *= np.ldexp(1.0, rng.integers(-1000, 1000, (n, width)))  # too wide for the limbs: fsum's path
        rows[rng.random((n, width)) < 0.03] = np.inf
        rows[rng.random((n, width)) < 0.03] = np.nan
        rows[rng.random((n, width)) < 0.03] = 1e308  # sums that overflow
    return ids, rows, vocab


@pytest.mark.parametrize("kind", ["normal", "exponents", "ties", "cancel", "float32", "special"])
def test_vectorized_exact_sums_equal_fsum_bit_for_bit(kind):
    rng = np.random.default_rng(sum(map(ord, kind)))
    for _ in range(40):
        ids, rows, vocab = _draw(rng, kind)
        ours, theirs = scatter_rows(ids, rows, vocab), _fsum_rows(ids, rows.astype(np.float64), vocab)
        assert np.array_equal(ours, theirs, equal_nan=True), kind


def test_a_long_pile_up_on_one_row_is_summed_exactly():
    rows = np.array([[1.0], [2.0 ** -53]] * 5000)  # fifty thousand half-ULPs: a naive sum loses all of them
    ids = np.zeros(len(rows), dtype=np.int64)
    assert scatter_rows(ids, rows, 1)[0, 0] == math.fsum(rows[:, 0].tolist()) == 5000 + 5000 * 2.0 ** -53


def test_scatter_over_a_large_table_equals_the_fsum_reference_and_reads_kept_positions_only() -> None:
    """At a table size that takes the mapped-zeros path (over 16 MiB of float64), with rows of every pile-up
    (1, 2 and many ids on a row) given through ``positions``, the sums equal the correctly rounded reference and
    rows nobody names stay 0."""
    rng = np.random.default_rng(7)
    vocab, width, n = 3000, 800, 600
    ids = np.r_[rng.integers(0, vocab, n - 40), np.full(40, 5)]  # one row with 40+ terms
    rows = (rng.standard_normal((2 * n, width)) * np.ldexp(1.0, rng.integers(-20, 20, (2 * n, width))))
    rows = rows.astype(np.float32)
    positions = np.sort(rng.choice(2 * n, n, replace=False))
    got = scatter_rows(ids, rows, vocab, positions=positions)
    assert got.nbytes >= 1 << 24 and got.dtype == np.float64
    kept = rows[positions].astype(np.float64)
    named = np.unique(ids)
    want = _fsum_rows(ids, kept, vocab)
    assert np.array_equal(got[named].view(np.int64), want[named].view(np.int64))
    untouched = np.setdiff1d(np.arange(vocab), named)
    assert not got[untouched].any()
