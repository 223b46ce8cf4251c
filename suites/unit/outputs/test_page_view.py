"""harness/outputs/page_view.py: what the page shows, built once: the gate line counts the cells that ran and
hold, the verdict lines go most severe first, and the files are the run directory's."""

from __future__ import annotations

from harness.judge.findings import Classification
from harness.outputs.page_view import run_files
from suites.unit.outputs.test_render import _view


def test_the_gate_line_counts_cells_and_fails_on_a_broken_one() -> None:
    v = _view()
    assert v.total == 8 and v.fails
    cls, text = v.gate_line()
    assert text.startswith("FAIL: ") and f"{v.held} of " in text


def test_verdict_lines_go_most_severe_first_one_per_class() -> None:
    classes = [cls for cls, _ in _view().lines]
    order = list(Classification)
    assert classes == sorted(classes, key=order.index) and len(set(classes)) == len(classes)
    assert classes[0] == Classification.CONTRACT_BROKEN


def test_run_files_are_relative_and_sorted(tmp_path) -> None:
    (tmp_path / "cases").mkdir()
    for name in ("summary.md", "cases/c1.json", "a.csv"):
        (tmp_path / name).write_text("x")
    assert run_files(str(tmp_path)) == ["a.csv", "cases/c1.json", "summary.md"]
