"""One judge per verdict of a tensor: pure functions from measured comparisons (and a contract) to
:class:`Measure` records.

Every verdict the harness gives comes from one of these functions or a task's (:mod:`harness.judge.task_verdicts`:
a bad input, an error, a skip, a declared known defect), and nothing else decides one:

- :func:`judge_repeats`: run to run in one process (``reproducible``) and across fresh processes
  (``across_processes``), from the per-repetition digests the runner recorded;
- :func:`judge_pair`: two results that may have to be bit-identical: another context (``identical_across``),
  another device, a stored baseline (digests that must be stable), a related case (``invariant_under``);
- :func:`judge_oracle`: error against the float64 oracle under the one tolerance policy
  (:func:`harness.judge.tolerance.judge_oracle`);
- :func:`judge_order`: a tensor against a reference summed in the order the subject declares (bit for bit).

The gate, the report's tables, ``replay``, audits and the pytest suites call these; the broken ones become
dossiers in :mod:`harness.judge.violations`. Every judge builds its measure from :func:`keyed` and names the
contract line that judged as :func:`cite` does.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from harness.core.classification import VERDICT_ORDER, Verdict
from harness.core.records import Measure, TensorComparison
from harness.judge import comparator
from harness.judge.tolerance import OracleError, Tolerance
from harness.judge.ulp import value_text

__all__ = ["Verdict", "BIT_IDENTICAL", "WITHIN", "EXPECTED_ERROR", "ALLOWED", "KNOWN_DEFECT", "SKIPPED", "NOT_JUDGED",
           "ERROR", "BROKEN", "worst", "judge_repeats", "judge_pair", "pair_required", "judge_oracle",
           "oracle_not_compared", "NO_CONTRACT", "judge_order", "ORDER_RULE", "stats_value", "cite",
           "keyed"]

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


def cite(contract: Any) -> str:
    """Which contract line judged: short, since every measure carries it (the rule says what it required)."""
    if contract is None:
        return "(no contract line)"
    where = (f"{getattr(contract, 'source', 'contracts.toml')} line {contract.line}" if getattr(contract, "line", 0)
             else "built in")
    return f"{contract.subject} on {contract.device} in {contract.context} ({where})"


def keyed(kind: str, key: Mapping[str, str], tensor: str, **kw: Any) -> dict[str, Any]:
    """A :class:`Measure`'s fields: its kind, the task's key (case, subject, device, context), its tensor."""
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
    common = dict(dtype=stats.dtype, shape=tuple(stats.shape), n_total=stats.n_total, contract=cite(contract))
    stat = dict(n_diff=stats.n_diff, max_ulp=stats.max_ulp, max_ulp_index=stats.max_ulp_index,
                actual=stats_value(stats, 0), expected=stats_value(stats, 1))
    if len(pool) > 1:
        same = len(set(pool)) == 1
        rule = "reproducible: bit-identical run to run in one process"
        verdict = BIT_IDENTICAL if same else _differs(contract, judged, contract is not None and contract.reproducible)
        out.append(Measure(**keyed("repeat", key, tensor, other="pool", identical=same, n_unique=len(set(pool)),
                                   repeats=len(pool), verdict=verdict, rule=_rule(contract, rule), **common,
                                   **({} if same else stat))))
    if pool and fresh:
        same = set(fresh) <= {pool[0]}
        rule = "across_processes: bit-identical in fresh worker processes"
        verdict = BIT_IDENTICAL if same else _differs(contract, judged,
                                                        contract is not None and contract.across_processes)
        out.append(Measure(**keyed("process", key, tensor, other="fresh", identical=same,
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
    common = dict(other=other, relation=relation, contract=cite(contract),
                  rule=rule if required or contract is not None else NO_CONTRACT)
    if mine is None or other_arrays is None:
        side = "here" if mine is None else f"in {other}"
        return Measure(**keyed(kind, key, tensor, identical=False, verdict=_differs(contract, judged, required),
                               detail=f"tensor {tensor} is missing {side}", **common))
    c = comparator.compare_pair(tensor, mine, other_arrays)
    same = c.bitwise_identical
    idx = c.max_ulp_index if c.max_ulp_index is not None else c.first_diff_index
    return Measure(**keyed(kind, key, tensor, dtype=c.dtype, shape=tuple(c.shape), identical=same,
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
    return Measure(**keyed("oracle", key, tensor, other=oracle_name, dtype=error.dtype, shape=tuple(error.shape),
                           n_diff=error.n_mismatch, n_total=error.n_total, max_ulp=int(error.max_ulp),
                           max_ulp_index=error.max_ulp_index, max_abs=error.max_abs,
                           max_abs_index=error.max_abs_index, max_rel=error.max_rel,
                           error_ratio=error.error_ratio, allowed=tolerance.describe(),
                           within=error.within_tolerance, actual=error.actual_at, expected=error.expected_at,
                           verdict=verdict,
                           rule=(defect.rule if defect is not None else
                                 "oracle = within: error within tolerance" if contract is not None else NO_CONTRACT),
                           contract=defect.cited if defect is not None else cite(contract),
                           detail=defect.describe() if defect is not None else ""))


def oracle_not_compared(contract: Any, key: Mapping[str, str], tensor: str, oracle_name: str,
                        why: str) -> Measure | None:
    """An output the oracle has values for that the comparison does not take (strings, complex, 0-d): "not
    judged" where the contract asks for ``oracle = "within"`` (a check it asks for did not run), else nothing."""
    if contract is None or contract.oracle != "within":
        return None
    return Measure(**keyed("oracle", key, tensor, other=oracle_name, verdict=NOT_JUDGED,
                           rule="oracle = within: error within tolerance", contract=cite(contract),
                           detail=f"not compared with the oracle: {why}"))


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
        return Measure(**keyed("order", key, tensor, verdict=NOT_JUDGED, detail=f"{reference_name} produced no "
                               f"values for this case: the declared order was not checked", **common))
    ref = reference.get(tensor)
    if mine is None or ref is None:
        side = "here" if mine is None else f"in {reference_name}"
        return Measure(**keyed("order", key, tensor, identical=False, verdict=BROKEN,
                               detail=f"accumulation order differs from the declared one: tensor {tensor} is "
                                      f"missing {side}", **common))
    c = comparator.compare_pair(tensor, mine, ref)
    if c.bitwise_identical:
        return Measure(**keyed("order", key, tensor, dtype=c.dtype, shape=tuple(c.shape), identical=True, n_diff=0,
                               n_total=c.n_total, max_ulp=0, verdict=BIT_IDENTICAL, **common))
    first = c.first_diff_index
    idx = c.max_ulp_index if c.max_ulp_index is not None else first
    at = "" if first is None else (f" at index {tuple(first)}: {value_text(mine, first)} here, "
                                   f"{value_text(ref, first)} in the declared order")
    return Measure(**keyed("order", key, tensor, dtype=c.dtype, shape=tuple(c.shape), identical=False,
                           n_diff=c.n_diff, n_total=c.n_total, max_ulp=int(c.max_ulp),
                           max_ulp_index=None if idx is None else tuple(idx),
                           actual=value_text(mine, idx), expected=value_text(ref, idx),
                           verdict=BROKEN, detail=f"accumulation order differs from the declared one: first "
                                                  f"differing element{at}", **common))
