"""harness.judge.oracle_blocks: the greatest values of blocks combine into numpy.argmax's choice over the whole
array (the
first NaN, else the first greatest value), whatever the blocks."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.judge.oracle_blocks import Worst

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
