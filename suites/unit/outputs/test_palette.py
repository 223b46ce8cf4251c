"""harness/outputs/palette.py: every verdict has one colour and one mark, every finding class a colour, and an
unknown value gets none rather than a guess."""

from __future__ import annotations

from harness.core.records import VERDICTS
from harness.judge.findings import Classification
from harness.outputs.palette import CLASS_COLOURS, MARKS, VERDICT_COLOURS, colour


def test_every_verdict_and_class_has_its_colour_and_mark() -> None:
    assert set(VERDICT_COLOURS) == set(MARKS) == set(VERDICTS)
    assert set(CLASS_COLOURS) == set(Classification)
    assert all(colour(v).startswith("#") for v in VERDICTS)
    assert colour(Classification.CONTRACT_BROKEN) == colour("broken")


def test_an_unknown_value_has_no_colour() -> None:
    assert colour("no such verdict") == ""
