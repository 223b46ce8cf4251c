"""Finding kinds: what a finding shows, as a type whose members carry their policy.

:class:`FindingKind` is a ``str`` enum: a member is its text, so ``findings.json``, ``findings.csv`` and the
printed commands (``--kind``) hold the same words as before there was a type. Each member says, in one place,
which measure kind it comes from, how ``replay`` compares it, whether ``localize`` and ``shrink`` apply, what
leaves for upstream (a defect, a behaviour note, what the contract decides, or nothing), whether it fails the
gate, and which check an exported script makes. Its order is the headline order (within one classification).
A new kind is one member here; :func:`kind_of` says which measures have it.

>>> from harness.core.records import Measure
>>> m = Measure(kind="repeat", case_id="c1", subject="s", device="cpu", context="default", tensor="ys[3]",
...             identical=False, verdict="broken", rule="reproducible: bit-identical run to run in one process")
>>> kind_of(m)
<FindingKind.REPEAT: 'not reproducible run to run'>
>>> FindingKind("expected error").shrinkable, FindingKind.EXPECTED_ERROR.export
(False, 'note')
>>> tensor_kind("grad.xs.12"), tensor_kind("grad.ws.0.3"), tensor_kind("hy")
('input gradients', 'parameter gradients', 'outputs')
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from harness.core.classification import Verdict
from harness.core.records import Measure

__all__ = ["FindingKind", "Policy", "kind_of", "tensor_kind", "finding_kind"]


@dataclass(frozen=True)
class Policy:
    """What one finding kind is and what may be done with it."""

    #: The measure kind it comes from (:data:`harness.core.records.MEASURE_KINDS`).
    measure_kind: str
    #: How ``replay`` compares: "repeats" (R runs, fresh processes too), "contexts" (other context, then this
    #: one), "devices", "relation", "baseline", "single" (one context and device: oracle, errors, bad inputs),
    #: "none" (a check of the harness itself: no case to run).
    replay: str
    #: Whether ``localize`` can say where it starts (the function node whose outputs differ first).
    localizable: bool = False
    #: Whether a smaller case can show it (a baseline holds digests of its own cases only; an expected error,
    #: a check that did not run and a missing contract line are not something to make smaller).
    shrinkable: bool = True
    #: What leaves for upstream: "defect", "note" (a behaviour: the contract's reason), "contract" (a defect where
    #: the contract requires what differs, else a note), "none" (nothing goes upstream: a check of the harness, or
    #: a kind whose script cannot be written yet).
    export: str = "contract"
    #: Whether a finding of it fails the gate: True always, False never, None where the contract decides (its
    #: measure's verdict: :func:`harness.core.classification.fails_gate`). A control's findings fail only as
    #: their verdicts do.
    fails: bool | None = None
    #: What an exported script checks (:class:`harness.upstream.script.Check`'s kind); "" for none.
    check: str = ""
    #: What a reproducer of it shows: "bits" (two results that differ), "values" (error against a reference),
    #: "error" (an error raised in a phase), "bad input" (what a bad input did), "" (a check of the harness).
    shows: str = "bits"


class FindingKind(str, enum.Enum):
    """The finding kinds, most important first (within one classification): a member is its text."""

    # (the member's text, its policy); Policy's fields are the member's attributes
    REPEAT = "not reproducible run to run", Policy("repeat", "repeats", localizable=True, check="repeats")
    PROCESS = "not reproducible across processes", Policy("process", "repeats", localizable=True,
                                                          check="processes")
    ORACLE = "beyond oracle tolerance", Policy("oracle", "single", check="tolerance", shows="values")
    ORDER = "accumulation order differs from the declared one", Policy("order", "single", export="defect",
                                                                       fails=True, check="bits", shows="values")
    ERROR = "error", Policy("task", "single", export="defect", fails=True, check="error", shows="error")
    NOT_JUDGED = "not judged", Policy("task", "single", shrinkable=False, export="none", fails=True, shows="")
    CONTEXT = "cross-context difference", Policy("context", "contexts", localizable=True, check="contexts")
    DEVICE = "cross-device difference", Policy("device", "devices", localizable=True, check="devices")
    # a training's steps between two contexts: its script trains K steps in two fresh processes and compares them
    TRAJECTORY = "trajectory divergence", Policy("trajectory", "contexts", localizable=True, check="contexts")
    BASELINE = "baseline changed", Policy("baseline", "baseline", shrinkable=False, check="bits")
    RELATION = "not invariant", Policy("relation", "relation", localizable=True, check="relation")
    BAD_INPUT = "bad input misbehaved", Policy("task", "single", export="defect", fails=True, check="bad_input",
                                               shows="bad input")
    NO_CONTRACT = "no contract line", Policy("task", "single", shrinkable=False, export="none", fails=True,
                                             shows="")
    GATE_CHECK = "gate check failed", Policy("task", "none", shrinkable=False, export="none", fails=True,
                                             shows="")
    KNOWN_DEFECT = "known library defect", Policy("task", "single", export="defect", fails=False, check="error",
                                                  shows="error")
    EXPECTED_ERROR = "expected error", Policy("task", "single", shrinkable=False, export="note", fails=False,
                                              check="error", shows="error")

    measure_kind: str
    replay: str
    localizable: bool
    shrinkable: bool
    export: str
    fails: bool | None
    check: str
    shows: str

    def __new__(cls, text: str, policy: Policy | None = None) -> FindingKind:
        # called with (text, policy) while the members are made; FindingKind(text) afterwards looks one up
        obj = str.__new__(cls, text)
        obj._value_ = text
        for name, value in (policy.__dict__ if policy is not None else {}).items():
            setattr(obj, name, value)
        return obj

    def __str__(self) -> str:
        return str.__str__(self)

    @property
    def rank(self) -> int:
        """Its place in the headline order."""
        return _RANK[self]

    @property
    def paired(self) -> bool:
        """Whether its other side is a context or a device (a finding names both)."""
        return self.replay in ("contexts", "devices")


_RANK = {k: i for i, k in enumerate(FindingKind)}
#: The kind of a tensor's measure that differs, by measure kind (the kinds of a task's measure: :func:`kind_of`).
_BY_MEASURE = {k.measure_kind: k for k in FindingKind if k.measure_kind not in ("task", "oracle", "order")}


def finding_kind(text: Any, what: str = "kind") -> FindingKind:
    """The member whose text is ``text``; a :class:`ValueError` naming ``what`` and every kind where none is."""
    try:
        return FindingKind(text)
    except ValueError:
        raise ValueError(f"{what}={text!r} is not a finding kind ({', '.join(k.value for k in FindingKind)})") \
            from None


def kind_of(m: Measure) -> FindingKind | None:
    """The finding kind of one measure; None where the measure found nothing to report."""
    if m.verdict == Verdict.NOT_JUDGED:
        return FindingKind.NOT_JUDGED
    if m.kind == "task":
        if m.verdict == Verdict.KNOWN_DEFECT:
            return FindingKind.KNOWN_DEFECT
        if m.verdict == Verdict.ERROR:
            return FindingKind.ERROR
        if m.rule.startswith("bad input"):
            if m.verdict == Verdict.EXPECTED_ERROR:
                return FindingKind.EXPECTED_ERROR if m.actual != "no error" else None
            return FindingKind.BAD_INPUT if m.verdict == Verdict.BROKEN else None
        if m.verdict == Verdict.BROKEN:
            return FindingKind.NO_CONTRACT if m.rule == "no contract" else FindingKind.GATE_CHECK
        return None
    broken = m.verdict == Verdict.BROKEN  # a broken measure always has a finding, whatever else it recorded
    if m.kind == "oracle":
        return FindingKind.ORACLE if m.within is False or broken else None
    if m.kind == "order":
        return FindingKind.ORDER if m.identical is False or broken else None
    if m.identical is not False and not broken:
        return None
    return _BY_MEASURE.get(m.kind)


def tensor_kind(name: str) -> str:
    """A tensor's kind, what a finding groups by: ``outputs`` (y, ys, hy, cy), ``input gradients`` (of the ids'
    rows, xs, hx, cx, and second-order ``grad2.*``) or ``parameter gradients`` (W, ws, bs); ``""`` for none.
    One planted bug shows in many tensors of one kind: it is one finding, with its worst tensor named."""
    if not name:
        return ""
    head = name.split(" ", 1)[0]  # "grad.xs.2 as grad.xs.0" (a relation's pair): the tensor's own name
    if head.startswith("grad2."):
        return "input gradients"
    if head.startswith("grad."):
        leaf = head[5:].split(".", 1)[0].split("[", 1)[0]
        return "parameter gradients" if leaf in ("W", "ws", "bs", "b", "w") else "input gradients"
    return "outputs"
