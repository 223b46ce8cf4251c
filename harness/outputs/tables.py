"""The report's tables beside the results: per group, per cell, per finding, and what the figures draw.

Built from the results table (:mod:`harness.outputs.results_table`) or the campaign's measures, in memory;
nothing here loads an array or judges anything:

- :func:`summary_frame`: per subject x device x context, with the worst ``verdict``;
- :func:`cells_frame`: the verdict matrix, per subject x device x context x relation;
- :func:`findings_frame`: one row per finding, with a ``replay`` command that reproduces it;
- :func:`oracle_errors_frame`, :func:`divergence_frame`: what the plots draw.

``finding`` (group level) is the most telling declared-versus-observed class of the group's rows
(:mod:`harness.outputs.results_table`); ``verdict`` says whether the contract holds.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from harness.core.cases import Case
from harness.core.records import Measure, TaskRecord
from harness.judge.outcomes import BITWISE_KINDS, is_difference
from harness.judge.ulp import ULP_MAX
from harness.judge.verdicts import worst
from harness.outputs.results_table import (
    DECLARED_AND_OBSERVED,
    DECLARED_NOT_OBSERVED,
    NO_DATA,
    OBSERVED_NOT_DECLARED,
    REPRODUCIBLE,
    case_size,
    subject_info,
    uint64_column,
)

__all__ = ["SUMMARY_COLUMNS", "FINDING_COLUMNS", "CELL_COLUMNS", "summary_frame", "findings_frame", "cells_frame",
           "oracle_errors_frame", "divergence_frame"]


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


_GROUP_ORDER = (OBSERVED_NOT_DECLARED, DECLARED_AND_OBSERVED, DECLARED_NOT_OBSERVED, REPRODUCIBLE)

_GROUP_KEYS = ["subject", "device", "context"]
_BITWISE_KINDS = tuple(sorted(BITWISE_KINDS))


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
        df[c] = uint64_column(r[c] for r in out)
    for c in ("cases_run", "tasks", "tensors", "oracle_compared", "nan_count", "errors", "skipped",
              "observed_tensors"):
        df[c] = df[c].astype("int64")
    for c in ("bitwise_share_tensors", "bitwise_share_tasks", "worst_error_ratio", "share_within_tolerance"):
        df[c] = df[c].astype("float64")
    df.attrs.update(results.attrs)
    return df


# --------------------------------------------------------------------------- the verdict matrix


#: The verdicts of a check that did not run: a cell with one says why (the measures' own reasons).
_UNRUN = ("skipped", "not judged")


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
        role, _, _ = subject_info(subject, "gpu" if device.startswith("gpu") else "cpu")
        diff = [m for m in ms if m.kind in _BITWISE_KINDS and is_difference(m)]  # never a run's error
        tensors = {(m.case_id, m.tensor) for m in ms if m.tensor}
        oracle = [m for m in ms if m.kind == "oracle" and m.error_ratio is not None]
        top = max(oracle, key=lambda m: m.error_ratio or 0.0) if oracle else None  # (None filtered out above)
        # why the cell was not run or not judged (every such measure says why), or why a task errored
        reasons = sorted({m.detail for m in ms if m.detail and (m.verdict in _UNRUN
                                                                or (m.kind == "task" and m.verdict == "error"))})
        ulps = [m.max_ulp for m in diff if m.max_ulp is not None]
        rows.append({
            "subject": subject, "role": role, "device": device, "context": context, "relation": relation,
            "verdict": worst(m.verdict for m in ms), "worst_ulp": max(ulps) if ulps else None,
            "tensors": len(tensors), "tensors_differing": len({(m.case_id, m.tensor) for m in diff}),
            "error_ratio": None if top is None else top.error_ratio, "allowed": "" if top is None else top.allowed,
            "contract": next((m.contract for m in ms if m.contract), ""), "reason": "; ".join(reasons)[:300],
        })
    df = pd.DataFrame(rows, columns=list(CELL_COLUMNS))
    df["worst_ulp"] = uint64_column(r["worst_ulp"] for r in rows)
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
            detail = (f"error / allowed {m.error_ratio:.3g} in {m.tensor}: actual {m.actual}, oracle {m.expected} "
                      f"({m.allowed})")
        elif m.tensor:
            ulp = "NaN vs non-NaN" if (m.max_ulp or 0) >= ULP_MAX else m.max_ulp
            detail = (f"{f.n_tensors} tensor(s) differ, worst {m.tensor} {ulp} ULP at {m.max_ulp_index}: {m.actual} "
                      f"vs {m.expected}")
        else:
            detail = m.detail or m.actual
        rows.append({
            "id": f.id, "headline": head.get(f.id, ""), "classification": f.classification.value, "kind": f.kind.value,
            "verdict": f.verdict,
            "subject": f.subject, "subjects": ", ".join(f.subjects), "device": f.device, "context": f.context,
            "other": f.other, "relation": f.relation, "rule": f.rule, "tensor_kind": f.tensor_kind,
            "n_cases": len(f.cases), "tensors_differing": f.n_tensors, "worst_tensor": m.tensor,
            "worst_ulp": m.max_ulp if m.kind not in ("oracle", "task") else None,
            "worst_abs": _abs_diff(m), "worst_rel": m.max_rel, "error_ratio": m.error_ratio,
            "actual": m.actual, "expected": m.expected, "detail": detail, "case_id": f.case_id,
            "minimal_case": f.shrunk.case_id if f.shrunk is not None else "", "replay": f.replay(),
            "export": "\n".join(f.exports()), "localize": f.localize(), "shrink": f.shrink(), "root_cause": f.cause,
            "role": f.role})
    df = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    df["worst_ulp"] = uint64_column(r["worst_ulp"] for r in rows)
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


# --------------------------------------------------------------------------- plot inputs and the headline


def oracle_errors_frame(measures: Sequence[Measure], cases: Mapping[str, Case]) -> pd.DataFrame:
    """One row per oracle measure: ``subject, device, context, case_id, tensor, case_size, error_ratio,
    max_abs`` (what the error-against-size plot draws)."""
    rows = [{"subject": m.subject, "device": m.device, "context": m.context, "case_id": m.case_id,
             "tensor": m.tensor, "case_size": case_size(cases.get(m.case_id)), "error_ratio": m.error_ratio,
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
    df["worst_ulp"] = uint64_column(r["worst_ulp"] for r in out)
    return df
