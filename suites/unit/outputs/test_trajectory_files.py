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


def _found():
    from harness.execute.trajectories import CampaignTrajectory

    same = CampaignTrajectory("c1", "model.a", "cpu", ("default", "blas1"), _div([0.0, 0.0], [1.0, 1.0]),
                              line="bit-identical over 2 steps")
    apart = CampaignTrajectory("c2", "model.b", "cpu", ("default", "blas1"), _div([0.0, 1e-8, 1e-7], [1.0] * 3),
                               baseline=_div([0.0, 2e-8, 2e-7], [1.0, 1.0, 1.0 + 1e-6]), node="backward of L #4",
                               line="first differs at step 1")
    missing = CampaignTrajectory("c3", "model.c", "cpu", ("default", "blas1"), None,
                                 reason="context blas1 did not run this case")
    return [same, apart, missing]


def test_the_reports_table_names_the_first_step_the_node_and_the_baseline_beside_the_end():
    from harness.outputs.trajectory_files import SUMMARY_COLUMNS, summary_rows

    same, apart, missing = summary_rows(_found())
    assert all(list(r) == list(SUMMARY_COLUMNS) for r in (same, apart, missing))
    assert same["steps"] == 2 and same["first differing step"] == "" and same["verdict"].startswith("bit-identical")
    assert apart["first differing step"] == 1 and apart["first node"] == "backward of L #4"
    assert apart["what differs first"] == "params" and apart["rel L2 at the end"] == "1e-07"
    assert apart["baseline rel L2"] == "2e-07" and apart["baseline loss diff"] == "1e-06"
    assert missing["verdict"] == "not compared: context blas1 did not run this case"


def test_every_step_of_each_pair_and_its_baseline_is_a_row_and_the_figure_draws_the_furthest_pair():
    from harness.outputs.trajectory_files import BASELINE_LABEL, figure_job, shown_pair, step_rows

    rows = step_rows(_found())
    labels = [r["comparison"] for r in rows]
    assert labels == ["model.a cpu c1: default vs blas1"] * 2 + ["model.b cpu c2: default vs blas1"] * 3 + [
        f"model.b cpu c2: {BASELINE_LABEL}"] * 3
    assert shown_pair(_found()).case_id == "c2"
    name, kind, (pair, base, title) = figure_job(_found())
    assert (name, kind, pair[0], base[0], title) == (FIGURE_NAME, "trajectory", "model.b: default vs blas1",
                                                      BASELINE_LABEL, "first differs at step 1")
    assert figure_job(_found()[2:]) is None  # nothing compared: no figure


def test_the_trajectory_figure_job_draws_through_the_figures_drawer():
    from harness.outputs.drawing import draw
    from harness.outputs.trajectory_files import figure_job

    _, kind, args = figure_job(_found())
    assert draw(kind, args)[:8] == b"\x89PNG\r\n\x1a\n"
