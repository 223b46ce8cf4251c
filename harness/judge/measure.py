"""Measure once: every judged comparison of one task, from its record and arrays, as :class:`Measure` records.

:func:`measure_task` is the one place that decides which comparisons a task gets (run to run, fresh
processes, the contexts its contract names and the reference context, the CPU for a GPU row, the oracle, the
reference summed in the subject's declared accumulation order) and hands each to its judge in
:mod:`harness.judge.verdicts`. A bad input is judged by its rule: one that raises, where it raises; one with
documented semantics (``no_error``), like a valid case (oracle, bit identity) once it returned values; one
with none (``any``), by the sameness of its outcome across repeats, processes, contexts and devices. The
campaign's measure pass
(:mod:`harness.execute.measure_pass`) calls it with arrays loaded from disk, once per task; ``replay`` and the
pytest suites call it with arrays from runs in their own process. Pure: records and NumPy arrays in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from harness.core.cases import Case
from harness.core.records import Measure, TaskRecord
from harness.judge import task_verdicts, tolerance, verdicts
from harness.judge.contracts import Contract
from harness.judge.parallel import map_sized

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
    #: That task's record and its bad-input rules (for an ``any`` rule's outcome, which may be an error).
    record: TaskRecord | None = None
    rules: Sequence[Any] = ()


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
                 known_defects: Sequence[Any] = (),
                 order: tuple[str, Mapping[str, np.ndarray] | None, str] | None = None) -> list[Measure]:
    """Every measure of one task, each with its verdict.

    ``contract`` is the task's contract line (None: a "no contract" failure, except for an oracle, which has
    :func:`reference_contract`); ``bad_rules`` the contracts file's rules for the case's tags;
    ``known_defects`` its ``[[known_defect]]`` declarations for this subject, device, case and context. A bad
    input (a case marked bad, or one a rule names) is judged by :func:`task_verdicts.judge_bad_input`; where its rule
    documents what an accepted input returns, its tensors are then judged like a valid case's (oracle included),
    else recorded; an ``any`` rule's outcome must be the same in every repetition and in the ``references``
    governed by the same rule. ``arrays`` are repetition 0's; ``references`` the other results its tensors are
    compared with; ``oracle`` ``(name, arrays)``; ``order`` ``(reference name, its arrays or None, the
    declaration)`` for a subject that declares its accumulation order.
    """
    key: dict[str, Any] = {"case_id": record.case_id, "subject": record.subject, "device": record.device,
                           "context": record.context}
    if role == "oracle":
        contract = reference_contract(record.subject)
    # An oracle or reference is never on trial for a bad input: it runs only what it has semantics for.
    bad = (bool(record.bad_input) or bool(bad_rules)) and role != "oracle"
    out: list[Measure] = []
    exp = None
    if bad and record.status != "skipped":
        exp = task_verdicts.expectation_for(bad_rules, case.expect if case is not None else None, record.subject,
                                       record.device_kind)
        out.append(task_verdicts.judge_bad_input(exp, key, record.run_status, record.first_error, errors=record.errors,
                                            known=known_defects))
    else:
        task = task_verdicts.judge_task(contract, key, record.status, record.run_status, record.first_error,
                                   record.skip_reason, errors=record.errors, known=known_defects)
        if task is not None:
            out.append(task)
    accepted = bad and exp is not None and exp.values and record.status == "ok"
    judged = not bad or accepted
    if bad and exp is not None and exp.any_outcome and record.status != "skipped":
        out += _same_outcome(exp, key, record, case, contract, references)
    oracle_name = "" if oracle is None else oracle[0]
    compared = {} if oracle is None or arrays is None or not judged else _oracle_judgements(
        case, [n for n in record.tensors if arrays.get(n) is not None and n in oracle[1]], arrays, oracle[1],
        contract)
    for name, stats in record.tensors.items():
        digests = record.rep_digests.get(name, ())
        out += verdicts.judge_repeats(contract, key, name, stats, digests, record.rep_processes, judged=judged)
        mine = None if arrays is None else arrays.get(name)
        for ref in references:
            if ref.arrays is None:
                continue
            out.append(verdicts.judge_pair(ref.kind, contract, key, name, mine, ref.arrays.get(name), ref.name,
                                           relation=ref.relation, judged=judged))
        if name in compared:
            judgement = compared[name]
            if isinstance(judgement, Exception):  # no oracle comparison for it: strings, complex, 0-d
                missed = verdicts.oracle_not_compared(contract, key, name, oracle_name, str(judgement))
                out += [missed] if missed is not None else []
                continue
            err, tol = judgement
            out.append(verdicts.judge_oracle(contract, key, name, err, tol, oracle_name, known=known_defects))
    if accepted and exp is not None and oracle is None and role == "subject":
        out.append(Measure(kind="oracle", tensor="", verdict=verdicts.NOT_JUDGED, **key,
                           rule=f"bad input must: {exp.describe()}", contract=f"{exp.source}: {exp.reason}",
                           detail="the input was accepted, but the oracle gave no values for it: the documented "
                                  "semantics was not checked"))
    if order is not None and judged and record.status == "ok" and role != "oracle":
        ref_name, ref_arrays, declared = order
        for name in (sorted(ref_arrays) if ref_arrays else [ORDER_TENSOR]):
            out.append(verdicts.judge_order(key, name, None if arrays is None else arrays.get(name),
                                            ref_arrays, ref_name, declared))
    return out


def _oracle_judgements(case: Case | None, names: Sequence[str], arrays: Mapping[str, np.ndarray],
                       expected: Mapping[str, np.ndarray],
                       contract: Any) -> dict[str, tuple[tolerance.OracleError, tolerance.Tolerance] | Exception]:
    """Each tensor's comparison with the oracle (:func:`tolerance.judge_oracle`: its error and tolerance), or
    the ``TypeError``/``ValueError`` that says it has none (strings, complex, 0-d), by name."""

    def judge(name: str) -> tuple[tolerance.OracleError, tolerance.Tolerance] | Exception:
        try:
            with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf of an accepted bad input
                # text=False: a Measure keeps the numbers, never the printed arrays (array2string of both
                # arrays was a sixth of the pytest gate's LSTM examples, and thrown away)
                return tolerance.judge_oracle(case, name, arrays[name], expected[name], contract, text=False,
                                              noise=expected.get(f"noise.{name}"))
        except (TypeError, ValueError) as exc:
            return exc

    # on threads where the task is large (harness.judge.parallel): the comparisons are independent
    return dict(zip(names, map_sized(judge, names, [int(np.size(arrays[n])) for n in names])))


#: The tensor a declared accumulation order is about (the scatter-added gradient).
ORDER_TENSOR = "grad.W"


def _same_outcome(exp: Any, key: Mapping[str, str], record: TaskRecord, case: Case | None, contract: Any,
                  references: Sequence[Reference]) -> list[Measure]:
    """An ``any`` rule's measures: the outcome of repetition 0 against the other repetitions in its process and
    in fresh processes, and against each reference task (another context, another device) that the same rule
    governs. Values count by their digests where the contract requires bit identity there, else by their kind
    ("values returned"): the rule pins the outcome, the contract the bits."""
    out = []
    if record.status == "ok":
        pool = [i for i, p in enumerate(record.rep_processes) if p == "pool"]
        fresh = [i for i, p in enumerate(record.rep_processes) if p != "pool"]
        for kind, which, bits, other in (
                ("repeat", pool, bool(contract and contract.reproducible), "pool"),
                ("process", pool[:1] + fresh, bool(contract and contract.across_processes), "fresh")):
            if len(which) > 1 and (kind == "repeat" or fresh):
                first = task_verdicts.outcome_text("ok", (), record.rep_digests, which[:1], bits=bits)
                out.append(task_verdicts.judge_same_outcome(exp, key, kind, first, task_verdicts.outcome_text(
                    "ok", (), record.rep_digests, which, bits=bits), other))
    for ref in references:
        theirs_record = ref.record
        if ref.kind not in ("context", "device") or theirs_record is None or theirs_record.status == "skipped":
            continue
        theirs_exp = task_verdicts.expectation_for(ref.rules, case.expect if case is not None else None,
                                              theirs_record.subject, theirs_record.device_kind)
        if theirs_exp is None or theirs_exp.source != exp.source or not theirs_exp.any_outcome:
            continue  # another rule governs there (debug mode's, say): its outcome may differ
        bits = verdicts.pair_required(ref.kind, contract, ref.name)
        mine = task_verdicts.outcome_text(record.run_status, record.errors, record.rep_digests, bits=bits)
        theirs = task_verdicts.outcome_text(theirs_record.run_status, theirs_record.errors, theirs_record.rep_digests,
                                       bits=bits)
        out.append(task_verdicts.judge_same_outcome(exp, key, ref.kind, mine, theirs, ref.name))
    return out
