"""Why a finding is not a defect: the contract's reason that allows a divergence or expects an error.

What leaves the harness for a library's maintainers is a defect report or a behaviour note. :func:`allowance_for`
decides which for one reproducer: it returns the contracts file's own words (and their line) that allow the
divergence the reproducer shows, or that expect the error it raises, and None where nothing does (the finding is a
defect, known or new). :func:`declared_defect` gives a known defect's declaration (its reason and reference: the
diagnosis a maintainer reads). The verdicts decide the same way (:mod:`harness.judge.verdicts`); these read the
same contract fields through the same helpers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from harness.judge import task_verdicts, verdicts
from harness.judge.contracts import Contract, Contracts, KnownDefect
from harness.judge.finding_kinds import FindingKind
from harness.judge.reproducer import Reproducer

__all__ = ["Allowance", "allowance_for", "declared_defect", "finding_kind_of", "device_kind", "error_of"]


@dataclass(frozen=True)
class Allowance:
    """The contract's reason that makes a finding a behaviour, not a defect."""

    reason: str   # the contracts file's words (a case's own ``behaviour`` where its expect decides)
    source: str   # where they are: ``contracts.toml line 12``, or ``the case's expect``
    what: str     # what it allows or expects, in a few words: ``reproducible = false``, ``raises TypeError``

    @property
    def cited(self) -> str:
        """``contracts.toml line 12 (reproducible = false): <reason>``: the line a note quotes."""
        return f"{self.source} ({self.what}): {self.reason}"


def device_kind(device: str) -> str:
    """``cpu`` or ``gpu`` of a device name (``gpu:1``)."""
    return device.split(":", 1)[0]


def error_of(r: Reproducer) -> tuple[str, str]:
    """The reproducer's error as (type, phase) from ``Type in phase`` (``("", "")`` where it names none)."""
    etype, _, phase = r.error.partition(" in ")
    return etype.strip(), phase.strip()


def finding_kind_of(r: Reproducer) -> str:
    """The finding kind the reproducer shows: its own (as given: a text :class:`FindingKind` may refuse), else
    what its shape says (two devices, two contexts, a relation, a baseline, an error, repeats)."""
    if r.kind:
        return r.kind
    if len(r.devices) > 1:
        return FindingKind.DEVICE
    if len(r.contexts) > 1:
        return FindingKind.CONTEXT
    if r.relation:
        return FindingKind.RELATION
    if r.baseline:
        return FindingKind.BASELINE
    if r.error:
        return FindingKind.ERROR
    return FindingKind.REPEAT


def _line(c: Contract) -> str:
    return f"{c.source} line {c.line}" if c.line else c.source


def _contract_allows(kind: str, r: Reproducer, c: Contract | None) -> Allowance | None:
    """The contract line's reason where it does not require what the finding shows differs."""
    if c is None:
        return None
    if kind == FindingKind.REPEAT:
        return None if c.reproducible else Allowance(c.reason, _line(c), "reproducible = false")
    if kind == FindingKind.PROCESS:
        return None if c.across_processes else Allowance(c.reason, _line(c), "across_processes = false")
    if kind == FindingKind.ORACLE:
        return None if c.oracle == "within" else Allowance(c.reason, _line(c), f"oracle = {c.oracle!r}")
    if kind in (FindingKind.CONTEXT, FindingKind.TRAJECTORY):  # a trajectory is judged as its context pair is
        other = r.contexts[0]
        if verdicts.pair_required("context", c, other):
            return None
        return Allowance(c.reason, _line(c), f"identical_across = {list(c.identical_across)!r}, without {other!r}")
    if kind == FindingKind.DEVICE:
        if verdicts.pair_required("device", c, r.devices[0]):
            return None
        return Allowance(c.reason, _line(c), "no contract asks for bits identical across devices (the oracle "
                                             "judges each device)")
    if kind == FindingKind.RELATION:
        if verdicts.pair_required("relation", c, "", r.relation):
            return None
        return Allowance(c.reason, _line(c), f"invariant_under = {list(c.invariant_under)!r}, without "
                                             f"{r.relation!r}")
    if kind == FindingKind.BASELINE:
        return None if verdicts.pair_required("baseline", c, "baseline") else \
            Allowance(c.reason, _line(c), "neither reproducible nor across_processes")
    return None


def _shows(kind: str) -> str:
    """What a reproducer of ``kind`` shows (:attr:`FindingKind.shows`); "" for a text that is no kind."""
    try:
        return FindingKind(kind).shows
    except ValueError:
        return ""


def allowance_for(r: Reproducer, contracts: Contracts, tags: Iterable[str], *,
                  expect: Mapping[str, Any] | None = None) -> Allowance | None:
    """The contract's reason that allows the divergence ``r`` reproduces or expects the error it raises (with
    its source line); None where the finding is a defect (a known one: :func:`declared_defect`).

    ``r``: the reproducer (its subject, its device or devices, context or contexts, relation, finding kind and
    error ``Type in phase``); ``tags``: its case's tags; ``expect``: its case's own ``expect`` (a bad input's
    behaviour where no contracts rule names it). An error is expected where the bad-input rules for the case's
    tags (else its ``expect``) name it in its phase; a divergence of a bad input that is judged by its own rule
    (no documented values) is allowed by that rule; any other divergence is allowed where the contract line of
    the reproducer's (second) device and context does not require the bits it compares to be identical."""
    tags = list(tags)
    kind = finding_kind_of(r)
    shows = _shows(kind)
    dev, ctx = device_kind(r.devices[-1]), r.contexts[-1]
    rules = contracts.bad_rules(r.subject, dev, tags, ctx)
    exp = task_verdicts.expectation_for(rules, expect, r.subject, dev) if rules or expect else None
    if kind == FindingKind.KNOWN_DEFECT:
        return None  # a defect all the same: declared_defect gives its declaration
    if shows == "error":
        etype, phase = error_of(r)
        if exp is None or not etype or declared_defect(r, contracts, tags) is not None:
            return None
        if exp.errors is None:
            return Allowance(exp.reason, exp.source, "any outcome, the same everywhere")
        phases = exp.phases.get(etype)
        if etype in exp.errors and (not phases or phase in phases):
            return Allowance(exp.reason, exp.source, f"raises {etype}" + (f" in {phase}" if phase else ""))
        return None
    if shows == "bits" and exp is not None and not exp.values:
        # a bad input judged by its own rule: its bits are recorded, not required (verdicts.judge_repeats)
        return Allowance(exp.reason, exp.source, f"a bad input whose rule documents no values ({exp.describe()})")
    return _contract_allows(kind, r, contracts.find(r.subject, dev, ctx))


def declared_defect(r: Reproducer, contracts: Contracts, tags: Iterable[str]) -> KnownDefect | None:
    """The ``[[known_defect]]`` declaration ``r``'s finding is (its error in its phase, or values a declaration
    says are wrong, for the subject, device kind, case tags and context), else None: a new defect, or none."""
    tags = list(tags)
    dev, ctx = device_kind(r.devices[-1]), r.contexts[-1]
    etype, phase = error_of(r)
    if etype:
        return contracts.known_defect_for(r.subject, dev, tags, etype, phase, ctx)
    if finding_kind_of(r) in (FindingKind.ORACLE, FindingKind.KNOWN_DEFECT):
        return next((d for d in contracts.known_defects_for(r.subject, dev, tags, ctx) if d.wrong), None)
    return None
