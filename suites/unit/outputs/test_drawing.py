"""harness/outputs/drawing.py: a figure drawn in a forked child is the figure drawn here, byte for byte."""

from __future__ import annotations

import pytest

from harness.outputs.drawing import DRAWERS, draw, draw_all, draw_forked
from suites.unit.outputs.test_render import _cells

CELLS = _cells([{"subject": "a.impl"}, {"subject": "b.impl", "verdict": "broken", "worst_ulp": 4}])


def test_forked_and_here_draw_the_same_bytes_in_the_jobs_order() -> None:
    jobs = [("verdicts.png", "matrix", (CELLS,)), ("again.png", "matrix", (CELLS,))]
    here = draw_all(jobs)
    assert [n for n, _ in here] == ["verdicts.png", "again.png"] and here[0][1].startswith(b"\x89PNG")
    assert draw_forked(jobs)() == here


def test_an_unknown_kind_draws_nothing() -> None:
    assert set(DRAWERS) == {"matrix", "divergence", "error_ratio", "trajectory"}
    with pytest.raises(KeyError):
        draw("pie", ())
