"""The results table: one row per case x subject x device x context x tensor of a campaign (``results.csv.gz``).

Data flows one way. The campaign wrote ``tasks.jsonl`` (:class:`~harness.core.records.TaskRecord`) and its
measure pass ``measures.jsonl`` (:class:`~harness.core.records.Measure`, each with its verdict); this module
only arranges them, one typed row per tensor (:data:`RESULT_COLUMNS`). Nothing here loads an array or judges
anything. The other tables (:mod:`harness.outputs.tables`) are built from this one or from the same records,
with the helpers below (:func:`subject_info`, :func:`case_size`, :func:`uint64_column`).

``finding`` (row level) keeps the declared-versus-observed classes, which say whether a divergence was
announced (by the subject's declaration or Chainer's ``warn_nondeterministic`` warnings):
``"observed but not declared"``, ``"declared and observed"``, ``"declared, not observed"``, ``"reproducible"``
(``"no data"`` for a group without tensors). ``verdict`` says whether the contract holds.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from harness.core.cases import Case
from harness.core.classification import Verdict
from harness.core.records import Measure
from harness.judge.measure import REFERENCE_CONTEXT, REFERENCE_DEVICE
from harness.judge.verdicts import worst

__all__ = ["RESULT_COLUMNS", "REFERENCE_DEVICE", "REFERENCE_CONTEXT", "results_frame", "subject_info", "case_size",
           "uint64_column", "OBSERVED_NOT_DECLARED", "DECLARED_AND_OBSERVED", "DECLARED_NOT_OBSERVED",
           "REPRODUCIBLE", "NO_DATA"]


#: The columns of :func:`results_frame`, in order: the documented ones, then extras.
RESULT_COLUMNS: tuple[str, ...] = (
    "case_id", "family", "subject", "device", "context", "tensor", "dtype", "shape", "repeats",
    "bitwise_reproducible", "n_diff", "frac_diff", "max_ulp_repeat", "first_diff_index", "digest",
    "n_unique", "cross_device_max_ulp", "cross_device_identical", "cross_context_max_ulp",
    "cross_context_identical", "oracle_max_abs", "oracle_max_rel", "oracle_max_ulp", "within_tolerance",
    "tolerance", "nan_count", "inf_count", "declared_nondeterministic",
    "chainer_declared", "observed_nondeterministic", "status", "error", "bad_input", "case_size",
    "error_ratio", "verdict", "contract",
    # extras
    "finding", "n_total", "cross_device_n_diff", "cross_context_n_diff", "oracle_n_mismatch",
    "declared_reason", "device_kind", "error_type", "error_phase", "error_message", "error_expected",
    "expectation", "skip_reason", "runs", "ok_runs", "key", "array_file", "role", "relation",
)

_STR = ("case_id", "family", "subject", "device", "context", "tensor", "dtype", "shape",
        "first_diff_index", "digest", "tolerance", "chainer_declared", "status", "error", "finding",
        "declared_reason", "device_kind", "error_type", "error_phase", "error_message", "expectation",
        "skip_reason", "key", "array_file", "verdict", "contract", "role", "relation")
_INT = ("repeats", "n_diff", "n_unique", "nan_count", "inf_count", "case_size",
        "n_total", "cross_device_n_diff", "cross_context_n_diff", "oracle_n_mismatch", "runs", "ok_runs")
_UINT = ("max_ulp_repeat", "cross_device_max_ulp", "cross_context_max_ulp", "oracle_max_ulp")
_FLOAT = ("frac_diff", "oracle_max_abs", "oracle_max_rel", "error_ratio")
_BOOL = ("bitwise_reproducible", "cross_device_identical", "cross_context_identical", "within_tolerance",
         "declared_nondeterministic", "observed_nondeterministic", "bad_input", "error_expected")


OBSERVED_NOT_DECLARED = "observed but not declared"
DECLARED_AND_OBSERVED = "declared and observed"
DECLARED_NOT_OBSERVED = "declared, not observed"
REPRODUCIBLE = "reproducible"
NO_DATA = "no data"


def _index_text(index: Any) -> str:
    if index is None:
        return ""
    return str(tuple(int(i) for i in index))


def _error_text(err: Mapping[str, Any]) -> str:
    return f"{err.get('type', '')} in {err.get('phase', '')}: {err.get('message', '')}"


def subject_info(subject: str, device_kind: str) -> tuple[str, bool | None, str]:
    """(role, declared nondeterministic?, reason) of a registered subject (unknown ones: plain subjects)."""
    from harness.subjects.registry import SUBJECTS

    subj = SUBJECTS.get(subject)
    if subj is None:
        return "subject", None, "subject not registered in this process"
    d = subj.declared_for(device_kind)
    return subj.role, (None if d.deterministic is None else not d.deterministic), d.reason


def case_size(case: Case | None) -> int | None:
    if case is None:
        return None
    try:
        return int(case.size())
    except Exception:  # noqa: BLE001 - a bad case's spec may not have a size
        return None


def uint64_column(values: Iterable[Any]) -> Any:
    """A nullable UInt64 column from ints and missing values, built without passing through float64 (which
    cannot hold ULP distances near 2**64, such as NaN against a number)."""
    vals = list(values)
    mask = np.array([v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) for v in vals], dtype=bool)
    data = np.array([0 if m else int(v) for v, m in zip(vals, mask)], dtype=object).astype(np.uint64)
    return pd.arrays.IntegerArray(data, mask)


def _typed(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    for c in _STR:
        df[c] = df[c].fillna("").astype(str) if len(df) else df[c].astype(str)
    for c in _INT:
        df[c] = pd.array(df[c].tolist(), dtype="Int64")
    for c in _UINT:
        df[c] = uint64_column(r.get(c) for r in rows)  # from the rows: the frame may already hold them as floats
    for c in _FLOAT:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    for c in _BOOL:
        df[c] = pd.array(df[c].tolist(), dtype="boolean")
    return df


def _row_finding(observed: bool | None, declared: bool) -> str:
    if observed is None:
        return ""
    if observed:
        return DECLARED_AND_OBSERVED if declared else OBSERVED_NOT_DECLARED
    return DECLARED_NOT_OBSERVED if declared else REPRODUCIBLE


def _ulp(v: Any) -> int | None:
    return None if v is None else int(v)


def results_frame(run: Any) -> pd.DataFrame:
    """One row per case x subject x device x context x tensor of a campaign (a
    :class:`~harness.execute.driver.CampaignRun`: its records, cases and measures, in memory).

    A task that produced no tensors (error, skip, crash, timeout) gets one row with ``tensor == ""`` and
    ``error`` filled (``"Type in phase: message"`` or ``"skipped: reason"``). Columns are
    :data:`RESULT_COLUMNS`: the repetition measures of the task record, then the measures of the measure
    pass: cross-device (against :data:`REFERENCE_DEVICE`), cross-context (against :data:`REFERENCE_CONTEXT`),
    oracle error (``error_ratio`` = error / allowed, 1.0 at the tolerance; ``tolerance`` = what was allowed
    and why; ``oracle_max_rel``/``oracle_max_ulp`` are elementwise and large near zero: kept for analysis,
    not for reading), and ``verdict``, the worst verdict of the row's measures. Missing measures are
    ``<NA>`` / NaN / ``""``. ``frame.attrs["campaign_dir"]`` holds the directory.
    """
    tasks, cases, measures = run.records, run.cases, run.measures
    by: dict[tuple[str, str, str, str, str], list[Measure]] = {}
    for m in measures:
        by.setdefault((m.case_id, m.subject, m.device, m.context, m.tensor), []).append(m)
    rows: list[dict[str, Any]] = []
    # A case's contexts side by side (then its tensors): rows that mostly repeat one another's digests and
    # numbers, which gzip then finds within its 32 KiB window.
    for rec in sorted(tasks.values(), key=lambda r: (r.subject, r.device, r.case_id, r.context)):
        kind = rec.device_kind
        case = cases.get(rec.case_id)
        role, declared, reason = subject_info(rec.subject, kind)
        chainer = ", ".join(rec.declared_warnings)
        is_declared = bool(declared) or bool(chainer)
        first = rec.first_error
        if rec.status == "skipped":
            error = f"skipped: {rec.skip_reason or ''}"
        else:
            error = _error_text(first) if first else ""
        task_ms = by.get((rec.case_id, rec.subject, rec.device, rec.context, ""), [])
        bad = next((m for m in task_ms if m.rule.startswith("bad input")), None)
        base: dict[str, Any] = {
            "case_id": rec.case_id, "family": rec.family, "subject": rec.subject, "device": rec.device,
            "context": rec.context, "status": rec.status, "error": error, "bad_input": rec.bad_input,
            "case_size": case_size(case), "declared_nondeterministic": declared, "chainer_declared": chainer,
            "declared_reason": reason, "device_kind": kind, "role": role,
            "error_type": first.get("type", "") if first else "",
            "error_phase": first.get("phase", "") if first else "",
            "error_message": first.get("message", "") if first else "",
            "error_expected": (None if first is None or bad is None else bad.verdict == Verdict.EXPECTED_ERROR),
            "expectation": bad.expected if bad is not None else "",
            "skip_reason": rec.skip_reason or "", "runs": rec.runs, "ok_runs": rec.ok_runs,
            "key": rec.key, "array_file": rec.array_file or "",
            # a related case's relation, member and base case (empty for a case of the corpus itself)
            "relation": "" if case is None or not isinstance(case.spec.get("relation"), Mapping) else
            "{name}:{label} of {base}".format(**case.spec["relation"]),
        }
        task_verdict = worst(m.verdict for m in task_ms)
        contract = next((m.contract for m in task_ms), "")
        if not rec.tensors:
            rows.append({**base, "tensor": "", "finding": "", "verdict": task_verdict, "contract": contract})
            continue
        for name, t in sorted(rec.tensors.items()):  # by name: the same order in memory and read back
            observed = not t.bitwise_identical
            row = {**base, "tensor": name, "dtype": t.dtype, "shape": str(tuple(t.shape)), "repeats": t.repeats,
                   "bitwise_reproducible": t.bitwise_identical, "n_diff": t.n_diff, "frac_diff": t.frac_diff,
                   "max_ulp_repeat": t.max_ulp, "first_diff_index": _index_text(t.first_diff_index),
                   "digest": t.digest or "", "n_unique": t.n_unique, "nan_count": t.nan_count,
                   "inf_count": t.inf_count, "n_total": t.n_total, "observed_nondeterministic": observed,
                   "finding": _row_finding(observed, is_declared)}
            ms = by.get((rec.case_id, rec.subject, rec.device, rec.context, name), [])
            for m in ms:
                if m.kind == "device" and m.other == REFERENCE_DEVICE:
                    row.update(cross_device_max_ulp=_ulp(m.max_ulp), cross_device_identical=m.identical,
                               cross_device_n_diff=m.n_diff)
                elif m.kind == "context" and m.other == REFERENCE_CONTEXT:
                    row.update(cross_context_max_ulp=_ulp(m.max_ulp), cross_context_identical=m.identical,
                               cross_context_n_diff=m.n_diff)
                elif m.kind == "oracle":
                    row.update(oracle_max_abs=m.max_abs, oracle_max_rel=m.max_rel, oracle_max_ulp=_ulp(m.max_ulp),
                               within_tolerance=m.within, oracle_n_mismatch=m.n_diff, error_ratio=m.error_ratio,
                               tolerance=m.allowed)
            row["verdict"] = worst([task_verdict] + [m.verdict for m in ms])
            row["contract"] = next((m.contract for m in ms), contract)
            rows.append(row)
    df = _typed(rows)
    df.attrs["campaign_dir"] = os.path.abspath(run.directory)
    return df
