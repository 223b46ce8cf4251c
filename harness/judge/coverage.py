"""Which measures a contract line requires of a task, and whether they were taken: one function.

A verdict can only be green for a check that ran. The measure pass (:mod:`harness.execute.measure_pass`) hands
:func:`missing_measures` each task's measures; every rule of the task's contract that needed a measure which is
not there becomes a ``not judged`` measure with its reason (the gate fails on it, ``Verdict.fails``), instead of
a cell that reads "all contracts hold" because nothing was compared:

- ``oracle = "within"``: the oracle takes the case, yet no oracle measure was taken (it did not run: left out of
  the campaign, failed, skipped);
- ``invariant_under = [R]``: the case has related cases under R, yet no member was compared with it (the
  relation was not run, or its members gave nothing to compare).
"""

from __future__ import annotations

from typing import Any, Iterable

from harness.core.classification import Verdict
from harness.core.records import Measure, TaskRecord

__all__ = ["missing_measures"]


def missing_measures(record: TaskRecord, contract: Any, taken: Iterable[Measure], *, role: str = "subject",
                     bad: bool = False, oracle: str | None = None, oracle_takes_case: bool = False,
                     relations_possible: Iterable[str] = ()) -> list[Measure]:
    """The ``not judged`` measures of one task: one per rule of ``contract`` whose measure is not in ``taken``.

    ``taken``: the task's measures (a relation's measures carry the base case's key); ``bad``: the case is judged
    as a bad input (its rule, not the contract's values, unless the rule documents them: then the caller passes
    False); ``oracle``: the oracle that judges the subject, and ``oracle_takes_case`` whether it has semantics
    for this case; ``relations_possible``: the relations under which this case has related cases in this
    context.

    >>> from harness.core.records import TaskRecord
    >>> from types import SimpleNamespace as C
    >>> rec = TaskRecord(key="k", case_id="c", family="embed", subject="s", device="cpu", context="default",
    ...                  bad_input=False, runs=1, ok_runs=1, statuses={"ok": 1}, status="ok")
    >>> [m.rule for m in missing_measures(rec, C(oracle="within", invariant_under=()), [], oracle="oracle.embed",
    ...                                   oracle_takes_case=True)]
    ['oracle = within']
    """
    if contract is None or role != "subject" or bad or record.status not in ("ok", "partial"):
        return []  # nothing to judge (no line: a "no contract" failure of its own; errors: error rows)
    taken = [m for m in taken if m.verdict != Verdict.SKIPPED.value]
    key: dict[str, Any] = {"case_id": record.case_id, "subject": record.subject, "device": record.device,
                           "context": record.context}
    out = []
    where = f"{getattr(contract, 'source', 'contracts')} line {getattr(contract, 'line', 0)}"
    if getattr(contract, "oracle", None) == "within" and oracle_takes_case and \
            not any(m.kind == "oracle" for m in taken):
        out.append(Measure(kind="oracle", tensor="", other=oracle or "", verdict=Verdict.NOT_JUDGED.value,
                           rule="oracle = within", contract=where, **key,
                           detail=f"the contract asks for the error against {oracle or 'the oracle'}, which gave no "
                                  f"values for this case (not run, failed or skipped): nothing was compared"))
    possible = set(relations_possible)
    for rel in getattr(contract, "invariant_under", ()) or ():
        if rel in possible and not any(m.kind == "relation" and m.relation == rel for m in taken):
            out.append(Measure(kind="relation", tensor="", relation=rel, verdict=Verdict.NOT_JUDGED.value,
                               rule=f"invariant_under {rel}", contract=where, **key,
                               detail=f"the contract claims invariance under {rel!r}, but no related case was "
                                      f"compared with this one (the relation was not run, or its members gave "
                                      f"nothing to compare)"))
    return out
