"""harness/subjects/controls.py: the controls' scatter-add is the embedding backward, in index order or shuffled,
and the two controls take the same valid float32 embed cases."""

from __future__ import annotations

import numpy as np

from harness.core.cases import Case
from harness.subjects.controls import SUBJECTS, scatter_add


def test_scatter_add_sums_each_row_and_leaves_out_the_ignore_label() -> None:
    x = np.array([[0, 2, 2], [-1, 0, 1]])
    gy = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    want = np.zeros((3, 2), np.float32)
    for i, row in enumerate(x.reshape(-1)):
        if row != -1:
            want[row] += gy.reshape(-1, 2)[i]
    assert np.array_equal(scatter_add(x, gy, 3, -1, None), want)
    shuffled = scatter_add(x, gy, 3, -1, np.random.default_rng(0))
    assert shuffled.dtype == np.float32 and np.allclose(shuffled, want)  # small integers: exact in any order


def test_the_two_controls_take_the_valid_float32_embed_cases_only() -> None:
    by = {s.name: s for s in SUBJECTS}
    assert set(by) == {"control.nondeterministic", "control.deterministic"}
    good = Case("embed", 1, {"vocab": 4, "width": 2, "ids_shape": [3]})
    half = Case("embed", 1, {"vocab": 4, "width": 2, "ids_shape": [3], "w_dtype": "float16"})
    for s in by.values():
        assert s.role == "control" and s.applies_to(good) and not s.applies_to(half)
