"""harness.judge.oracle_blocks: the greatest values of blocks combine into numpy.argmax's choice over the whole
array (the first NaN, else the first greatest value), whatever the blocks; the relative error and the error over
allowed of every element are their definitions, with and without zero divisors."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.judge.oracle_blocks import Settings, Worst, elementwise

VALUES = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, 2.0]), st.floats())


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(values=st.lists(VALUES, min_size=1, max_size=40), cuts=st.lists(st.integers(1, 39), max_size=6))
def test_block_maxima_combine_into_the_whole_arrays_argmax(values, cuts):
    whole = np.array(values)
    edges = [0] + sorted({c for c in cuts if c < whole.size}) + [whole.size]
    worst = Worst()
    for start, stop in zip(edges, edges[1:]):
        j = int(np.argmax(whole[start:stop]))
        worst.offer(float(whole[start + j]), start + j, None, 0)
    assert worst.index == int(np.argmax(whole))
    assert repr(worst.value) == repr(float(whole[worst.index]))


FINITE = st.sampled_from([0.0, -0.0, 1.0, -3.0, 1e-30, 2.5e5])


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(pairs=st.lists(st.tuples(FINITE, FINITE, st.booleans()), min_size=1, max_size=30),
       atol=st.sampled_from([0.0, 1e-6]), rtol=st.sampled_from([0.0, 1e-3]))
def test_relative_error_and_error_over_allowed_are_their_definitions(pairs, atol, rtol):
    """rel is 0 where the error is, else error / |expected|; ratio is 0 where the error is, inf where nothing is
    allowed, else error / allowed: whether or not some divisor is 0 (the fast quotient and the masked forms)."""
    e = np.array([x for x, _, _ in pairs])
    a = np.array([x if same else y for x, y, same in pairs], dtype=np.float32)
    m = elementwise(a, e, None, Settings(np.dtype(np.float32), atol, rtol, None, None, True))
    for i, (err, x) in enumerate(zip(m.err.tolist(), e.tolist())):
        allowed = atol + rtol * abs(x)
        assert m.rel[i] == (0.0 if err == 0 else err / abs(x) if x != 0 else math.inf)
        assert m.ratio[i] == (0.0 if err == 0 else err / allowed if allowed > 0 else math.inf)
