"""The verdicts of a task as a whole: what a bad input did, and a task that produced no tensor.

- :func:`judge_bad_input`: what a bad input must do (:func:`expectation_for`: its rule in the contracts file,
  else the case's own ``expect``, "either" included);
- :func:`judge_same_outcome`: an ``any`` bad-input rule's outcome (:func:`outcome_text`) is the same in every
  run, process, context and device;
- :func:`judge_task`: a task that produced no tensor (error, crash, timeout, skip; a declared known defect) or
  has no contract.

An error a ``[[known_defect]]`` declares is "known defect" here, for a bad input and a valid one alike.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from harness.core.records import Measure
from harness.core.vocabulary import PHASES
from harness.judge.verdicts import (
    BIT_IDENTICAL,
    BROKEN,
    ERROR,
    EXPECTED_ERROR,
    KNOWN_DEFECT,
    NO_CONTRACT,
    NOT_JUDGED,
    SKIPPED,
    cite,
    keyed,
)

__all__ = ["Expectation", "expectation_for", "judge_bad_input", "outcome_text", "judge_same_outcome", "judge_task"]


@dataclass(frozen=True)
class Expectation:
    """What a bad input must do: raise one of ``errors`` in its phase (``phases``: error -> the phases it may be
    raised in; an error not listed may be raised in any), or not raise where ``no_error_ok``. ``errors`` None is
    an ``any`` rule: whatever happens, but the same everywhere. ``values`` says an accepted input has documented
    semantics, so its values are judged like a valid case's (the oracle, the contract's bit identity)."""

    errors: frozenset[str] | None
    no_error_ok: bool
    reason: str
    source: str  # the rule (contracts.toml line) or the case's own expect
    phases: Mapping[str, frozenset[str]] = field(default_factory=dict)
    values: bool = False

    @property
    def any_outcome(self) -> bool:
        return self.errors is None

    def _error_text(self, e: str) -> str:
        ph = self.phases.get(e)
        return f"{e} in {' or '.join(sorted(ph))}" if ph else e

    def describe(self) -> str:
        if self.errors is None:
            return "any outcome, the same in every run, process, context and device"
        raises = f"raise {' or '.join(self._error_text(e) for e in sorted(self.errors))}" if self.errors else ""
        if self.no_error_ok:
            accept = "no error, values as documented" if self.values else "no error"
            return f"{raises} or {accept}" if raises else accept
        return raises


def _from_expect(expect: Mapping[str, Any] | None, subject: str, device_kind: str) -> Expectation | None:
    if not expect:
        return None
    subs = expect.get("subjects")
    if subs is not None and subject not in subs:
        return None
    devs = expect.get("devices")
    if devs is not None and device_kind not in devs:
        return None
    kind = expect.get("kind")
    reason = str(expect.get("behaviour", ""))
    if kind == "raises":
        return Expectation(frozenset(expect.get("errors", ())), False, reason, "the case's expect")
    if kind == "either":
        parts = [p for p in (_from_expect(sub, subject, device_kind) for sub in expect.get("of", ()))
                 if p is not None]
        if not parts:
            return None
        if any(p.errors is None for p in parts):
            return Expectation(None, True, reason, "the case's expect (either)")
        return Expectation(frozenset().union(*(p.errors or () for p in parts)), any(p.no_error_ok for p in parts),
                           reason, "the case's expect (either)")
    if kind in ("documented", "propagates"):
        # No error outside debug mode; in it, the documented errors (errors_in_debug) are what it raises.
        return Expectation(frozenset(expect.get("errors_in_debug", ())), True, reason, "the case's expect")
    return None


def expectation_for(rules: Sequence[Any], expect: Mapping[str, Any] | None, subject: str,
                    device_kind: str) -> Expectation | None:
    """The one reading of what a bad input must do: the contracts file's rules for it (all of them), else the
    case's own ``expect``; None where neither says anything. A raises rule's ``phase`` is where its errors must
    be raised; a ``no_error`` rule alone means documented semantics (its values are judged)."""
    if rules:
        errors: frozenset[str] | None = frozenset()
        phases: dict[str, frozenset[str]] = {}
        no_error_ok, any_outcome, documented = True, False, False
        for r in rules:
            if r.outcome == "raises":
                errors = (errors or frozenset()) | frozenset(r.errors)
                no_error_ok = False
                for e in r.errors:
                    if getattr(r, "phase", ""):
                        phases[e] = phases.get(e, frozenset()) | {r.phase}
            elif r.outcome == "any":
                any_outcome = True
            elif r.outcome == "no_error":
                documented = True
        if any_outcome and not errors:
            errors = None
        reason = "; ".join(r.reason for r in rules if r.reason)
        where = ", ".join(f"{getattr(r, 'source', 'contracts.toml')} line {r.line} ({r.tag})" for r in rules)
        return Expectation(errors, no_error_ok, reason, where, phases,
                           values=documented and no_error_ok and errors is not None)
    return _from_expect(expect, subject, device_kind)


def _known(known: Sequence[Any], error: Mapping[str, Any] | None) -> Any:
    """The declared defect (``[[known_defect]]``) an error matches, else None."""
    if error is None:
        return None
    return next((d for d in known if d.matches(str(error.get("type")), str(error.get("phase")))), None)


def _returned(error: Mapping[str, Any]) -> str:
    """What the run returned before its error (``y (shape (4, 3) float32)``), from the outputs the subject had
    recorded when it raised."""
    got = error.get("returned") or {}
    return ", ".join(f"{k} ({v})" for k, v in got.items()) or "its outputs"


_PHASE_ORDER = PHASES


def _error_signature(e: Mapping[str, Any]) -> tuple[str, str]:
    return str(e.get("type")), str(e.get("phase"))


def judge_bad_input(expectation: Expectation | None, key: Mapping[str, str], run_status: str,
                    error: Mapping[str, Any] | None, *, errors: Sequence[Mapping[str, Any]] = (),
                    known: Sequence[Any] = ()) -> Measure:
    """Verdict of a bad input: its error (or its absence) against :func:`expectation_for`.

    A crash or a timeout is never what a bad input may do; neither is an outcome that differs from run to run
    (some runs raise, others return; two errors of other types or phases). An error a ``[[known_defect]]``
    declares (``known``: the declarations for this subject, device and case) is "known defect", never
    "expected error". An expected error raised in another phase than the rule's is broken: the earlier phase
    returned numbers for an input it must refuse."""
    got = "no error" if error is None else f"{error.get('type')} in {error.get('phase')}: {error.get('message')}"
    exp = expectation or Expectation(frozenset(), True, "no expectation: a bad input treated as a valid one",
                                     "(none)")
    rule = f"bad input must: {exp.describe()}"
    contract = f"{exp.source}: {exp.reason}".strip()
    signatures = sorted({_error_signature(e) for e in ([error] if error else []) + list(errors)})
    defect = _known(known, error)
    if run_status in ("crashed", "timeout"):
        verdict, why = BROKEN, f"the subject {run_status}"
    elif run_status == "partial" or len(signatures) > 1:
        outcomes = [f"{t} in {p}" for t, p in signatures] + (["values returned"] if run_status == "partial" else [])
        verdict, why = BROKEN, f"the outcome differs from run to run: {'; '.join(outcomes)}"
    elif error is None:
        verdict, why = (EXPECTED_ERROR if exp.no_error_ok else BROKEN), "no error"
    elif defect is not None:
        return Measure(**keyed("task", key, "", verdict=KNOWN_DEFECT, rule=defect.rule, contract=defect.cited,
                               actual=got, expected=exp.describe(), detail=defect.describe()))
    elif exp.errors is None or str(error.get("type")) in exp.errors:
        etype, phase = _error_signature(error)
        allowed = exp.phases.get(etype) if exp.errors is not None else None
        if allowed and phase not in allowed:
            want = " or ".join(sorted(allowed))
            earlier = [p for p in _PHASE_ORDER if p in allowed]
            moved_later = earlier and phase in _PHASE_ORDER and \
                _PHASE_ORDER.index(phase) > _PHASE_ORDER.index(earlier[0])
            returned = f", {want} returned {_returned(error)}" if moved_later else ""
            verdict, why = BROKEN, f"expected {etype} in {want}{returned}, {etype} raised in {phase}"
        else:
            verdict, why = EXPECTED_ERROR, "error as expected"
    else:
        verdict, why = BROKEN, "another error"
    return Measure(**keyed("task", key, "", verdict=verdict, rule=rule, contract=contract, actual=got,
                           expected=exp.describe(), detail=why))


def outcome_text(status: str, errors: Sequence[Mapping[str, Any]], digests: Mapping[str, Sequence[str | None]],
                 which: Sequence[int] | None = None, *, bits: bool = True) -> str:
    """What a task (or some of its repetitions, ``which``) did, as one comparable text: ``IndexError in
    forward``, ``values <digest of every tensor's digest>`` (``bits``; else ``values returned``: where the
    contract lets the bits differ, only the kind of outcome must be the same), ``values that differ run to
    run``, or the mix. The outcome an ``any`` rule requires to be the same everywhere."""
    if status in ("crashed", "timeout", "skipped"):
        return status
    sigs = sorted({_error_signature(e) for e in errors})
    parts = [f"{t} in {p}" for t, p in sigs]
    if status in ("ok", "partial") and digests:
        per_rep: list[str] | None = None
        for name in sorted(digests):
            ds = list(digests[name])
            ds = [ds[i] for i in which if i < len(ds)] if which is not None else ds
            per_rep = [f"{name}={d}" for d in ds] if per_rep is None else [a + f";{name}={d}" for a, d in
                                                                             zip(per_rep, ds)]
        reps = sorted(set(per_rep or []))
        if not bits:
            parts.append("values returned")
        elif len(reps) > 1:
            parts.append("values that differ run to run")
        elif reps:
            parts.append("values " + hashlib.sha256(reps[0].encode()).hexdigest()[:16])
    return "; ".join(parts) or status


_SAME_WHERE = {"repeat": "in every repetition in one process", "process": "in fresh processes",
               "context": "in context {other}", "device": "on device {other}"}


def judge_same_outcome(expectation: Expectation, key: Mapping[str, str], kind: str, mine: str, theirs: str,
                       other: str) -> Measure:
    """An ``any`` rule's one requirement: the outcome (:func:`outcome_text`) here is the outcome ``other`` had
    (``kind``: repeat, process, context or device; ``other``: pool, fresh, the context or the device). A
    difference is broken: the measure itself is unstable."""
    same = mine == theirs
    where = _SAME_WHERE[kind].format(other=other)
    return Measure(**keyed(kind, key, "", other=other, identical=same, verdict=BIT_IDENTICAL if same else BROKEN,
                           rule=f"bad input ({expectation.source}): any outcome, the same {where}",
                           contract=f"{expectation.source}: {expectation.reason}".strip(), actual=mine,
                           expected=theirs, detail="" if same else f"outcome here: {mine}; {where}: {theirs}"))


# --------------------------------------------------------------------------- tasks


def judge_task(contract: Any, key: Mapping[str, str], status: str, run_status: str,
               error: Mapping[str, Any] | None, skip_reason: str | None, *, errors: Sequence[Mapping[str, Any]] = (),
               known: Sequence[Any] = ()) -> Measure | None:
    """The task-level verdict where there is one: skipped (with its reason), an error (a "known defect" where
    every run failed with the error a ``[[known_defect]]`` declares: ``known``), a crash or timeout, or no
    contract line; None for a task whose runs all succeeded under a contract."""
    if status == "skipped":
        from harness.core.cost import not_judged_skip  # too large to run here, starved twice: "not judged"
        why = skip_reason or f"not run: every run was skipped (statuses {run_status}) and the worker gave no reason"
        return Measure(**keyed("task", key, "", verdict=NOT_JUDGED if not_judged_skip(skip_reason) else SKIPPED,
                               rule="not run", contract=cite(contract), detail=why))
    if status != "ok":
        got = "" if error is None else f"{error.get('type')} in {error.get('phase')}: {error.get('message')}"
        defect = _known(known, error)
        same = len({_error_signature(e) for e in ([error] if error else []) + list(errors)}) == 1
        if defect is not None and status == "error" and run_status == "error" and same:
            return Measure(**keyed("task", key, "", verdict=KNOWN_DEFECT, rule=defect.rule, actual=got,
                                   detail=defect.describe(), contract=defect.cited))
        return Measure(**keyed("task", key, "", verdict=ERROR, rule=f"run {run_status}", actual=got,
                               detail=got, contract=cite(contract)))
    if contract is None:
        return Measure(**keyed("task", key, "", verdict=BROKEN, rule=NO_CONTRACT, contract="(none)",
                               detail=f"No contract line covers subject={key['subject']!r} "
                                      f"device={key['device']!r} context={key['context']!r}: add one to "
                                      f"contracts.toml (a missing line is a failure, not a pass)."))
    return None
