"""Measure once: every judged comparison of one task, from its record and arrays, as :class:`Measure` records.

:func:`measure_task` is the one place that decides which comparisons a task gets (run to run, fresh
processes, the contexts its contract names and the reference context, the CPU for a GPU row, the oracle) and
hands each to its judge in :mod:`harness.judge.verdicts`. The campaign's measure pass
(:mod:`harness.execute.measures`) calls it with arrays loaded from disk, once per task; ``replay`` and the
pytest suites call it with arrays from runs in their own process. Pure: records and NumPy arrays in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from harness.core.cases import Case
from harness.core.records import Measure, TaskRecord
from harness.judge import tolerance, verdicts
from harness.judge.contracts import Contract

__all__ = ["Reference", "REFERENCE_CONTEXT", "REFERENCE_DEVICE", "reference_contract", "measure_task",
           "references_for"]

#: Every row is also compared with the same case/subject/device/tensor in this context (when it ran)...
REFERENCE_CONTEXT = "default"
#: ... and every GPU row with the CPU's.
REFERENCE_DEVICE = "cpu"


@dataclass(frozen=True)
class Reference:
    """Another result to compare a task's tensors with: ``kind`` context/device/baseline/relation, named
    ``name``, with its arrays (None where that task produced none)."""

    kind: str
    name: str
    arrays: Mapping[str, np.ndarray] | None
    relation: str = ""


def reference_contract(subject: str) -> Contract:
    """The implicit contract of an oracle: a float64 reference must be reproducible run to run."""
    return Contract(subject=subject, device="cpu", context="*", reproducible=True, across_processes=False,
                    identical_across=(), oracle="record", tolerance={},
                    reason="the float64 oracle is the reference every subject is judged against")


def references_for(record: TaskRecord, contract: Any) -> list[tuple[str, str, str]]:
    """Which other tasks a task is compared with: ``(kind, device, context)`` of each (the reference
    context, every context its contract names, and the reference device)."""
    out: list[tuple[str, str, str]] = []
    contexts = [REFERENCE_CONTEXT] + list(getattr(contract, "identical_across", ()) or ())
    for ctx in dict.fromkeys(contexts):
        if ctx != record.context:
            out.append(("context", record.device, ctx))
    if record.device != REFERENCE_DEVICE:
        out.append(("device", REFERENCE_DEVICE, record.context))
    return out


def measure_task(record: TaskRecord, case: Case | None, contract: Any, *, role: str = "subject",
                 bad_rules: Sequence[Any] = (), arrays: Mapping[str, np.ndarray] | None = None,
                 references: Sequence[Reference] = (), oracle: tuple[str, Mapping[str, np.ndarray]] | None = None,
                 text: bool = False) -> list[Measure]:
    """Every measure of one task, each with its verdict.

    ``contract`` is the task's contract line (None: a "no contract" failure, except for an oracle, which has
    :func:`reference_contract`); ``bad_rules`` the contracts file's rules for the case's tags. A bad input
    (a case marked bad, or one a rule names) is judged by :func:`verdicts.judge_bad_input` and its tensors are
    recorded, not judged for determinism. ``arrays`` are repetition 0's; ``references`` the other results its
    tensors are compared with; ``oracle`` ``(name, arrays)``.
    """
    key = {"case_id": record.case_id, "subject": record.subject, "device": record.device,
           "context": record.context}
    if role == "oracle":
        contract = reference_contract(record.subject)
    bad = bool(record.bad_input) or bool(bad_rules)
    out: list[Measure] = []
    if bad and record.status != "skipped":
        exp = verdicts.expectation_for(bad_rules, case.expect if case is not None else None, record.subject,
                                       record.device_kind)
        out.append(verdicts.judge_bad_input(exp, key, record.run_status, record.first_error))
    else:
        task = verdicts.judge_task(contract, key, record.status, record.run_status, record.first_error,
                                   record.skip_reason)
        if task is not None:
            out.append(task)
    judged = not bad
    for name, stats in record.tensors.items():
        digests = record.rep_digests.get(name, ())
        out += verdicts.judge_repeats(contract, key, name, stats, digests, record.rep_processes, judged=judged)
        mine = None if arrays is None else arrays.get(name)
        for ref in references:
            if ref.arrays is None:
                continue
            out.append(verdicts.judge_pair(ref.kind, contract, key, name, mine, ref.arrays.get(name), ref.name,
                                           relation=ref.relation, judged=judged))
        if oracle is not None and mine is not None and name in oracle[1] and not bad:
            try:
                err, tol = tolerance.judge_oracle(case, name, mine, oracle[1][name], contract, text=text)
            except (TypeError, ValueError):
                continue  # a dtype with no oracle comparison (strings, complex): nothing to judge
            out.append(verdicts.judge_oracle(contract, key, name, err, tol, oracle[0]))
    return out
