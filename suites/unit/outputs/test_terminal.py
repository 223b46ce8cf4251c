"""harness/outputs/terminal.py: the verdict matrix in a terminal's columns, long headers abbreviated with a key,
and the summary in a few lines."""

from __future__ import annotations

import pandas as pd

from harness.outputs.terminal import terminal_matrix, terminal_summary
from suites.unit.outputs.test_render import _cells

CELLS = _cells([
    {"subject": "a.impl", "verdict": "bit-identical"},
    {"subject": "a.impl", "relation": "duplicate", "verdict": "bit-identical"},
    {"subject": "a.impl", "context": "debug", "verdict": "diverged as allowed", "worst_ulp": 12},
])


def test_one_line_per_subject_and_a_key_for_every_abbreviated_header() -> None:
    text = terminal_matrix(CELLS, width=20)
    lines = text.splitlines()
    assert sum(line.startswith("a.impl") for line in lines) == 1
    key = lines[-1]
    assert key.startswith("key: ") and "= duplicate" in key and "= default" in key
    assert "≠12" in text
    assert terminal_matrix(CELLS.iloc[0:0]) == ""


def test_the_summary_with_cells_is_the_headline_then_the_matrix_and_its_legend() -> None:
    summary = pd.DataFrame([{"subject": "a.impl"}])
    out = terminal_summary(summary, ["PASS: all 3 cells that ran hold"], cells=CELLS)
    assert out.splitlines()[0] == "PASS: all 3 cells that ran hold" and "= bit-identical" in out.splitlines()[-1]
    assert terminal_summary(pd.DataFrame()) == "no tasks"
