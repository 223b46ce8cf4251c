"""One colour and one mark per verdict, one colour per finding class: the page's, the terminal's and the figures'.

The one place a colour is chosen (:func:`colour`), kept apart from the page so that the terminal matrix and the
figures (drawn in a child that never builds a page) read the same palette.
"""

from __future__ import annotations

from harness.core.classification import Verdict
from harness.judge.findings import Classification

__all__ = ["VERDICT_COLOURS", "MARKS", "CLASS_COLOURS", "colour"]


#: One colour per verdict (the Okabe-Ito palette, readable with the common colour-vision deficiencies).
VERDICT_COLOURS = {
    "bit-identical": "#cfe8d8",        # bluish green, light
    "within tolerance": "#e3f1f9",     # sky blue, light
    "expected error": "#eeeeee",
    "diverged as allowed": "#fbe3b4",  # orange, light
    "known defect": "#e8dcef",         # reddish purple, light
    "skipped": "#f6f6f6",
    "not judged": "#f3c6a5",
    "error": "#f3c6a5",                # vermillion, lighter
    "broken": "#e69f9f",               # vermillion
}

#: One mark per verdict: what a cell of the matrix shows before its number.
MARKS = {"bit-identical": "=", "within tolerance": "≈", "expected error": "raises", "diverged as allowed": "≠",
         "known defect": "known", "skipped": "–", "not judged": "?", "error": "error", "broken": "BROKEN"}


#: One colour per finding class (most severe first), from the verdict palette.
CLASS_COLOURS = {
    Classification.CONTRACT_BROKEN: VERDICT_COLOURS["broken"],
    Classification.NEW_DEFECT: VERDICT_COLOURS["error"],
    Classification.NOT_JUDGED: VERDICT_COLOURS["not judged"],
    Classification.KNOWN_DEFECT: VERDICT_COLOURS["known defect"],
    Classification.ALLOWED: VERDICT_COLOURS["diverged as allowed"],
    Classification.EXPECTED_ERROR: VERDICT_COLOURS["expected error"],
    Classification.CONTROL: "#eeeeee",
}


def colour(key: Verdict | Classification | str) -> str:
    """The colour of a verdict or a finding class (the one place a colour is chosen)."""
    if isinstance(key, Classification):
        return CLASS_COLOURS[key]
    return VERDICT_COLOURS.get(str(key), "")  # an unknown value: no colour (not a guess)
