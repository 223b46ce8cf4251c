"""The report tables: a campaign directory's records and measures in, pandas frames out.

Data flows one way. The campaign wrote ``tasks.jsonl`` (:class:`~harness.core.records.TaskRecord`) and its
measure pass ``measures.jsonl`` (:class:`~harness.core.records.Measure`, each with its verdict); this module
only arranges them. Nothing here loads an array or judges anything:

- :func:`results_frame`: one row per case x subject x device x context x tensor (``results.csv.gz``);
- :func:`summary_frame`: per subject x device x context, with the worst ``verdict``;
- :func:`cells_frame`: the verdict matrix, per subject x device x context x relation;
- :func:`findings_frame`: one row per subject x device x context x case x kind of finding, with a
  ``replay`` command that reproduces it;
- :func:`oracle_errors_frame`, :func:`divergence_frame`: what the plots draw;

``finding`` (row level) keeps the declared-versus-observed classes, which say whether a divergence was
announced (by the subject's declaration or Chainer's ``warn_nondeterministic`` warnings):
``"observed but not declared"``, ``"declared and observed"``, ``"declared, not observed"``, ``"reproducible"``
(``"no data"`` for a group without tensors). ``verdict`` says whether the contract holds.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from harness.core.cases import Case
from harness.core.forking import BEHIND, Forked
from harness.core.records import Measure, TaskRecord
from harness.judge.bits import ULP_MAX
from harness.judge.measure import REFERENCE_CONTEXT, REFERENCE_DEVICE
from harness.judge.outcomes import BITWISE_KINDS, is_difference
from harness.judge.verdicts import worst

if TYPE_CHECKING:
    from harness.outputs.drawing import FigureServer, Job

__all__ = [
    "RESULT_COLUMNS", "SUMMARY_COLUMNS", "FINDING_COLUMNS", "CELL_COLUMNS", "REFERENCE_DEVICE", "REFERENCE_CONTEXT",
    "results_frame", "summary_frame", "findings_frame", "cells_frame", "oracle_errors_frame", "divergence_frame",
    "write_report", "terminal_summary", "flatten_environment",
]

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

#: The columns of :func:`summary_frame`, in order.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "subject", "device", "context", "verdict", "cases_run", "tasks", "tensors", "bitwise_share_tensors",
    "bitwise_share_tasks", "worst_max_ulp_repeat", "worst_cross_device_ulp", "worst_cross_context_ulp",
    "worst_error_ratio", "share_within_tolerance", "oracle_compared", "nan_count", "errors", "skipped",
    "declared_subject", "declared_chainer", "observed_tensors", "finding", "contract",
)

#: The columns of :func:`findings_frame`, in order (one row per :class:`~harness.judge.findings.Finding`).
FINDING_COLUMNS: tuple[str, ...] = (
    "id", "headline", "classification", "kind", "verdict", "subject", "subjects", "device", "context", "other",
    "relation", "rule", "tensor_kind", "n_cases", "tensors_differing", "worst_tensor", "worst_ulp", "worst_abs",
    "worst_rel", "error_ratio", "actual", "expected", "detail", "case_id", "minimal_case", "replay", "export",
    "localize", "shrink", "root_cause", "role",
)

#: The columns of :func:`cells_frame`, in order.
CELL_COLUMNS: tuple[str, ...] = (
    "subject", "role", "device", "context", "relation", "verdict", "worst_ulp", "tensors", "tensors_differing",
    "error_ratio", "allowed", "contract", "reason",
)

OBSERVED_NOT_DECLARED = "observed but not declared"
DECLARED_AND_OBSERVED = "declared and observed"
DECLARED_NOT_OBSERVED = "declared, not observed"
REPRODUCIBLE = "reproducible"
NO_DATA = "no data"
_GROUP_ORDER = (OBSERVED_NOT_DECLARED, DECLARED_AND_OBSERVED, DECLARED_NOT_OBSERVED, REPRODUCIBLE)

_GROUP_KEYS = ["subject", "device", "context"]
_BITWISE_KINDS = tuple(sorted(BITWISE_KINDS))


# --------------------------------------------------------------------------- small helpers


def _index_text(index: Any) -> str:
    if index is None:
        return ""
    return str(tuple(int(i) for i in index))


def _error_text(err: Mapping[str, Any]) -> str:
    return f"{err.get('type', '')} in {err.get('phase', '')}: {err.get('message', '')}"


def _subject_info(subject: str, device_kind: str) -> tuple[str, bool | None, str]:
    """(role, declared nondeterministic?, reason) of a registered subject (unknown ones: plain subjects)."""
    from harness.subjects.registry import SUBJECTS

    subj = SUBJECTS.get(subject)
    if subj is None:
        return "subject", None, "subject not registered in this process"
    d = subj.declared_for(device_kind)
    return subj.role, (None if d.deterministic is None else not d.deterministic), d.reason


def _case_size(case: Case | None) -> int | None:
    if case is None:
        return None
    try:
        return int(case.size())
    except Exception:  # noqa: BLE001 - a bad case's spec may not have a size
        return None


def _uint64(values: Iterable[Any]) -> Any:
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
        df[c] = _uint64(r.get(c) for r in rows)  # from the rows: the frame may already hold them as floats
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


# --------------------------------------------------------------------------- results


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
    for rec in sorted(tasks.values(), key=lambda r: (r.subject, r.device, r.context, r.case_id)):
        kind = rec.device_kind
        case = cases.get(rec.case_id)
        role, declared, reason = _subject_info(rec.subject, kind)
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
            "case_size": _case_size(case), "declared_nondeterministic": declared, "chainer_declared": chainer,
            "declared_reason": reason, "device_kind": kind, "role": role,
            "error_type": first.get("type", "") if first else "",
            "error_phase": first.get("phase", "") if first else "",
            "error_message": first.get("message", "") if first else "",
            "error_expected": (None if first is None or bad is None else bad.verdict == "expected error"),
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


# --------------------------------------------------------------------------- summary


def _na(v: Any) -> bool:
    """A missing value as pandas' ``dropna`` sees one (None, NaN, ``pd.NA``)."""
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def _max_of(values: Iterable[Any]) -> Any:
    vals = [v for v in values if not _na(v)]
    return max(vals) if vals else pd.NA


def _group_finding(findings: Iterable[str]) -> str:
    present = set(findings)
    for f in _GROUP_ORDER:
        if f in present:
            return f
    return NO_DATA


def summary_frame(results: pd.DataFrame) -> pd.DataFrame:
    """Per subject x device x context, computed only from ``results``.

    Columns (:data:`SUMMARY_COLUMNS`): ``verdict`` (the worst of the group's rows), ``cases_run`` (distinct
    cases of tasks not skipped), ``tasks``, ``tensors`` (tensor rows), ``bitwise_share_tensors`` (mean of
    ``bitwise_reproducible`` over tensor rows), ``bitwise_share_tasks`` (share of tasks whose every tensor is
    reproducible), ``worst_*`` (maxima of ``max_ulp_repeat``, ``cross_device_max_ulp``,
    ``cross_context_max_ulp``, ``error_ratio``), ``share_within_tolerance`` (of the ``oracle_compared`` rows),
    ``nan_count`` (sum), ``errors`` (tasks with an error, skips excluded), ``skipped`` (tasks),
    ``declared_subject``, ``declared_chainer``, ``observed_tensors`` (rows not reproducible), ``finding`` and
    ``contract`` (the line the group was judged against).
    """
    out: list[dict[str, Any]] = []
    if len(results):
        # Plain lists and index arrays, not a pandas frame per group: the default report has ~110 groups, and
        # a dozen pandas operations on each cost a second (the same values, computed from the same rows).
        col = {c: results[c].tolist() for c in (
            "verdict", "key", "status", "case_id", "tensor", "bitwise_reproducible", "within_tolerance",
            "declared_nondeterministic", "chainer_declared", "max_ulp_repeat", "cross_device_max_ulp",
            "cross_context_max_ulp", "error_ratio", "nan_count", "error", "finding", "contract")}
        groups = results.groupby(_GROUP_KEYS, sort=True).indices
        for subject, device, context in sorted(groups):
            rows = sorted(groups[(subject, device, context)].tolist())
            first: dict[Any, int] = {}  # each task's first row (a task has a row per tensor)
            for i in rows:
                first.setdefault(col["key"][i], i)
            tasks = list(first.values())
            t = [i for i in rows if col["tensor"][i] != ""]
            per_task: dict[Any, bool] = {}
            for i in t:
                v = col["bitwise_reproducible"][i]
                per_task[col["key"][i]] = per_task.get(col["key"][i], True) and (not _na(v) and bool(v))
            rep = [bool(v) for v in (col["bitwise_reproducible"][i] for i in t) if not _na(v)]
            oracle = [bool(v) for v in (col["within_tolerance"][i] for i in t) if not _na(v)]
            decl = [bool(v) for v in (col["declared_nondeterministic"][i] for i in rows) if not _na(v)]
            chainer = sorted({w.strip() for i in rows for w in col["chainer_declared"][i].split(",") if w.strip()})
            ratios = [float(v) for v in (col["error_ratio"][i] for i in t) if not _na(v)]
            out.append({
                "subject": subject, "device": device, "context": context,
                "verdict": worst(col["verdict"][i] for i in rows),
                "cases_run": len({col["case_id"][i] for i in tasks if col["status"][i] != "skipped"}),
                "tasks": len(tasks), "tensors": len(t),
                "bitwise_share_tensors": float(np.mean(rep)) if rep else np.nan,
                "bitwise_share_tasks": float(np.mean(list(per_task.values()))) if per_task else np.nan,
                "worst_max_ulp_repeat": _max_of(col["max_ulp_repeat"][i] for i in t),
                "worst_cross_device_ulp": _max_of(col["cross_device_max_ulp"][i] for i in t),
                "worst_cross_context_ulp": _max_of(col["cross_context_max_ulp"][i] for i in t),
                "worst_error_ratio": max(ratios) if ratios else np.nan,
                "share_within_tolerance": float(np.mean(oracle)) if oracle else np.nan,
                "oracle_compared": len(oracle),
                "nan_count": int(sum(int(v) for v in (col["nan_count"][i] for i in t) if not _na(v))),
                "errors": sum(1 for i in tasks if col["error"][i] != "" and col["status"][i] != "skipped"),
                "skipped": sum(1 for i in tasks if col["status"][i] == "skipped"),
                "declared_subject": ("no declaration" if not decl else
                                     "nondeterministic" if any(decl) else "deterministic"),
                "declared_chainer": ", ".join(chainer),
                "observed_tensors": sum(1 for v in rep if not v),
                "finding": _group_finding(col["finding"][i] for i in t),
                "contract": next((c for c in (col["contract"][i] for i in rows) if c), ""),
            })
    df = pd.DataFrame(out, columns=list(SUMMARY_COLUMNS))
    for c in ("worst_max_ulp_repeat", "worst_cross_device_ulp", "worst_cross_context_ulp"):
        df[c] = _uint64(r[c] for r in out)
    for c in ("cases_run", "tasks", "tensors", "oracle_compared", "nan_count", "errors", "skipped",
              "observed_tensors"):
        df[c] = df[c].astype("int64")
    for c in ("bitwise_share_tensors", "bitwise_share_tasks", "worst_error_ratio", "share_within_tolerance"):
        df[c] = df[c].astype("float64")
    df.attrs.update(results.attrs)
    return df


# --------------------------------------------------------------------------- the verdict matrix


def cells_frame(measures: Sequence[Measure], tasks: Mapping[str, TaskRecord] | None = None) -> pd.DataFrame:
    """The verdict matrix: one row per subject x device x context x relation (:data:`CELL_COLUMNS`).

    ``verdict`` is the worst of the cell's measures; ``worst_ulp`` the greatest ULP distance of a bitwise
    measure that differed; ``error_ratio`` the greatest error / allowed against the oracle, with ``allowed``
    said there; ``reason`` why a cell was skipped or errored.
    """
    groups: dict[tuple[str, str, str, str], list[Measure]] = {}
    for m in measures:
        groups.setdefault((m.subject, m.device, m.context, m.relation), []).append(m)
    rows = []
    for (subject, device, context, relation), ms in sorted(groups.items()):
        role, _, _ = _subject_info(subject, "gpu" if device.startswith("gpu") else "cpu")
        diff = [m for m in ms if m.kind in _BITWISE_KINDS and is_difference(m)]  # never a run's error
        tensors = {(m.case_id, m.tensor) for m in ms if m.tensor}
        oracle = [m for m in ms if m.kind == "oracle" and m.error_ratio is not None]
        top = max(oracle, key=lambda m: m.error_ratio) if oracle else None
        reasons = sorted({m.detail for m in ms if m.kind == "task" and m.verdict in ("skipped", "error", "not judged")
                          and m.detail})
        ulps = [m.max_ulp for m in diff if m.max_ulp is not None]
        rows.append({
            "subject": subject, "role": role, "device": device, "context": context, "relation": relation,
            "verdict": worst(m.verdict for m in ms), "worst_ulp": max(ulps) if ulps else None,
            "tensors": len(tensors), "tensors_differing": len({(m.case_id, m.tensor) for m in diff}),
            "error_ratio": None if top is None else top.error_ratio, "allowed": "" if top is None else top.allowed,
            "contract": next((m.contract for m in ms if m.contract), ""), "reason": "; ".join(reasons)[:300],
        })
    df = pd.DataFrame(rows, columns=list(CELL_COLUMNS))
    df["worst_ulp"] = _uint64(r["worst_ulp"] for r in rows)
    df["error_ratio"] = pd.to_numeric(df["error_ratio"], errors="coerce").astype("float64")
    for c in ("tensors", "tensors_differing"):
        df[c] = df[c].astype("int64")
    return df


# --------------------------------------------------------------------------- findings


def findings_frame(found: Sequence[Any]) -> pd.DataFrame:
    """The findings (:class:`~harness.judge.findings.Finding`, most severe first) as a table
    (:data:`FINDING_COLUMNS`): every command is the finding's own."""
    from harness.judge.headlines import headline_of

    head = headline_of(found)  # the headline each finding is under (one cause, one headline)
    rows = []
    for f in found:
        m = f.worst
        if f.error:
            detail = f.error + (f" (raised in {f.where})" if f.where else "")
        elif m.kind == "task" and m.actual:
            detail = m.actual
        elif f.reason:
            detail = f.reason
        elif m.kind == "oracle" and m.error_ratio is not None:
            detail = f"error / allowed {m.error_ratio:.3g} in {m.tensor}: actual {m.actual}, oracle {m.expected} ({m.allowed})"
        elif m.tensor:
            ulp = "NaN vs non-NaN" if (m.max_ulp or 0) >= ULP_MAX else m.max_ulp
            detail = f"{f.n_tensors} tensor(s) differ, worst {m.tensor} {ulp} ULP at {m.max_ulp_index}: {m.actual} vs {m.expected}"
        else:
            detail = m.detail or m.actual
        rows.append({
            "id": f.id, "headline": head.get(f.id, ""), "classification": f.classification.value, "kind": f.kind, "verdict": f.verdict,
            "subject": f.subject, "subjects": ", ".join(f.subjects), "device": f.device, "context": f.context,
            "other": f.other, "relation": f.relation, "rule": f.rule, "tensor_kind": f.tensor_kind,
            "n_cases": len(f.cases), "tensors_differing": f.n_tensors, "worst_tensor": m.tensor,
            "worst_ulp": m.max_ulp if m.kind not in ("oracle", "task") else None,
            "worst_abs": _abs_diff(m), "worst_rel": m.max_rel, "error_ratio": m.error_ratio,
            "actual": m.actual, "expected": m.expected, "detail": detail, "case_id": f.case_id,
            "minimal_case": f.shrunk.case_id if f.shrunk is not None else "", "replay": f.replay(),
            "export": f.export(), "localize": f.localize(), "shrink": f.shrink(), "root_cause": f.cause, "role": f.role})
    df = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    df["worst_ulp"] = _uint64(r["worst_ulp"] for r in rows)
    for c in ("worst_abs", "worst_rel", "error_ratio"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    return df


def _abs_diff(m: Measure) -> float | None:
    """The absolute difference at the worst element, from the values the measure kept (``'1.5 (0x...)'``)."""
    if m.max_abs is not None:
        return m.max_abs
    try:
        return abs(float(str(m.actual).split()[0]) - float(str(m.expected).split()[0]))
    except (ValueError, IndexError):
        return None


def _atomic_write(path: str, data: str | bytes) -> str:
    """Write ``data`` to ``path`` atomically (see :mod:`harness.core.fileio`)."""
    from harness.core.fileio import atomic_write

    return atomic_write(path, data)


# --------------------------------------------------------------------------- plot inputs and the headline


def oracle_errors_frame(measures: Sequence[Measure], cases: Mapping[str, Case]) -> pd.DataFrame:
    """One row per oracle measure: ``subject, device, context, case_id, tensor, case_size, error_ratio,
    max_abs`` (what the error-against-size plot draws)."""
    rows = [{"subject": m.subject, "device": m.device, "context": m.context, "case_id": m.case_id,
             "tensor": m.tensor, "case_size": _case_size(cases.get(m.case_id)), "error_ratio": m.error_ratio,
             "max_abs": m.max_abs} for m in measures if m.kind == "oracle"]
    return pd.DataFrame(rows, columns=["subject", "device", "context", "case_id", "tensor", "case_size",
                                       "error_ratio", "max_abs"])


def divergence_frame(measures: Sequence[Measure]) -> pd.DataFrame:
    """Per subject x axis (repeat, process, context, device, relation): the worst ULP distance and the share of
    bit-identical comparisons (what the divergence heatmap draws)."""
    rows: dict[tuple[str, str], list[Measure]] = {}
    for m in measures:
        if m.kind in _BITWISE_KINDS and m.identical is not None:
            rows.setdefault((m.subject, m.kind), []).append(m)
    out = []
    for (subject, axis), ms in sorted(rows.items()):
        ulps = [m.max_ulp for m in ms if m.identical is False and m.max_ulp is not None]
        out.append({"subject": subject, "axis": axis, "worst_ulp": max(ulps) if ulps else 0,
                    "share_identical": sum(bool(m.identical) for m in ms) / len(ms), "compared": len(ms)})
    df = pd.DataFrame(out, columns=["subject", "axis", "worst_ulp", "share_identical", "compared"])
    df["worst_ulp"] = _uint64(r["worst_ulp"] for r in out)
    return df


# --------------------------------------------------------------------------- report files


def flatten_environment(env: Mapping[str, Any]) -> pd.DataFrame:
    """A nested environment dict as a two-column ``key`` / ``value`` frame (dotted keys)."""
    from harness.core.env import flatten_fingerprint

    items = [(k, v if isinstance(v, str) else json.dumps(v, default=str))
             for k, v in flatten_fingerprint(dict(env)).items()]
    return pd.DataFrame(items, columns=["key", "value"])




def write_report(run: Any, *, environment: Mapping[str, Any], found: Sequence[Any] = (),
                 frames: dict[str, Any] | None = None, meanwhile: Any = None,
                 figures: FigureServer | None = None) -> dict[str, str]:
    """Write the report files of a campaign (a :class:`~harness.execute.driver.CampaignRun`, in memory) into its
    directory, each atomically; returns {file name: path}.

    Files: ``results.csv.gz`` (and ``results.parquet`` where pyarrow is importable), ``summary.csv``,
    ``cells.csv`` (the verdict matrix), ``findings.csv`` and ``findings.json`` (``found``: the
    :class:`~harness.judge.findings.Finding` records), ``summary.md``, ``summary.html``, ``environment.json``,
    the plots. Everything comes from the run's records, measures and cases and the findings; nothing is read
    back or measured here. ``frames`` (a dict) receives the frames built. ``meanwhile`` (a callable) is the
    caller's own work on the directory (compressing its logs, pruning arrays), done here while the figures are
    drawn and before the page lists the directory's files, so the page links the files as they will stay.
    ``figures``: a :class:`~harness.outputs.drawing.FigureServer` started before the campaign, which draws the
    figures (:func:`start_figures`).
    """
    from harness.judge.findings import dumps

    campaign_dir, measures = run.directory, list(run.measures)
    cells = cells_frame(measures)
    # The figures (about a second of matplotlib) are drawn elsewhere while this process builds the tables (the
    # same bytes as drawn here).
    drawing = start_figures(cells, measures, run.cases, server=figures)
    results = results_frame(run)
    summary = summary_frame(results)
    findings = findings_frame(found)
    _atomic_write(os.path.join(campaign_dir, "findings.json"), dumps(list(found)))
    env_table = flatten_environment(environment)
    out: dict[str, str] = {}

    def put(name: str, data: str | bytes) -> None:
        out[name] = _atomic_write(os.path.join(campaign_dir, name), data)

    # One row per tensor (tens of thousands): stored gzip-compressed; pandas, DuckDB and R read it as it is.
    put("results.csv.gz", _gzip_csv(results))
    if importlib.util.find_spec("pyarrow") is not None:
        buf = io.BytesIO()
        results.to_parquet(buf, index=False)
        put("results.parquet", buf.getvalue())
    put("summary.csv", summary.to_csv(index=False))
    put("cells.csv", cells.to_csv(index=False))
    put("findings.csv", findings.to_csv(index=False))
    put("environment.json", json.dumps(dict(environment), indent=1, sort_keys=True, default=str) + "\n")
    from harness.outputs import render
    from harness.outputs.page_view import report_view, run_files

    if meanwhile is not None:
        meanwhile()
    figures = drawing()
    for name, data in figures:
        put(name, data)
    files = sorted({*run_files(campaign_dir), "summary.html", "summary.md"})
    view = report_view(os.path.abspath(campaign_dir), cells, list(found), figures, env_table, files=files)
    put("summary.md", render.summary_md(view))
    put("summary.html", render.summary_html(view))
    # the terminal's verdict: the page's gate line and verdict lines, word for word
    headline = [view.gate_line()[1], *(text for _, text in view.lines)]
    if frames is not None:  # what the caller prints at the end, without building the tables again
        frames.update(results=results, summary=summary, cells=cells, findings=findings, headline=headline,
                      found=list(found))
    return out


#: The report's figures, in the order the page shows them.
FIGURES = ("verdicts.png", "divergence.png", "error_vs_size.png")


def figure_jobs(cells: pd.DataFrame, measures: Sequence[Measure], cases: Mapping[str, Case]) -> list[Job]:
    """The report's figures as ``(file name, kind, arguments)`` (:data:`harness.outputs.drawing.DRAWERS`):
    their data frames, built here (a few milliseconds), so that whichever process draws them needs nothing
    else."""
    return [(FIGURES[0], "matrix", (cells,)),
            (FIGURES[1], "divergence", (divergence_frame(measures), cells)),
            (FIGURES[2], "error_ratio", (oracle_errors_frame(measures, cases),))]


def draw_figures(cells: pd.DataFrame, measures: Sequence[Measure], cases: Mapping[str, Case]
                 ) -> list[tuple[str, bytes]]:
    """The report's three figures, as ``(file name, PNG bytes)``."""
    from harness.outputs.drawing import draw_all

    return draw_all(figure_jobs(cells, measures, cases))


def start_figures(cells: pd.DataFrame, measures: Sequence[Measure], cases: Mapping[str, Case],
                  server: FigureServer | None = None) -> Callable[[], list[tuple[str, bytes]]]:
    """:func:`draw_figures` started elsewhere; the returned callable waits for them. With a running
    ``server`` (:class:`~harness.outputs.drawing.FigureServer`, started before the campaign), there. Else in
    children forked from here (:class:`~harness.core.forking.Forked`): one per figure where this process has
    imported matplotlib already (:func:`harness.outputs.render.preload`), so they draw at once, side by side;
    otherwise one for all three, as each would import matplotlib again. Wherever that fails, here."""
    from harness.outputs.drawing import draw_all, draw_forked
    from harness.outputs.figures import preloaded

    jobs = figure_jobs(cells, measures, cases)
    if server is not None and server.running:
        waiting = server.draw(jobs)
        return lambda: waiting() or draw_all(jobs)
    if not preloaded():
        child = Forked(lambda: draw_all(jobs)).start()
        return child.result
    # below this process's priority: the tables and the directory's tidying here are the longer path at a
    # report's size; the children take the cores that leaves (all, once it waits)
    return draw_forked(jobs, nice=BEHIND)


def _gzip_csv(df: pd.DataFrame) -> bytes:
    import gzip

    return gzip.compress(df.to_csv(index=False).encode("utf-8"), compresslevel=6, mtime=0)


def terminal_summary(summary: pd.DataFrame, headline: Sequence[str] = (), cells: pd.DataFrame | None = None) -> str:
    """The verdict in a few lines, then the verdict matrix (with ``cells``) or a compact table of
    :func:`summary_frame`."""
    if not len(summary):
        return "no tasks"
    if cells is not None:
        from harness.outputs.terminal import terminal_matrix

        legend = "= bit-identical  ≈ within tolerance  ≠ diverged as allowed  raises: expected error  – skipped"
        return "\n".join([*headline, "", terminal_matrix(cells), legend]).strip()
    cols = ["subject", "device", "context", "verdict", "cases_run", "bitwise_share_tensors", "worst_max_ulp_repeat",
            "worst_cross_context_ulp", "worst_error_ratio", "errors", "skipped"]
    shown = summary[cols].rename(columns={"cases_run": "cases", "bitwise_share_tensors": "bitwise",
                                          "worst_max_ulp_repeat": "max_ulp", "worst_cross_context_ulp": "ctx_ulp",
                                          "worst_error_ratio": "err/allowed"})
    # Groups where everything was skipped (a device that is not here) become one line per device.
    empty = (summary["verdict"] == "skipped")
    tail = []
    for dev, grp in summary[empty].groupby("device", sort=True):
        tail.append(f"{dev}: {len(grp)} subject x context groups, every run skipped "
                    f"({int(grp['skipped'].fillna(0).sum())} tasks); see results.csv.gz for the reason")
    shown = shown[~empty.to_numpy()]
    shown = shown.astype(object).where(shown.notna(), None)
    table = shown.to_markdown(index=False, tablefmt="simple", floatfmt=".3g", missingval="-") if len(shown) else ""
    return "\n".join([*headline, "", table, *tail]).strip()
