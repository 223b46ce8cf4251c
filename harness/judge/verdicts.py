"""One judge per verdict: pure functions from measured comparisons (and a contract) to :class:`Measure` records.

Every verdict the harness gives comes from one of these functions, and nothing else decides one:

- :func:`judge_repeats`: run to run in one process (``reproducible``) and across fresh processes
  (``across_processes``), from the per-repetition digests the runner recorded;
- :func:`judge_pair`: two results that may have to be bit-identical: another context (``identical_across``),
  another device, a stored baseline (digests that must be stable), a related case (``invariant_under``);
- :func:`judge_oracle`: error against the float64 oracle under the one tolerance policy
  (:func:`harness.judge.tolerance.judge_oracle`);
- :func:`judge_bad_input`: what a bad input must do (its rule in the contracts file, else the case's own
  ``expect``, "either" included);
- :func:`judge_same_outcome`: an ``any`` bad-input rule's outcome is the same in every run, process, context
  and device;
- :func:`judge_order`: a tensor against a reference summed in the order the subject declares (bit for bit);
- :func:`judge_task`: a task that produced no tensor (error, crash, timeout, skip; a declared known defect) or
  has no contract.

The gate, the report's tables, ``replay``, audits and the pytest suites call these; :func:`violations` turns
the broken ones into :class:`Violation` dossiers and :func:`assert_no_violations` only raises what it is given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from harness.core.classification import VERDICT_ORDER, Verdict, fails_gate
from harness.core.errors import ContractViolation
from harness.core.records import Measure, TensorComparison
from harness.core.vocabulary import PHASES
from harness.judge import comparator
from harness.judge.tolerance import OracleError, Tolerance
from harness.judge.ulp import value_text

if TYPE_CHECKING:
    from harness.judge.findings import Origin

__all__ = ["Verdict", "BIT_IDENTICAL", "WITHIN", "EXPECTED_ERROR", "ALLOWED", "KNOWN_DEFECT", "SKIPPED", "NOT_JUDGED",
           "ERROR", "BROKEN", "worst",
           "judge_repeats", "judge_pair", "judge_oracle", "judge_bad_input", "judge_task", "Expectation",
           "expectation_for", "Violation", "violations", "assert_no_violations", "NO_CONTRACT", "judge_order",
           "judge_same_outcome", "outcome_text", "ORDER_RULE", "oracle_not_compared"]

BIT_IDENTICAL = Verdict.BIT_IDENTICAL.value
WITHIN = Verdict.WITHIN.value
EXPECTED_ERROR = Verdict.EXPECTED_ERROR.value
ALLOWED = Verdict.ALLOWED.value
KNOWN_DEFECT = Verdict.KNOWN_DEFECT.value
SKIPPED = Verdict.SKIPPED.value
NOT_JUDGED = Verdict.NOT_JUDGED.value
ERROR = Verdict.ERROR.value
BROKEN = Verdict.BROKEN.value
#: The rule name of a subject x device x context that the contracts file does not cover (a failure).
NO_CONTRACT = "no contract"


def worst(verdicts: Iterable[str]) -> str:
    """The worst of some verdicts (:data:`~harness.core.records.VERDICTS` order); skipped only when all are.

    >>> worst(["bit-identical", "diverged as allowed", "skipped"])
    'diverged as allowed'
    >>> worst(["skipped", "skipped"])
    'skipped'
    """
    vs = [v for v in verdicts if v]
    ran = [v for v in vs if v != SKIPPED]
    if not ran:
        return SKIPPED if vs else ""
    return max(ran, key=lambda v: VERDICT_ORDER[v])


def _describe(contract: Any) -> str:
    """Which contract line judged: short, since every measure carries it (the rule says what it required)."""
    if contract is None:
        return "(no contract line)"
    where = (f"{getattr(contract, 'source', 'contracts.toml')} line {contract.line}" if getattr(contract, "line", 0)
             else "built in")
    return f"{contract.subject} on {contract.device} in {contract.context} ({where})"


def _base(kind: str, key: Mapping[str, str], tensor: str, **kw: Any) -> dict[str, Any]:
    return dict(kind=kind, case_id=key["case_id"], subject=key["subject"], device=key["device"],
                context=key["context"], tensor=tensor, **kw)


# --------------------------------------------------------------------------- run to run


def judge_repeats(contract: Any, key: Mapping[str, str], tensor: str, stats: TensorComparison,
                  digests: Sequence[str | None], processes: Sequence[str], *, judged: bool = True) -> list[Measure]:
    """Run-to-run verdicts of one tensor: repetitions in the pooled worker (``pool``) against ``reproducible``,
    and the fresh workers (``fresh:k``) against ``across_processes``.

    ``digests`` and ``processes`` are per successful repetition, as the runner recorded them. The statistics
    (``stats``: mismatched elements, greatest ULP and where) are over all repetitions. ``judged=False`` (a bad
    input, judged by its own rule) records the measures with the verdict "diverged as allowed" when they differ.
    """
    pool = [d for d, p in zip(digests, processes) if p == "pool"]
    fresh = [d for d, p in zip(digests, processes) if p != "pool"]
    out = []
    common = dict(dtype=stats.dtype, shape=tuple(stats.shape), n_total=stats.n_total, contract=_describe(contract))
    stat = dict(n_diff=stats.n_diff, max_ulp=stats.max_ulp, max_ulp_index=stats.max_ulp_index,
                actual=stats_value(stats, 0), expected=stats_value(stats, 1))
    if len(pool) > 1:
        same = len(set(pool)) == 1
        rule = "reproducible: bit-identical run to run in one process"
        verdict = BIT_IDENTICAL if same else _differs(contract, judged, contract is not None and contract.reproducible)
        out.append(Measure(**_base("repeat", key, tensor, other="pool", identical=same, n_unique=len(set(pool)),
                                   repeats=len(pool), verdict=verdict, rule=_rule(contract, rule), **common,
                                   **({} if same else stat))))
    if pool and fresh:
        same = set(fresh) <= {pool[0]}
        rule = "across_processes: bit-identical in fresh worker processes"
        verdict = BIT_IDENTICAL if same else _differs(contract, judged,
                                                        contract is not None and contract.across_processes)
        out.append(Measure(**_base("process", key, tensor, other="fresh", identical=same,
                                   n_unique=len(set(pool[:1] + fresh)), repeats=len(fresh) + 1, verdict=verdict,
                                   rule=_rule(contract, rule), **common, **({} if same else stat))))
    return out


def stats_value(stats: Any, which: int) -> str:
    """The value of repetition 0 (``which=0``) or of the first differing repetition (1) at the greatest ULP
    distance, as the runner recorded it (``""`` where it did not)."""
    vals = getattr(stats, "worst_values", None) or ()
    return vals[which] if len(vals) > which else ""


def _rule(contract: Any, rule: str) -> str:
    return NO_CONTRACT if contract is None else rule


def _differs(contract: Any, judged: bool, required: bool) -> str:
    if not judged:
        return ALLOWED
    if contract is None or required:
        return BROKEN
    return ALLOWED


# --------------------------------------------------------------------------- pairs


_PAIR_RULES = {
    "context": "identical_across: bit-identical to context {other}",
    "device": "bit-identical to device {other}",
    "baseline": "digest stable against the baseline",
    "relation": "invariant_under {relation}: bit-identical to the related case",
}


def pair_required(kind: str, contract: Any, other: str, relation: str = "") -> bool:
    """Whether the contract requires the two results of a pair to be bit-identical."""
    if contract is None:
        return False
    if kind == "context":
        return other in tuple(contract.identical_across)
    if kind == "baseline":
        return bool(contract.reproducible or contract.across_processes)
    if kind == "relation":
        return relation in tuple(getattr(contract, "invariant_under", ()) or ())
    return False  # no contract line asks for identity across devices: the oracle decides there


def judge_pair(kind: str, contract: Any, key: Mapping[str, str], tensor: str, mine: np.ndarray | None,
               other_arrays: np.ndarray | None, other: str, *, relation: str = "", judged: bool = True) -> Measure:
    """Bitwise verdict of one tensor against the same tensor elsewhere (``kind``: context, device, baseline,
    relation). A tensor missing on one side is a difference."""
    rule = _PAIR_RULES[kind].format(other=other, relation=relation)
    required = pair_required(kind, contract, other, relation)
    common = dict(other=other, relation=relation, contract=_describe(contract),
                  rule=rule if required or contract is not None else NO_CONTRACT)
    if mine is None or other_arrays is None:
        side = "here" if mine is None else f"in {other}"
        return Measure(**_base(kind, key, tensor, identical=False, verdict=_differs(contract, judged, required),
                               detail=f"tensor {tensor} is missing {side}", **common))
    c = comparator.compare_pair(tensor, mine, other_arrays)
    same = c.bitwise_identical
    idx = c.max_ulp_index if c.max_ulp_index is not None else c.first_diff_index
    return Measure(**_base(kind, key, tensor, dtype=c.dtype, shape=tuple(c.shape), identical=same,
                           n_diff=c.n_diff, n_total=c.n_total, max_ulp=int(c.max_ulp),
                           max_ulp_index=None if idx is None else tuple(idx),
                           actual="" if same else value_text(mine, idx),
                           expected="" if same else value_text(other_arrays, idx),
                           verdict=BIT_IDENTICAL if same else _differs(contract, judged, required), **common))


# --------------------------------------------------------------------------- oracle


def judge_oracle(contract: Any, key: Mapping[str, str], tensor: str, error: OracleError, tolerance: Tolerance,
                 oracle_name: str, known: Sequence[Any] = ()) -> Measure:
    """Verdict of one tensor's error against its oracle (measured by :func:`harness.judge.tolerance.judge_oracle`):
    within tolerance, else "known defect" where a ``[[known_defect]]`` of ``known`` (the declarations for this
    subject, device, case and context) names the tensor in ``wrong``, else broken where the contract says
    ``oracle = "within"``, else diverged as allowed."""
    required = contract is not None and contract.oracle == "within"
    defect = None if error.within_tolerance else next((d for d in known if d.covers_values(tensor)), None)
    verdict = (WITHIN if error.within_tolerance else KNOWN_DEFECT if defect is not None
               else BROKEN if required or contract is None else ALLOWED)
    return Measure(**_base("oracle", key, tensor, other=oracle_name, dtype=error.dtype, shape=tuple(error.shape),
                           n_diff=error.n_mismatch, n_total=error.n_total, max_ulp=int(error.max_ulp),
                           max_ulp_index=error.max_ulp_index, max_abs=error.max_abs,
                           max_abs_index=error.max_abs_index, max_rel=error.max_rel,
                           error_ratio=error.error_ratio, allowed=tolerance.describe(),
                           within=error.within_tolerance, actual=error.actual_at, expected=error.expected_at,
                           verdict=verdict,
                           rule=(defect.rule if defect is not None else
                                 "oracle = within: error within tolerance" if contract is not None else NO_CONTRACT),
                           contract=defect.cited if defect is not None else _describe(contract),
                           detail=defect.describe() if defect is not None else ""))


def oracle_not_compared(contract: Any, key: Mapping[str, str], tensor: str, oracle_name: str,
                        why: str) -> Measure | None:
    """An output the oracle has values for that the comparison does not take (strings, complex, 0-d): "not
    judged" where the contract asks for ``oracle = "within"`` (a check it asks for did not run), else nothing."""
    if contract is None or contract.oracle != "within":
        return None
    return Measure(**_base("oracle", key, tensor, other=oracle_name, verdict=NOT_JUDGED,
                           rule="oracle = within: error within tolerance", contract=_describe(contract),
                           detail=f"not compared with the oracle: {why}"))


# --------------------------------------------------------------------------- bad inputs


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
        return Measure(**_base("task", key, "", verdict=KNOWN_DEFECT, rule=defect.rule, contract=defect.cited,
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
    return Measure(**_base("task", key, "", verdict=verdict, rule=rule, contract=contract, actual=got,
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
        import hashlib

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
    return Measure(**_base(kind, key, "", other=other, identical=same, verdict=BIT_IDENTICAL if same else BROKEN,
                           rule=f"bad input ({expectation.source}): any outcome, the same {where}",
                           contract=f"{expectation.source}: {expectation.reason}".strip(), actual=mine,
                           expected=theirs, detail="" if same else f"outcome here: {mine}; {where}: {theirs}"))


# --------------------------------------------------------------------------- accumulation order


#: The rule an ``order`` measure judges: the subject declares its accumulation order and must keep it.
ORDER_RULE = "declared accumulation order: bit-identical to the reference summed in that order"


def judge_order(key: Mapping[str, str], tensor: str, mine: np.ndarray | None,
                reference: Mapping[str, np.ndarray] | None, reference_name: str, declared: str) -> Measure:
    """Verdict of one tensor against a reference computed in the order the subject declares (``declared``: the
    declaration's text; ``reference``: the reference's arrays, None where it produced none): bit-identical, else
    broken with the first differing element -- "accumulation order differs from the declared one". Where the
    reference produced nothing the check did not run: "not judged", with the reason."""
    common = dict(other=reference_name, rule=ORDER_RULE, contract=f"declared: {declared}")
    if reference is None:
        return Measure(**_base("order", key, tensor, verdict=NOT_JUDGED, detail=f"{reference_name} produced no "
                               f"values for this case: the declared order was not checked", **common))
    ref = reference.get(tensor)
    if mine is None or ref is None:
        side = "here" if mine is None else f"in {reference_name}"
        return Measure(**_base("order", key, tensor, identical=False, verdict=BROKEN,
                               detail=f"accumulation order differs from the declared one: tensor {tensor} is "
                                      f"missing {side}", **common))
    c = comparator.compare_pair(tensor, mine, ref)
    if c.bitwise_identical:
        return Measure(**_base("order", key, tensor, dtype=c.dtype, shape=tuple(c.shape), identical=True, n_diff=0,
                               n_total=c.n_total, max_ulp=0, verdict=BIT_IDENTICAL, **common))
    first = c.first_diff_index
    idx = c.max_ulp_index if c.max_ulp_index is not None else first
    at = "" if first is None else (f" at index {tuple(first)}: {value_text(mine, first)} here, "
                                   f"{value_text(ref, first)} in the declared order")
    return Measure(**_base("order", key, tensor, dtype=c.dtype, shape=tuple(c.shape), identical=False,
                           n_diff=c.n_diff, n_total=c.n_total, max_ulp=int(c.max_ulp),
                           max_ulp_index=None if idx is None else tuple(idx),
                           actual=value_text(mine, idx), expected=value_text(ref, idx),
                           verdict=BROKEN, detail=f"accumulation order differs from the declared one: first "
                                                  f"differing element{at}", **common))


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
        return Measure(**_base("task", key, "", verdict=NOT_JUDGED if not_judged_skip(skip_reason) else SKIPPED,
                               rule="not run", contract=_describe(contract), detail=why))
    if status != "ok":
        got = "" if error is None else f"{error.get('type')} in {error.get('phase')}: {error.get('message')}"
        defect = _known(known, error)
        same = len({_error_signature(e) for e in ([error] if error else []) + list(errors)}) == 1
        if defect is not None and status == "error" and run_status == "error" and same:
            return Measure(**_base("task", key, "", verdict=KNOWN_DEFECT, rule=defect.rule, actual=got,
                                   detail=defect.describe(), contract=defect.cited))
        return Measure(**_base("task", key, "", verdict=ERROR, rule=f"run {run_status}", actual=got,
                               detail=got, contract=_describe(contract)))
    if contract is None:
        return Measure(**_base("task", key, "", verdict=BROKEN, rule=NO_CONTRACT, contract="(none)",
                               detail=f"No contract line covers subject={key['subject']!r} "
                                      f"device={key['device']!r} context={key['context']!r}: add one to "
                                      f"contracts.toml (a missing line is a failure, not a pass)."))
    return None


# --------------------------------------------------------------------------- violations


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
        from harness.judge.findings import Origin, group

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
