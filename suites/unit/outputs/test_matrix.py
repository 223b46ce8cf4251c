"""harness/outputs/matrix.py: ULP counts as a cell shows them, the one subject order, the verdict matrix and the
invariance table, from a cells frame."""

from __future__ import annotations

import pandas as pd

from harness.outputs.matrix import invariance_frame, matrix_frame, subject_order, ulp_text
from suites.unit.outputs.test_render import _cells

CELLS = _cells([
    {"subject": "oracle.lstm", "role": "oracle"},
    {"subject": "control.nondeterministic", "role": "control", "verdict": "diverged as allowed", "worst_ulp": 16},
    {"subject": "b.impl", "verdict": "diverged as allowed", "worst_ulp": 2_100_000, "context": "blas1"},
    {"subject": "a.impl", "verdict": "within tolerance", "error_ratio": 0.004},
    {"subject": "b.impl", "relation": "subbatch", "verdict": "diverged as allowed", "worst_ulp": 5145,
     "tensors": 4, "tensors_differing": 1},
    {"subject": "b.impl", "device": "gpu:0", "verdict": "skipped", "reason": "no GPU"},
])


def test_ulp_text_abbreviates_and_leaves_none_empty() -> None:
    assert [ulp_text(v) for v in (None, float("nan"), 0, 999, 2_100_000, 3 * 10**9, 2**63)] == \
        ["", "", "0", "999", "2.1M", "3G", "NaN"]


def test_implementations_then_controls_then_oracles() -> None:
    assert subject_order(CELLS) == ["a.impl", "b.impl", "control.nondeterministic", "oracle.lstm"]
    assert subject_order(CELLS.iloc[0:0]) == []


def test_the_matrix_has_a_row_per_subject_and_leaves_out_a_device_that_only_skipped() -> None:
    text = matrix_frame(CELLS)
    assert list(text.index) == subject_order(CELLS)
    assert not any(c.startswith("gpu") for c in text.columns)
    assert text.loc["b.impl", "cpu blas1"] == "≠2.1M" and text.loc["a.impl", "cpu default"] == "≈<0.01×"
    assert matrix_frame(CELLS, "verdict").loc["b.impl", "cpu subbatch"] == "diverged as allowed"
    assert matrix_frame(pd.DataFrame()).empty


def test_the_invariance_table_has_the_relations_rows_only() -> None:
    inv = invariance_frame(CELLS)
    assert inv.to_dict("records") == [{"subject": "b.impl", "device": "cpu", "relation": "subbatch",
                                       "verdict": "diverged as allowed", "tensors": 4, "bit-identical": "75%",
                                       "worst ULP": "5.14k"}]
