"""Violations: the measures a gate fails on, as dossiers a reader acts on.

:func:`violations` picks them (:func:`~harness.core.classification.fails_gate`, the one rule) and
:func:`assert_no_violations` only raises what it is given: the first dossier in full, one line for each other.
A dossier is the :class:`~harness.judge.findings.Finding` of its one measure, so its commands are the finding's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from harness.core.classification import fails_gate
from harness.core.errors import ContractViolation
from harness.core.records import Measure

if TYPE_CHECKING:
    from harness.judge.findings import Origin

__all__ = ["Violation", "violations", "assert_no_violations"]


@dataclass(frozen=True)
class Violation:
    """A broken measure, with what reproduces it."""

    measure: Measure
    replay: str = ""
    case_file: str = ""
    #: Why no command reproduces it, where none can (a subject this process got outside ``--subject-plugin``):
    #: said in place of the ``Reproduce:`` line rather than printing a command that runs something else, and
    #: the dossier's other commands (``Shrink:``, ``Localize:``) left out for the same reason.
    no_replay: str = ""
    #: Where its dossier's commands come from (:class:`~harness.judge.findings.Origin`: the run's directory, the
    #: contracts file that judged it where not the shipped one, the ``--subject-plugin`` specs its subjects came
    #: from, a gate's baseline and environment), so that every command judges the same subjects the same way;
    #: None: the directory above ``case_file``, the shipped contracts, no plug-ins.
    origin: Origin | None = None
    role: str = "subject"  # the subject's role: a control's dossier offers no export (nothing of it goes upstream)

    @property
    def kind(self) -> str:
        """The rule that broke."""
        return self.measure.rule

    @property
    def subject(self) -> str:
        return self.measure.subject

    @property
    def device(self) -> str:
        return self.measure.device

    @property
    def context(self) -> str:
        return self.measure.context

    @property
    def tensor(self) -> str:
        return self.measure.tensor

    @property
    def detail(self) -> str:
        return self.measure.detail

    def finding(self) -> Any:
        """This one measure as a :class:`~harness.judge.findings.Finding` of :attr:`origin` (whose case file is
        ``case_file``): the one place a dossier and its commands are written."""
        from harness.judge.finding_groups import group
        from harness.judge.findings import Origin

        origin = self.origin or Origin(os.path.dirname(os.path.dirname(self.case_file)) if self.case_file else "")
        return group([self.measure], None, origin, roles={self.measure.subject: self.role})[0]

    def headline(self) -> str:
        """One line naming subject, device, context, rule and tensor: pytest's short summary shows it."""
        m = self.measure
        what = f" tensor {m.tensor}" if m.tensor else ""
        return (f"{m.subject} [{m.device}] {m.context}: {m.verdict} -- {m.rule}{what}"
                f" (case {m.case_id}, {m.kind})")

    def dossier(self) -> str:
        """The failure as a reader needs it: :meth:`Finding.dossier` of this measure, after this headline."""
        lines = self.finding().dossier().splitlines()
        if self.no_replay:
            lines = [f"No command reproduces it: {self.no_replay}" if ln.startswith("Reproduce: ") else ln
                     for ln in lines if not ln.startswith(("Shrink: ", "Localize: ", "Export: "))]
        elif self.replay:  # the command the caller built from the same finding (a gate's, with its plug-ins)
            lines = [f"Reproduce: {self.replay}" if ln.startswith("Reproduce: ") else ln for ln in lines]
        return "\n".join([self.headline(), *lines[1:]])

    def to_dict(self) -> dict[str, Any]:
        return {**self.measure.to_dict(), "replay": self.replay, "case_file": self.case_file,
                **({"no_replay": self.no_replay} if self.no_replay else {})}


def violations(measures: Iterable[Measure]) -> list[Violation]:
    """The measures a gate fails on (:func:`~harness.core.classification.fails_gate`: broken, error, not judged;
    a skip is not a pass, and not a failure here: the caller says what was skipped)."""
    return [Violation(m) for m in measures if fails_gate(m.verdict)]


def assert_no_violations(found: Sequence[Violation], *, limit: int = 40) -> None:
    """Raise :class:`ContractViolation` carrying the first dossier in full and one line for each other,
    at most ``limit`` lines in all, its first line the first violation's headline."""
    __tracebackhide__ = True
    if not found:
        return
    first = found[0].dossier().splitlines()
    rest = [f"- {v.headline()}" for v in found[1:]]
    room = max(limit - len(first) - 2, 0)
    more = len(rest) - room
    body = first + ([f"{len(found)} violation(s) in all; the others:"] + rest[:room] if rest else [])
    if more > 0:
        body.append(f"... and {more} more")
    raise ContractViolation("\n".join(body))
