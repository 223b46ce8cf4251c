"""What the judge concluded and what it means: :class:`Verdict` (one measure), :class:`Classification` (a
finding of it), and the one rule of what fails the gate (:func:`fails_gate`).

A measure's verdict says what its comparison showed under its contract; :func:`classify` turns it into what a
person acts on (a broken contract, a new library defect, a check that did not run, a declared behaviour...). The
gate, the report, the pytest plug-in and ``compare`` ask :func:`fails_gate` (or :attr:`Classification.fails`,
the same set) and nothing else whether something fails.

>>> [v.value for v in Verdict if fails_gate(v)]
['not judged', 'error', 'broken']
>>> classify("error"), classify("diverged as allowed", "control"), classify("broken", "control")
(<Classification.NEW_DEFECT: 'new library defect'>, <Classification.CONTROL: 'control'>, \
<Classification.CONTRACT_BROKEN: 'contract broken'>)
"""

from __future__ import annotations

import enum

__all__ = ["Verdict", "Classification", "VERDICTS", "VERDICT_ORDER", "classify", "fails_gate"]


class Verdict(str, enum.Enum):
    """The verdicts, best first. A ``str`` enum: a verdict compares equal to its text, which is what the record
    files hold. "diverged as allowed": bits differ where the contract does not require identity; "known defect":
    a library error the contracts file declares (``[[known_defect]]``: like an expected error, a declared
    behaviour, so a cell's verdict shows what else happened there); "not judged": a check the contract asks
    for did not run (the gate fails on it, with the reason)."""

    BIT_IDENTICAL = "bit-identical"
    EXPECTED_ERROR = "expected error"
    KNOWN_DEFECT = "known defect"
    WITHIN = "within tolerance"
    ALLOWED = "diverged as allowed"
    SKIPPED = "skipped"
    NOT_JUDGED = "not judged"
    ERROR = "error"
    BROKEN = "broken"

    def __str__(self) -> str:
        return self.value

    @property
    def fails(self) -> bool:
        """Whether the gate fails on this verdict (:func:`fails_gate`).

        >>> Verdict("broken") == "broken", Verdict.BROKEN.fails
        (True, True)
        """
        return fails_gate(self)


#: The verdicts' texts, best first.
VERDICTS = tuple(v.value for v in Verdict)
#: Rank of each verdict; a group's verdict is its worst member's (skipped only when nothing else ran).
VERDICT_ORDER = {v: i for i, v in enumerate(VERDICTS)}


class Classification(str, enum.Enum):
    """What a finding is, most severe first. The gate fails on the first three (:attr:`fails`)."""

    CONTRACT_BROKEN = "contract broken"
    NEW_DEFECT = "new library defect"
    NOT_JUDGED = "not judged"
    KNOWN_DEFECT = "known library defect"
    ALLOWED = "allowed divergence"
    EXPECTED_ERROR = "expected error"
    CONTROL = "control"

    def __str__(self) -> str:
        return self.value

    @property
    def fails(self) -> bool:
        """Whether a finding of this class fails the gate: the one rule (:data:`_FAILING`)."""
        return self in _FAILING

    @property
    def rank(self) -> int:
        return _RANK[self]


#: The classes the gate fails on: a broken contract, an error nothing declares, a check that did not run.
_FAILING = frozenset({Classification.CONTRACT_BROKEN, Classification.NEW_DEFECT, Classification.NOT_JUDGED})
_RANK = {c: i for i, c in enumerate(Classification)}

#: The class of a finding of each verdict; any other verdict (bits that differ where the contract lets them)
#: is an allowed divergence.
_CLASS_OF = {Verdict.BROKEN.value: Classification.CONTRACT_BROKEN, Verdict.ERROR.value: Classification.NEW_DEFECT,
             Verdict.NOT_JUDGED.value: Classification.NOT_JUDGED,
             Verdict.KNOWN_DEFECT.value: Classification.KNOWN_DEFECT,
             Verdict.EXPECTED_ERROR.value: Classification.EXPECTED_ERROR}


def classify(verdict: str, role: str = "subject") -> Classification:
    """What a finding of a measure with ``verdict`` is, for a subject of ``role``: a control's designed
    divergence (or declared behaviour) is a control's; a control that fails, fails like any subject."""
    cls = _CLASS_OF.get(str(verdict), Classification.ALLOWED)
    if role == "control" and not cls.fails:
        return Classification.CONTROL
    return cls


def fails_gate(verdict: str) -> bool:
    """Whether the gate fails on a measure with ``verdict``: its class fails (a control's role changes only
    how a passing measure is labelled, never whether it fails)."""
    return classify(verdict).fails
