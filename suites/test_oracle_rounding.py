"""The oracle is rounded to the subject's dtype before judging: an exact value beyond float16's range is ``inf``
there, so a subject's ``inf`` is then correct; a partial sum that overflows while the exact value fits is not."""

from __future__ import annotations

import numpy as np

from harness.judge.tolerance import compare_oracle


def test_an_exact_value_beyond_float16s_range_correctly_rounds_to_inf():
    exact = np.array([104078.0, 1.5, -70000.0])
    got = exact.astype(np.float16)  # [inf, 1.5, -inf]: the correctly rounded values
    assert np.isinf(got[0]) and np.isinf(got[2])
    e = compare_oracle("grad.W", got, exact)
    assert e.within_tolerance and e.max_abs == 0.0


def test_a_partial_sum_that_overflows_while_the_total_fits_stays_an_error():
    exact = np.array([60000.0, 1.5])  # fits in float16 (max 65,504)
    got = np.array([np.inf, 1.5], dtype=np.float16)  # e.g. 40000 + 30000 - 10000 summed in float16
    e = compare_oracle("grad.W", got, exact)
    assert not e.within_tolerance and e.max_abs == np.inf


def test_an_inf_of_the_wrong_sign_is_an_error():
    exact = np.array([104078.0])
    got = np.array([-np.inf], dtype=np.float16)
    assert not compare_oracle("grad.W", got, exact).within_tolerance
