"""The report tables: a campaign directory in, pandas frames, plots and report files out.

Data flows one way: ``tasks.jsonl`` and ``arrays/*.npz`` (written by :mod:`harness.execute.campaign`)
become :func:`results_frame`, one row per case x subject x device x context x tensor. Every
other table is computed *only* from that frame, so each number in ``summary.csv``,
``findings.csv``, ``summary.md`` and ``summary.html`` can be traced back to rows of
``results.csv``:

- :func:`summary_frame`: per subject x device x context, with a ``finding`` class;
- :func:`findings_frame`: one row per divergence or error group, with a ``replay`` command;
- :func:`plot_ulp_distribution`, :func:`plot_error_vs_size`: PNG plots (Agg, no pyplot);
- :func:`write_report`: all of the above written atomically into the campaign directory;
- :func:`terminal_summary`: a compact text table for the end of a run.

Finding classes (row level in ``results.finding``, group level in ``summary.finding``):

- ``"observed but not declared"``: a tensor is not bitwise reproducible across repetitions,
  and neither the subject's declaration for the device kind (``Declared.deterministic is
  False``) nor Chainer's own ``chainer.utils.nondeterministic`` warnings announced it. The
  most important finding.
- ``"declared and observed"``: not reproducible, and announced by one of the two.
- ``"declared, not observed"``: announced, but every repetition was bit-identical.
- ``"reproducible"``: not announced and bit-identical.
- ``"no data"`` (summary only): the group produced no tensor (every task errored or skipped).

A group gets the first class, in that order, that any of its rows has.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import shlex
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from harness.judge import bitwise as compare
from harness.core.cases import Case, build_arrays, load_corpus
from harness.core.errors import HarnessError
from harness.execute.campaign import load_arrays, load_tasks

__all__ = [
    "RESULT_COLUMNS", "SUMMARY_COLUMNS", "FINDING_COLUMNS", "REFERENCE_DEVICE", "REFERENCE_CONTEXT",
    "results_frame", "summary_frame", "findings_frame", "plot_ulp_distribution", "plot_error_vs_size",
    "write_report", "terminal_summary", "flatten_environment", "replay_command", "oracle_n_terms",
]

#: Cross-device measures compare every GPU row with the same case/subject/context/tensor here.
REFERENCE_DEVICE = "cpu"
#: Cross-context measures compare every row with the same case/subject/device/tensor here.
REFERENCE_CONTEXT = "default"

#: The columns of :func:`results_frame`, in order: the documented ones, then extras.
RESULT_COLUMNS: tuple[str, ...] = (
    "case_id", "family", "subject", "device", "context", "tensor", "dtype", "shape", "repeats",
    "bitwise_reproducible", "n_diff", "frac_diff", "max_ulp_repeat", "first_diff_index", "digest",
    "n_unique", "cross_device_max_ulp", "cross_device_identical", "cross_context_max_ulp",
    "cross_context_identical", "oracle_max_abs", "oracle_max_rel", "oracle_max_ulp", "within_tolerance",
    "tolerance", "nan_count", "inf_count", "oracle_nan_count", "declared_nondeterministic",
    "chainer_declared", "observed_nondeterministic", "status", "error", "bad_input", "case_size",
    # extras
    "finding", "n_total", "cross_device_n_diff", "cross_context_n_diff", "oracle_n_mismatch",
    "declared_reason", "device_kind", "error_type", "error_phase", "error_message", "error_expected",
    "expectation", "skip_reason", "runs", "ok_runs", "key", "array_file",
)

_STR = ("case_id", "family", "subject", "device", "context", "tensor", "dtype", "shape",
        "first_diff_index", "digest", "tolerance", "chainer_declared", "status", "error", "finding",
        "declared_reason", "device_kind", "error_type", "error_phase", "error_message", "expectation",
        "skip_reason", "key", "array_file")
_INT = ("repeats", "n_diff", "n_unique", "nan_count", "inf_count", "oracle_nan_count", "case_size",
        "n_total", "cross_device_n_diff", "cross_context_n_diff", "oracle_n_mismatch", "runs", "ok_runs")
_UINT = ("max_ulp_repeat", "cross_device_max_ulp", "cross_context_max_ulp", "oracle_max_ulp")
_FLOAT = ("frac_diff", "oracle_max_abs", "oracle_max_rel")
_BOOL = ("bitwise_reproducible", "cross_device_identical", "cross_context_identical", "within_tolerance",
         "declared_nondeterministic", "observed_nondeterministic", "bad_input", "error_expected")

#: The columns of :func:`summary_frame`, in order.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "subject", "device", "context", "cases_run", "tasks", "tensors", "bitwise_share_tensors",
    "bitwise_share_tasks", "worst_max_ulp_repeat", "worst_cross_device_ulp", "worst_cross_context_ulp",
    "worst_oracle_max_rel", "share_within_tolerance", "oracle_compared", "nan_count", "errors", "skipped",
    "declared_subject", "declared_chainer", "observed_tensors", "finding",
)

#: The columns of :func:`findings_frame`, in order.
FINDING_COLUMNS: tuple[str, ...] = (
    "kind", "subject", "device", "context", "case_id", "tensor", "count", "detail", "replay", "root_cause",
)

OBSERVED_NOT_DECLARED = "observed but not declared"
DECLARED_AND_OBSERVED = "declared and observed"
DECLARED_NOT_OBSERVED = "declared, not observed"
REPRODUCIBLE = "reproducible"
NO_DATA = "no data"
_GROUP_ORDER = (OBSERVED_NOT_DECLARED, DECLARED_AND_OBSERVED, DECLARED_NOT_OBSERVED, REPRODUCIBLE)

#: Finding kinds, most important first (the sort order of :func:`findings_frame`).
FINDING_KINDS: tuple[str, ...] = (
    OBSERVED_NOT_DECLARED, "beyond oracle tolerance", "error", "cross-device difference",
    "cross-context difference", DECLARED_AND_OBSERVED, "expected error",
)

_GROUP_KEYS = ["subject", "device", "context"]


# --------------------------------------------------------------------------- small helpers


def _index_text(index: Any) -> str:
    if index is None:
        return ""
    return str(tuple(int(i) for i in index))


def _error_text(err: Mapping[str, Any]) -> str:
    return f"{err.get('type', '')} in {err.get('phase', '')}: {err.get('message', '')}"


def _device_kind(device: str) -> str:
    return "cpu" if device == "cpu" else "gpu" if device.startswith(("gpu", "cuda", "@cupy")) else device


def _npz_key(tensor: str) -> str:
    # the runner stores arrays with "/" replaced by "_" (npz member names are paths)
    return tensor.replace("/", "_")


def _is_oracle(subject: str, family: str) -> bool:
    from harness.subjects.registry import ORACLE_FOR_FAMILY

    from harness.subjects.registry import SUBJECTS

    return subject == ORACLE_FOR_FAMILY.get(family) or (subject in SUBJECTS and SUBJECTS[subject].role == "oracle")


def _declaration(subject: str, device_kind: str) -> tuple[bool | None, str]:
    """(declared nondeterministic?, reason): None where the subject is unknown or declares nothing."""
    from harness.subjects.registry import SUBJECTS

    subj = SUBJECTS.get(subject)
    if subj is None:
        return None, "subject not registered in this process"
    d = subj.declared_for(device_kind)
    return (None if d.deterministic is None else not d.deterministic), d.reason


def _expected_errors(expect: Mapping[str, Any] | None, subject: str, device_kind: str) -> set[str] | None:
    """The error class names a bad case expects of ``subject`` on ``device_kind`` (None: no raise expected)."""
    if expect is None:
        return None
    subs = expect.get("subjects")
    if subs is not None and subject not in subs:
        return None
    devs = expect.get("devices")
    if devs is not None and device_kind not in devs:
        return None
    kind = expect.get("kind")
    if kind == "raises":
        return set(expect.get("errors", ()))
    if kind == "either":
        out: set[str] = set()
        for sub in expect.get("of", ()):
            out |= _expected_errors(sub, subject, device_kind) or set()
        return out or None
    return None


def _expectation_text(expect: Mapping[str, Any] | None) -> str:
    if expect is None:
        return ""
    kind = str(expect.get("kind", ""))
    if kind == "raises":
        return f"raises {', '.join(expect.get('errors', ()))}"
    if kind == "either":
        return "either: " + "; ".join(_expectation_text(e) for e in expect.get("of", ()))
    return kind


def oracle_n_terms(case: Case | None, tensor: str) -> int:
    """How many terms are summed into one element of ``tensor``, for :func:`compare.gradient_tolerance`.

    Forward outputs and double-backward results are 1. An embedding's ``grad.W`` row adds one
    upstream row per occurrence of its id: the largest id count of the case's ``x``. Every other
    LSTM / pipeline gradient adds one term per time step and batch row: ``sum(lengths)``. 1
    where the case is unknown or its arrays cannot be rebuilt.
    """
    if case is None or not tensor.startswith("grad.") or tensor.startswith("grad2."):
        return 1
    spec = case.spec
    if tensor == "grad.W" and case.family in ("embed", "pipeline"):
        try:
            x = np.asarray(build_arrays(case)["x"]).reshape(-1)
            il = spec.get("ignore_label")
            if il is not None:
                x = x[x != il]
            x = x[(x >= 0) & (x < int(spec["vocab"]))].astype(np.int64)
            return max(int(np.bincount(x).max()) if x.size else 1, 1)
        except (HarnessError, KeyError, TypeError, ValueError):
            return 1
    if case.family in ("lstm", "pipeline"):
        try:
            return max(int(sum(int(n) for n in spec["lengths"])), 1)
        except (KeyError, TypeError, ValueError):
            return 1
    return 1


def _case_size(case: Case | None) -> int | None:
    if case is None:
        return None
    try:
        return int(case.size())
    except Exception:  # noqa: BLE001 - a bad case's spec may not have a size
        return None


class _ArrayCache:
    """Repetition-0 arrays of each task, loaded at most once per file."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._cache: dict[str, dict[str, np.ndarray]] = {}

    def get(self, fname: str | None) -> dict[str, np.ndarray]:
        if not fname:
            return {}
        if fname not in self._cache:
            try:
                self._cache[fname] = load_arrays(self.directory, fname)
            except (OSError, ValueError):
                self._cache[fname] = {}  # a missing or torn file: no array measures for that task
        return self._cache[fname]

    def tensor(self, rec: Mapping[str, Any] | None, tensor: str) -> np.ndarray | None:
        if rec is None:
            return None
        return self.get(rec.get("array_file")).get(_npz_key(tensor))

    @property
    def loaded(self) -> int:
        return len(self._cache)


def _load_cases(directory: str) -> dict[str, Case]:
    path = os.path.join(directory, "corpus.jsonl")
    if not os.path.exists(path):
        return {}
    return {c.id: c for c in load_corpus(path)}


def _typed(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    for c in _STR:
        df[c] = df[c].fillna("").astype(str) if len(df) else df[c].astype(str)
    for c in _INT:
        df[c] = pd.array(df[c].tolist(), dtype="Int64")
    for c in _UINT:
        df[c] = pd.array(df[c].tolist(), dtype="UInt64")
    for c in _FLOAT:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    for c in _BOOL:
        df[c] = pd.array(df[c].tolist(), dtype="boolean")
    return df


# --------------------------------------------------------------------------- results


def _row_finding(observed: bool | None, declared: bool) -> str:
    if observed is None:
        return ""
    if observed:
        return DECLARED_AND_OBSERVED if declared else OBSERVED_NOT_DECLARED
    return DECLARED_NOT_OBSERVED if declared else REPRODUCIBLE


def _rounding_bound(case: Any, name: str, dtype: str, cache: dict[tuple[str, str], dict[str, Any]]) -> Any:
    """The oracle's a-priori summation bound for one tensor (None where it has none)."""
    if case is None:
        return None
    key = (case.id, dtype)
    if key not in cache:
        from harness.core.cases import build_arrays
        from harness.subjects.oracle import rounding_bounds

        try:
            cache[key] = rounding_bounds(case.family, case.spec, build_arrays(case), dtype)
        except Exception:  # noqa: BLE001 - a bad case simply has no bound
            cache[key] = {}
    return cache[key].get(name)


def results_frame(campaign_dir: str) -> pd.DataFrame:
    """One row per case x subject x device x context x tensor of a campaign directory.

    A task that produced no tensors (error, skip, crash, timeout) gets one row with
    ``tensor == ""`` and ``error`` filled (``"Type in phase: message"`` or
    ``"skipped: reason"``); a partial task's tensor rows carry its error too. Columns are
    :data:`RESULT_COLUMNS`: the repetition measures from the task record, then cross-device
    (against :data:`REFERENCE_DEVICE`), cross-context (against :data:`REFERENCE_CONTEXT`) and
    oracle measures from the repetition-0 arrays (each ``.npz`` loaded once), the
    declarations, and the case's size and expectation from ``corpus.jsonl``. Missing
    measures are ``<NA>`` / NaN / ``""``. ``frame.attrs["campaign_dir"]`` holds the directory.
    """
    from harness.subjects.registry import ORACLE_FOR_FAMILY

    tasks = load_tasks(campaign_dir)
    cases = _load_cases(campaign_dir)
    arrays = _ArrayCache(campaign_dir)
    by_key = {(r["case_id"], r["subject"], r["device"], r["context"]): r for r in tasks.values()}
    n_terms_cache: dict[tuple[str, str], int] = {}
    bound_cache: dict[tuple[str, str], dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    for rec in sorted(tasks.values(), key=lambda r: (r["subject"], r["device"], r["context"], r["case_id"])):
        case_id, family, subject = rec["case_id"], rec.get("family", ""), rec["subject"]
        device, context = rec["device"], rec["context"]
        kind = _device_kind(device)
        case = cases.get(case_id)
        declared, reason = _declaration(subject, kind)
        chainer = ", ".join(rec.get("declared_warnings") or ())
        is_declared = bool(declared) or bool(chainer)
        errors = rec.get("errors") or []
        status = rec.get("status", "")
        first = errors[0] if errors else None
        if status == "skipped":
            error = f"skipped: {rec.get('skip_reason') or ''}"
        else:
            error = _error_text(first) if first else ""
        allowed = _expected_errors(case.expect if case is not None else None, subject, kind)
        base: dict[str, Any] = {
            "case_id": case_id, "family": family, "subject": subject, "device": device, "context": context,
            "status": status, "error": error, "bad_input": bool(rec.get("bad_input", False)),
            "case_size": _case_size(case), "declared_nondeterministic": declared, "chainer_declared": chainer,
            "declared_reason": reason, "device_kind": kind,
            "error_type": first.get("type", "") if first else "",
            "error_phase": first.get("phase", "") if first else "",
            "error_message": first.get("message", "") if first else "",
            "error_expected": (None if first is None else
                               bool(allowed is not None and first.get("type", "") in allowed)),
            "expectation": _expectation_text(case.expect if case is not None else None),
            "skip_reason": rec.get("skip_reason") or "", "runs": rec.get("runs"), "ok_runs": rec.get("ok_runs"),
            "key": rec.get("key", ""), "array_file": rec.get("array_file") or "",
        }
        tensors: Mapping[str, Mapping[str, Any]] = rec.get("tensors") or {}
        if not tensors:
            rows.append({**base, "tensor": "", "finding": ""})
            continue
        oracle_name = ORACLE_FOR_FAMILY.get(family)
        oracle_rec = None if _is_oracle(subject, family) else by_key.get(
            (case_id, oracle_name, REFERENCE_DEVICE, REFERENCE_CONTEXT))
        dev_rec = by_key.get((case_id, subject, REFERENCE_DEVICE, context)) if kind != REFERENCE_DEVICE else None
        ctx_rec = by_key.get((case_id, subject, device, REFERENCE_CONTEXT)) if context != REFERENCE_CONTEXT else None
        for name, t in tensors.items():
            bitwise = t.get("bitwise_identical")
            observed = None if bitwise is None else not bool(bitwise)
            row = {**base, "tensor": name, "dtype": t.get("dtype", ""),
                   "shape": str(tuple(int(n) for n in t.get("shape", ()))), "repeats": t.get("repeats"),
                   "bitwise_reproducible": bitwise, "n_diff": t.get("n_diff"), "frac_diff": t.get("frac_diff"),
                   "max_ulp_repeat": t.get("max_ulp"), "first_diff_index": _index_text(t.get("first_diff_index")),
                   "digest": t.get("digest") or "", "n_unique": t.get("n_unique"),
                   "nan_count": t.get("nan_count"), "inf_count": t.get("inf_count"), "n_total": t.get("n_total"),
                   "observed_nondeterministic": observed, "finding": _row_finding(observed, is_declared)}
            mine = None
            for prefix, other in (("cross_device", dev_rec), ("cross_context", ctx_rec)):
                ref = arrays.tensor(other, name)
                if ref is None:
                    continue
                mine = arrays.tensor(rec, name) if mine is None else mine
                if mine is None:
                    continue
                c = compare.compare_pair(name, mine, ref)
                row[f"{prefix}_max_ulp"] = int(c.max_ulp)
                row[f"{prefix}_identical"] = bool(c.bitwise_identical)
                row[f"{prefix}_n_diff"] = int(c.n_diff)
            expected = arrays.tensor(oracle_rec, name)
            if expected is not None:
                mine = arrays.tensor(rec, name) if mine is None else mine
            if expected is not None and mine is not None:
                key = (case_id, name)
                if key not in n_terms_cache:
                    n_terms_cache[key] = oracle_n_terms(case, name)
                try:
                    atol, rtol, source = compare.gradient_tolerance(mine.dtype, n_terms_cache[key])
                    bound = _rounding_bound(case, name, mine.dtype.name, bound_cache)
                    e = compare.compare_oracle(name, mine, expected, atol=atol, rtol=rtol, source=source,
                                               bound=bound, normwise=name.startswith("grad"), text=False)
                except (TypeError, ValueError):
                    e = None  # a dtype with no tolerance or no oracle comparison (strings, complex)
                if e is not None:
                    row.update(oracle_max_abs=e.max_abs, oracle_max_rel=e.max_rel, oracle_max_ulp=int(e.max_ulp),
                               within_tolerance=bool(e.within_tolerance), oracle_nan_count=e.oracle_nan_count,
                               oracle_n_mismatch=e.n_mismatch,
                               tolerance=f"atol={e.atol:g}, rtol={e.rtol:g} ({e.tolerance_source})")
            rows.append(row)
    df = _typed(rows)
    df.attrs["campaign_dir"] = os.path.abspath(campaign_dir)
    df.attrs["arrays_loaded"] = arrays.loaded
    return df


# --------------------------------------------------------------------------- summary


def _max_or_na(s: pd.Series) -> Any:
    s = s.dropna()
    return s.max() if len(s) else pd.NA


def _group_finding(findings: Iterable[str]) -> str:
    present = set(findings)
    for f in _GROUP_ORDER:
        if f in present:
            return f
    return NO_DATA


def summary_frame(results: pd.DataFrame) -> pd.DataFrame:
    """Per subject x device x context, computed only from ``results`` (see the module docstring).

    Columns (:data:`SUMMARY_COLUMNS`): ``cases_run`` (distinct cases of tasks not skipped),
    ``tasks``, ``tensors`` (tensor rows), ``bitwise_share_tensors`` (mean of
    ``bitwise_reproducible`` over tensor rows), ``bitwise_share_tasks`` (share of tasks with
    tensors whose every tensor is reproducible), ``worst_*`` (maxima of ``max_ulp_repeat``,
    ``cross_device_max_ulp``, ``cross_context_max_ulp``, ``oracle_max_rel``),
    ``share_within_tolerance`` (of the ``oracle_compared`` rows that have an oracle measure),
    ``nan_count`` (sum), ``errors`` (tasks with an error, skips excluded), ``skipped`` (tasks),
    ``declared_subject`` (the subject's declaration), ``declared_chainer`` (Chainer's warnings
    seen in any task), ``observed_tensors`` (rows not reproducible) and ``finding``.
    """
    out: list[dict[str, Any]] = []
    if len(results):
        for (subject, device, context), g in results.groupby(_GROUP_KEYS, sort=True):
            tasks = g.drop_duplicates("key")
            t = g[g["tensor"] != ""]
            per_task = t.groupby("key")["bitwise_reproducible"].agg(lambda s: bool(s.fillna(False).all()))
            oracle = t["within_tolerance"].dropna()
            decl = g["declared_nondeterministic"].dropna()
            chainer = sorted({w.strip() for v in g["chainer_declared"] for w in v.split(",") if w.strip()})
            rep = t["bitwise_reproducible"].dropna()
            out.append({
                "subject": subject, "device": device, "context": context,
                "cases_run": int(tasks.loc[tasks["status"] != "skipped", "case_id"].nunique()),
                "tasks": int(len(tasks)), "tensors": int(len(t)),
                "bitwise_share_tensors": float(rep.astype(float).mean()) if len(rep) else np.nan,
                "bitwise_share_tasks": float(per_task.astype(float).mean()) if len(per_task) else np.nan,
                "worst_max_ulp_repeat": _max_or_na(t["max_ulp_repeat"]),
                "worst_cross_device_ulp": _max_or_na(t["cross_device_max_ulp"]),
                "worst_cross_context_ulp": _max_or_na(t["cross_context_max_ulp"]),
                "worst_oracle_max_rel": float(t["oracle_max_rel"].max()) if t["oracle_max_rel"].notna().any()
                else np.nan,
                "share_within_tolerance": float(oracle.astype(float).mean()) if len(oracle) else np.nan,
                "oracle_compared": int(len(oracle)),
                "nan_count": int(t["nan_count"].fillna(0).sum()),
                "errors": int(((tasks["error"] != "") & (tasks["status"] != "skipped")).sum()),
                "skipped": int((tasks["status"] == "skipped").sum()),
                "declared_subject": ("no declaration" if not len(decl) else
                                     "nondeterministic" if bool(decl.any()) else "deterministic"),
                "declared_chainer": ", ".join(chainer),
                "observed_tensors": int((~rep.astype(bool)).sum()),
                "finding": _group_finding(t["finding"]),
            })
    df = pd.DataFrame(out, columns=list(SUMMARY_COLUMNS))
    for c in ("worst_max_ulp_repeat", "worst_cross_device_ulp", "worst_cross_context_ulp"):
        df[c] = pd.array(df[c].tolist(), dtype="UInt64")
    for c in ("cases_run", "tasks", "tensors", "oracle_compared", "nan_count", "errors", "skipped",
              "observed_tensors"):
        df[c] = df[c].astype("int64")
    for c in ("bitwise_share_tensors", "bitwise_share_tasks", "worst_oracle_max_rel", "share_within_tolerance"):
        df[c] = df[c].astype("float64")
    df.attrs.update(results.attrs)
    return df


# --------------------------------------------------------------------------- findings


def replay_command(campaign_dir: str, case_id: str, subject: str, device: str, context: str) -> str:
    """The shell command that replays one task from its case file under ``<campaign_dir>/cases``."""
    path = os.path.join(campaign_dir, "cases", f"{case_id}.json")
    return shlex.join(["python", "-m", "harness", "replay", path, "--subject", subject,
                       "--device", device, "--context", context])


def _atomic_write(path: str, data: str | bytes) -> str:
    """Write ``data`` to ``path`` atomically (see :mod:`harness.core.fileio`)."""
    from harness.core.fileio import atomic_write

    return atomic_write(path, data)


def _fmt(v: Any) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return "n/a"
    if isinstance(v, (int, np.integer)) and int(v) == compare.ULP_MAX:
        return "NaN vs non-NaN"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.3g}"
    return str(v)


def _divergences(t: pd.DataFrame) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cols = ["subject", "device", "context", "case_id", "tensor"]
    for _, r in t[t["observed_nondeterministic"].fillna(False).astype(bool)].iterrows():
        out.append({**{c: r[c] for c in cols}, "kind": r["finding"], "count": 1,
                    "detail": f"max ULP {_fmt(r['max_ulp_repeat'])}, {_fmt(r['n_diff'])}/{_fmt(r['n_total'])} "
                              f"elements, {_fmt(r['n_unique'])} unique of {_fmt(r['repeats'])} repeats, first at "
                              f"{r['first_diff_index'] or 'n/a'}"
                              + (f"; Chainer declared: {r['chainer_declared']}" if r["chainer_declared"] else "")})
    for prefix, label, ref in (("cross_device", "cross-device difference", f"vs {REFERENCE_DEVICE}"),
                               ("cross_context", "cross-context difference", f"vs context {REFERENCE_CONTEXT}")):
        diff = t[t[f"{prefix}_identical"].notna() & ~t[f"{prefix}_identical"].fillna(True).astype(bool)]
        for _, r in diff.iterrows():
            out.append({**{c: r[c] for c in cols}, "kind": label, "count": 1,
                        "detail": f"max ULP {_fmt(r[f'{prefix}_max_ulp'])} {ref}, "
                                  f"{_fmt(r[f'{prefix}_n_diff'])}/{_fmt(r['n_total'])} elements"})
    beyond = t[t["within_tolerance"].notna() & ~t["within_tolerance"].fillna(True).astype(bool)]
    for _, r in beyond.iterrows():
        out.append({**{c: r[c] for c in cols}, "kind": "beyond oracle tolerance", "count": 1,
                    "detail": f"max rel {_fmt(r['oracle_max_rel'])}, max abs {_fmt(r['oracle_max_abs'])}, "
                              f"max ULP {_fmt(r['oracle_max_ulp'])}, {_fmt(r['oracle_n_mismatch'])}/"
                              f"{_fmt(r['n_total'])} elements beyond {r['tolerance']}"})
    return out


def _error_groups(results: pd.DataFrame) -> list[dict[str, Any]]:
    tasks = results.drop_duplicates("key")
    errs = tasks[(tasks["error"] != "") & (tasks["status"] != "skipped")].copy()
    if not len(errs):
        return []
    errs["_expected"] = errs["error_expected"].fillna(False).astype(bool)
    out: list[dict[str, Any]] = []
    keys = ["_expected", "subject", "error_type", "error_message"]
    for (expected, subject, etype, msg), g in errs.groupby(keys, sort=True):
        first = g.iloc[0]
        where = (f"{len(g)} task(s); cases {', '.join(sorted(set(g['case_id'])))}; devices "
                 f"{', '.join(sorted(set(g['device'])))}; contexts {', '.join(sorted(set(g['context'])))}")
        detail = f"{first['error']} [{where}]"
        if expected:
            detail += f"; the case expects: {first['expectation']}"
        out.append({"kind": "expected error" if expected else "error", "subject": subject,
                    "device": first["device"], "context": first["context"], "case_id": first["case_id"],
                    "tensor": "", "count": int(len(g)), "detail": detail})
    return out


def findings_frame(results: pd.DataFrame, campaign_dir: str | None = None, *,
                   root_cause: Callable[[pd.Series], str] | None = None,
                   write_cases: bool = True) -> pd.DataFrame:
    """Every divergence and error group of ``results``, most important first.

    Rows (:data:`FINDING_COLUMNS`): tensors not bitwise reproducible (kind = the row's
    ``finding``: ``"observed but not declared"`` or ``"declared and observed"``), cross-device
    and cross-context differences, results beyond the oracle tolerance, and tasks with errors
    grouped by subject, exception type and message (``count`` tasks; ``"expected error"`` where
    the bad case expects that exception). Sorted by :data:`FINDING_KINDS`, then subject, device,
    context, case and tensor. ``replay`` is a ``python -m harness replay`` command; with
    ``write_cases`` each finding's case is written to ``<campaign_dir>/cases/<case_id>.json``
    (from ``corpus.jsonl``) so it runs. ``campaign_dir`` defaults to
    ``results.attrs["campaign_dir"]``. ``root_cause(row)`` fills the ``root_cause`` column
    (empty without it; an exception it raises is recorded there, not raised).
    """
    campaign_dir = campaign_dir or results.attrs.get("campaign_dir", ".")
    rows: list[dict[str, Any]] = []
    if len(results):
        rows = _divergences(results[results["tensor"] != ""]) + _error_groups(results)
    df = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    if not len(df):
        df["count"] = df["count"].astype("int64")
        return df
    rank = {k: i for i, k in enumerate(FINDING_KINDS)}
    df["_rank"] = df["kind"].map(rank).fillna(len(rank))
    df = df.sort_values(["_rank", "subject", "device", "context", "case_id", "tensor"], kind="stable")
    df = df.drop(columns="_rank").reset_index(drop=True)
    df["count"] = df["count"].astype("int64")
    df["replay"] = [replay_command(campaign_dir, r.case_id, r.subject, r.device, r.context)
                    for r in df.itertuples()]
    if write_cases:
        cases = _load_cases(campaign_dir)
        for cid in sorted(set(df["case_id"])):
            if cid in cases:
                _atomic_write(os.path.join(campaign_dir, "cases", f"{cid}.json"), cases[cid].to_json() + "\n")
    df["root_cause"] = [_call_root_cause(root_cause, r) for _, r in df.iterrows()]
    df.attrs.update(results.attrs)
    return df


def _call_root_cause(fn: Callable[[pd.Series], str] | None, row: pd.Series) -> str:
    if fn is None:
        return ""
    try:
        return str(fn(row) or "")
    except Exception as exc:  # noqa: BLE001 - a failing localizer must not lose the report
        return f"root cause failed: {type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- plots


def _figure(width: float = 8.0, height: float = 4.5) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return _atomic_write(path, buf.getvalue())


def _note(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")


def plot_ulp_distribution(results: pd.DataFrame, path: str) -> str:
    """Box and jittered strip of ``log10(1 + max_ulp_repeat)`` per subject x device; PNG at ``path``.

    ULP_MAX (NaN against a number) is drawn at ``log10(2**64)``. With no tensor rows an empty
    axis says so. Returns ``path``.
    """
    fig = _figure(max(6.0, 0.9 * results["subject"].nunique() * max(results["device"].nunique(), 1) + 2), 4.5)
    ax = fig.add_subplot(1, 1, 1)
    t = results[(results["tensor"] != "") & results["max_ulp_repeat"].notna()] if len(results) else results
    ax.set_ylabel("log10(1 + max ULP across repeats)")
    ax.set_title("Run-to-run ULP divergence per tensor")
    if not len(t):
        _note(ax, "no tensors were compared")
        ax.set_xticks([])
        return _save(fig, path)
    groups = list(t.groupby(["subject", "device"], sort=True))
    rng = np.random.default_rng(0)  # fixed jitter: the same results draw the same picture
    data = []
    for i, (_, g) in enumerate(groups):
        y = np.log10(1.0 + g["max_ulp_repeat"].astype("float64").to_numpy())
        data.append(y)
        ax.scatter(i + rng.uniform(-0.15, 0.15, y.size), y, s=12, alpha=0.6,
                   c=np.where(g["bitwise_reproducible"].fillna(True).astype(bool), "tab:blue", "tab:red"))
    ax.boxplot(data, positions=list(range(len(groups))), widths=0.5, showfliers=False)
    ax.set_xticks(list(range(len(groups))))
    ax.set_xticklabels([f"{s}\n{d}" for (s, d), _ in groups], rotation=30, ha="right", fontsize=8)
    ax.set_ylim(bottom=-0.2)
    fig.tight_layout()
    return _save(fig, path)


def plot_error_vs_size(results: pd.DataFrame, path: str) -> str:
    """Log-log scatter of ``oracle_max_rel`` against ``case_size``, one colour per family; PNG at ``path``.

    Exact results (relative error 0) are drawn at 1e-18 and infinite ones are counted in the
    legend; with no oracle measure an empty axis says so. Returns ``path``.
    """
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xlabel("case size (elements)")
    ax.set_ylabel("max relative error against the float64 oracle")
    ax.set_title("Oracle error against input size")
    t = results[results["oracle_max_rel"].notna() & results["case_size"].notna()] if len(results) else results
    if not len(t):
        _note(ax, "no results were compared with an oracle")
        return _save(fig, path)
    floor = 1e-18
    ax.set_xscale("log")
    ax.set_yscale("log")
    for i, (family, g) in enumerate(t.groupby("family", sort=True)):
        rel = g["oracle_max_rel"].to_numpy(dtype="float64")
        size = g["case_size"].astype("float64").to_numpy()
        fin = np.isfinite(rel)
        label = f"{family} ({int((~fin).sum())} infinite, not drawn)" if (~fin).any() else str(family)
        ax.scatter(np.maximum(size[fin], 1.0), np.maximum(rel[fin], floor), s=14, alpha=0.7,
                   color=f"C{i}", label=label)
    ax.axhline(floor, color="0.8", lw=0.8, ls=":")
    ax.legend(fontsize=8, title="family (exact = 1e-18)", title_fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------- report files


def flatten_environment(env: Mapping[str, Any]) -> pd.DataFrame:
    """A nested environment dict as a two-column ``key`` / ``value`` frame (dotted keys)."""
    from harness.core.env import flatten_fingerprint

    items = [(k, v if isinstance(v, str) else json.dumps(v, default=str))
             for k, v in flatten_fingerprint(dict(env)).items()]
    return pd.DataFrame(items, columns=["key", "value"])


def _markdown(df: pd.DataFrame) -> str:
    if not len(df):
        return "_none_"
    shown = df.copy()
    for c in shown.columns:
        if pd.api.types.is_string_dtype(shown[c]):
            shown[c] = shown[c].astype(str).str.replace("|", "\\|", regex=False).str.replace("\n", " ")
    shown = shown.astype(object).where(shown.notna(), None)
    return shown.to_markdown(index=False, floatfmt=".3g", missingval="")


def _html(df: pd.DataFrame, highlight: str | None = None) -> str:
    if not len(df):
        return "<p><em>none</em></p>"
    floats = [c for c in df.columns if pd.api.types.is_float_dtype(df[c])]
    sty = df.style.hide(axis="index").format(na_rep="", escape="html")
    if floats:
        sty = sty.format(subset=floats, formatter="{:.3g}", na_rep="")
    if highlight is not None and highlight in df.columns:
        colors = {OBSERVED_NOT_DECLARED: "background-color: #f8d0d0", "beyond oracle tolerance": "background-color: #f8e0c0",
                  "error": "background-color: #f8e0c0"}
        sty = sty.map(lambda v: colors.get(v, ""), subset=[highlight])
    return sty.to_html(table_attributes='class="report"')


_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
body { font-family: sans-serif; margin: 1.5em; }
table.report { border-collapse: collapse; font-size: 12px; margin-bottom: 1.5em; }
table.report th, table.report td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; }
table.report th { background: #eee; }
img { max-width: 100%; }
</style></head><body>
<h1>{{ title }}</h1>
<p>Every number is computed from <code>results.csv</code> ({{ n_rows }} rows) in {{ campaign_dir }}.</p>
<h2>Subject x device x context</h2>
{{ summary_table | safe }}
<h2>Findings</h2>
{{ findings_table | safe }}
<h2>Plots</h2>
{% for name, data in plots %}<p><img alt="{{ name }}" src="data:image/png;base64,{{ data }}"></p>
{% endfor %}
<h2>Environment</h2>
{{ environment_table | safe }}
</body></html>
"""


def write_report(campaign_dir: str, *, environment: Mapping[str, Any],
                 root_cause: Callable[[pd.Series], str] | None = None) -> dict[str, str]:
    """Write the report files of a campaign into its directory, each atomically; returns {file name: path}.

    Files: ``results.csv`` (and ``results.parquet`` where pyarrow is importable),
    ``summary.csv``, ``findings.csv``, ``summary.md``, ``summary.html`` (the tables, the plots
    as base64 ``<img>``, the flattened environment), ``environment.json``,
    ``ulp_distribution.png``, ``error_vs_size.png``, and the findings' case files under
    ``cases/``.
    """
    import jinja2

    results = results_frame(campaign_dir)
    summary = summary_frame(results)
    findings = findings_frame(results, campaign_dir, root_cause=root_cause)
    env_table = flatten_environment(environment)
    out: dict[str, str] = {}

    def put(name: str, data: str | bytes) -> None:
        out[name] = _atomic_write(os.path.join(campaign_dir, name), data)

    put("results.csv", results.to_csv(index=False))
    if importlib.util.find_spec("pyarrow") is not None:
        buf = io.BytesIO()
        results.to_parquet(buf, index=False)
        put("results.parquet", buf.getvalue())
    put("summary.csv", summary.to_csv(index=False))
    put("findings.csv", findings.to_csv(index=False))
    put("environment.json", json.dumps(dict(environment), indent=1, sort_keys=True, default=str) + "\n")
    plots = []
    for name, fn in (("ulp_distribution.png", plot_ulp_distribution), ("error_vs_size.png", plot_error_vs_size)):
        out[name] = fn(results, os.path.join(campaign_dir, name))
        with open(out[name], "rb") as f:
            plots.append((name, base64.b64encode(f.read()).decode("ascii")))
    md_findings = findings.copy()
    md_findings["replay"] = md_findings["replay"].map(lambda s: f"`{s}`" if s else s)
    sections = [
        "# Reproducibility report",
        f"Every number is computed from `results.csv` ({len(results)} rows).",
        "## Subject x device x context", _markdown(summary),
        "## Findings", _markdown(md_findings),
        "## Plots", *(f"![{name}]({name})" for name, _ in plots),
        "## Environment", _markdown(env_table),
    ]
    put("summary.md", "\n\n".join(sections) + "\n")
    page = jinja2.Environment(autoescape=True).from_string(_PAGE).render(
        title="Reproducibility report", n_rows=len(results), campaign_dir=os.path.abspath(campaign_dir),
        summary_table=_html(summary, "finding"), findings_table=_html(findings, "kind"),
        environment_table=_html(env_table), plots=plots)
    put("summary.html", page)
    return out


def terminal_summary(summary: pd.DataFrame) -> str:
    """A compact text table of :func:`summary_frame` for the end of a run."""
    if not len(summary):
        return "no tasks"
    cols = ["subject", "device", "context", "cases_run", "bitwise_share_tensors", "worst_max_ulp_repeat",
            "worst_oracle_max_rel", "errors", "skipped", "finding"]
    shown = summary[cols].rename(columns={"cases_run": "cases", "bitwise_share_tensors": "bitwise",
                                          "worst_max_ulp_repeat": "max_ulp", "worst_oracle_max_rel": "oracle_rel"})
    # Groups where everything was skipped (a device that is not here) become one line per device.
    empty = (summary["finding"] == "no data") & (summary["errors"].fillna(0) == 0)
    tail = []
    for dev, grp in summary[empty].groupby("device", sort=True):
        tail.append(f"{dev}: {len(grp)} subject x context groups, every run skipped "
                    f"({int(grp['skipped'].fillna(0).sum())} tasks); see results.csv for the reason")
    shown = shown[~empty.to_numpy()]
    shown = shown.astype(object).where(shown.notna(), None)
    table = shown.to_markdown(index=False, tablefmt="simple", floatfmt=".3g", missingval="-") if len(shown) else ""
    return "\n".join([table, *tail]).strip()
