"""A trajectory's files: the table holds every step of every comparison, the figure is a PNG also where a pair
never differs (nothing to put on a log axis), and the verdict line is written as printed."""

from __future__ import annotations

import csv

from harness.judge.trajectory import Divergence, StepDistance
from harness.outputs.trajectory_files import FIGURE_NAME, TABLE_NAME, VERDICT_NAME, plot_trajectory, write_trajectory


def _div(rel, loss_b):
    return Divergence(len(rel), tuple(
        StepDistance(k, r == 0 and lb == 1.0, 1.0, lb, () if r == 0 else ("params",), None if r is None else 3, r)
        for k, (r, lb) in enumerate(zip(rel, loss_b))))


def test_the_files_hold_the_table_the_figure_and_the_line(tmp_path):
    pair = _div([1e-9, None, 1e-8, 1e-7], [1.0, 1.0 + 1e-7, 1.0 + 1e-6, 1.0 + 1e-5])
    base = _div([2e-9, None, 2e-8, 1e-7], [1.0, 1.0, 1.0 + 2e-6, 1.0 + 2e-5])
    png = plot_trajectory(("a vs b", pair), ("one ULP in one weight", base), "a line")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    written = write_trajectory(tmp_path, [("a vs b", pair), ("one ULP in one weight", base)], "the line", png)
    assert sorted(p.name for p in written) == sorted([TABLE_NAME, FIGURE_NAME, VERDICT_NAME])
    rows = list(csv.DictReader((tmp_path / TABLE_NAME).open()))
    assert [(r["comparison"], r["step"]) for r in rows][:2] == [("a vs b", "0"), ("a vs b", "1")] and len(rows) == 8
    assert rows[1]["rel_l2"] == "" and rows[2]["rel_l2"] == repr(1e-8)
    assert (tmp_path / VERDICT_NAME).read_text() == "the line\n"


def test_a_pair_that_never_differs_still_draws():
    same = _div([0.0, 0.0], [1.0, 1.0])
    assert plot_trajectory(("run 1 vs run 2", same), None, "bit-identical")[:4] == b"\x89PNG"
