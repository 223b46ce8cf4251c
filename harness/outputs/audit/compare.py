"""``python -m harness compare A.json B.json [--out DIR]``: what changed between two audit files, and by how much.

Per subject x device x context: tensors compared, how many changed digest, and how much they changed --
the greatest ULP, relative and absolute difference where both audits kept arrays, else the ULP distance at
the sampled elements (greatest and median) and the relative change of the L2 norm from the tensors' sketches
(:mod:`harness.judge.sketch`) -- a verdict (:data:`CHANGE_VERDICTS`), and the environment fields that differ
(:func:`harness.core.env.environment_diff`). Subjects are grouped by their role (asked of the registry): an
oracle's change moves the reference the implementations are judged against and is listed apart from them.
"""

from __future__ import annotations

import collections
import html
import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from harness.core.env import environment_diff
from harness.core.fileio import atomic_write
from harness.outputs.audit import pages
from harness.outputs.audit.fileformat import Audit, as_audit, failing, one_digest_algorithm

__all__ = ["CHANGE_VERDICTS", "AuditComparison", "compare_audits", "compare_changed", "write_compare",
           "subject_role"]

#: Verdicts of :func:`compare_audits` on one subject x device x context (or one subject), most alarming first
#: (a group takes the first that applies). Not :data:`harness.core.records.VERDICTS`: these judge two audits
#: against each other, not a run against its contract.
CHANGE_VERDICTS = (
    "newly failing",             # ok in A, failing (error, partial, crashed, timeout) in B
    "not reproducible",          # digests changed, but the repetitions disagreed within A or B
    "changed beyond tolerance",  # kept arrays beyond the tolerance policy; or a shape, dtype, tensor or error changed
    "changed (no sketch)",       # changed digests; neither arrays nor sketches (older audit files) say by how much
    "changed (sampled)",         # changed digests; no arrays, the sketches say by how much (sampled ULPs, norm)
    "changed within tolerance",  # kept arrays within the tolerance policy (harness.judge.tolerance)
    "fixed",                     # failing in A, ok in B
    "identical",                 # every tensor digest equal
    "not compared",              # nothing in common (skipped on one side, or present in one audit only)
)

#: Section titles of the subjects' roles, in the order they are shown.
_ROLE_SECTIONS = (("subject", "Implementations: verdicts per subject"), ("oracle", "Reference (oracle)"),
                  ("control", "Controls (self-tests)"))
_ORACLE_NOTE = ("An oracle's change moves the float64 reference every implementation is judged against "
                "(BLAS, NumPy); it is not a change of an implementation.")


def subject_role(name: str, recorded: str | None = None) -> str:
    """A subject's role (subject, oracle or control) as the registry says; for a subject not registered here
    (a plug-in not loaded), the role its audit entry recorded, else ``subject``."""
    from harness.subjects.registry import SUBJECTS

    s = SUBJECTS.get(name)
    if s is not None:
        return s.role
    return recorded or "subject"


@dataclass
class AuditComparison:
    """What :func:`compare_audits` found. ``rows``: one per subject x device x context;
    ``subjects``: one per subject (its most alarming verdict); ``environment``: the differing
    fingerprint fields; ``warnings``: corpus or settings mismatches."""

    a: Audit
    b: Audit
    rows: Any
    subjects: Any
    environment: Any
    warnings: list[str] = field(default_factory=list)

    def verdicts(self) -> dict[str, str]:
        """subject -> verdict (every role)."""
        return dict(zip(self.subjects["subject"], self.subjects["verdict"]))

    def of_role(self, role: str) -> Any:
        """The per-subject table of one role."""
        return self.subjects[self.subjects["role"] == role]

    def to_markdown(self) -> str:
        md = pages.md_text
        lines = ["# Audit comparison", "",
                 f"- A: {md(self.a.path)} ({md(self.a.label)}, {md(self.a.created)})",
                 f"- B: {md(self.b.path)} ({md(self.b.label)}, {md(self.b.created)})", ""]
        for w in self.warnings:
            lines.append(f"> **warning:** {md(w)}")
        if self.warnings:
            lines.append("")
        for role, title in _ROLE_SECTIONS:
            part = self.of_role(role)
            if role == "control" and not len(part):
                continue
            lines += [f"## {title}", ""]
            if role == "oracle":
                lines += [_ORACLE_NOTE, ""]
            lines += [pages.md_table(pages.present(part.drop(columns=["role"]))) if len(part)
                      else f"No {role} in these audits.", ""]
        lines += ["## Per subject, device and context", "", pages.md_table(pages.present(self.rows)), "",
                  "## Environment differences", ""]
        lines.append(pages.md_table(self.environment) if len(self.environment) else "No fingerprint field differs.")
        return "\n".join(lines) + "\n"


_ROW_COLUMNS = ["subject", "role", "device", "context", "verdict", "cases", "changed_cases", "tensors", "changed",
                "arrays_kept", "max_ulp", "max_rel", "max_abs", "sample_max_ulp", "sample_median_ulp",
                "norm_rel_change", "beyond_tolerance", "newly_failing", "fixed", "not_reproducible", "skipped",
                "only_in_a", "only_in_b"]
_COUNTS = ["cases", "changed_cases", "tensors", "changed", "beyond_tolerance", "newly_failing", "fixed",
           "not_reproducible", "skipped", "only_in_a", "only_in_b"]
_FLOATS = ["max_ulp", "max_rel", "max_abs", "sample_max_ulp", "sample_median_ulp", "norm_rel_change"]


def _measure(name: str, x: np.ndarray | None, y: np.ndarray | None) -> tuple[float, float, float, bool]:
    """(max ULP, max relative difference, max absolute difference, within tolerance) of two kept arrays:
    B against A under the one tolerance policy (:func:`harness.judge.tolerance.judge_oracle`, A standing in
    for the reference), so an audit's "within tolerance" means what the gate's and the report's mean."""
    from harness.judge import comparator, tolerance, ulp

    if x is None or y is None or x.shape != y.shape or x.dtype != y.dtype:
        return math.inf, math.inf, math.inf, False
    c = comparator.compare_pair(name, x, y)
    worst_ulp = math.inf if c.max_ulp == ulp.ULP_MAX else float(c.max_ulp)
    if c.bitwise_identical:
        return 0.0, 0.0, 0.0, True
    if x.dtype.kind not in "fiub":
        return worst_ulp, math.inf, math.inf, False
    try:
        e, _ = tolerance.judge_oracle(None, name, y, x.astype(np.float64), text=False)
    except (TypeError, ValueError):
        return worst_ulp, math.inf, math.inf, False
    return worst_ulp, float(e.max_rel), float(e.max_abs), bool(e.within_tolerance)


def _fmax(a: float, b: float) -> float:
    return b if math.isnan(a) else a if math.isnan(b) else max(a, b)


def compare_audits(a: Audit | str | os.PathLike[str], b: Audit | str | os.PathLike[str]) -> AuditComparison:
    """Compare two audits entry by entry (matched on case, subject, device and context)."""
    import pandas as pd

    from harness.judge.sketch import sketch_delta

    a, b = as_audit(a), as_audit(b)
    one_digest_algorithm([a, b])  # two algorithms: refused here, every digest would differ
    warnings = []
    if a.corpus.get("digest") != b.corpus.get("digest"):
        warnings.append(f"the corpus digests differ (A {str(a.corpus.get('digest'))[:12]}, {a.corpus.get('cases')} "
                        f"cases; B {str(b.corpus.get('digest'))[:12]}, {b.corpus.get('cases')} cases): only "
                        f"the entries present in both are compared")
    for k in ("repeats", "devices", "contexts", "subjects"):
        if a.settings.get(k) != b.settings.get(k):
            warnings.append(f"settings differ: {k} is {a.settings.get(k)!r} in A, {b.settings.get(k)!r} in B")
    ea, eb = a.by_key(), b.by_key()
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}

    def group(key: tuple[str, str, str, str], entry: Mapping[str, Any]) -> dict[str, Any]:
        g = groups.get(key[1:])
        if g is None:
            g = groups[key[1:]] = dict.fromkeys(_COUNTS, 0)
            g.update(subject=key[1], role=subject_role(key[1], entry.get("role")), device=key[2], context=key[3],
                     arrays_kept=True, _err_changed=0, _no_sketch=0, _sampled=0, _ulps=[],
                     **dict.fromkeys(_FLOATS, math.nan))
        return g

    for key in list(ea) + [k for k in eb if k not in ea]:
        x, y = ea.get(key), eb.get(key)
        g = group(key, x if x is not None else eb[key])  # (a key not in A is in B)
        if x is None:
            g["only_in_b"] += 1
            continue
        if y is None:
            g["only_in_a"] += 1
            continue
        sa, sb = x["status"], y["status"]
        if "skipped" in (sa, sb):
            g["skipped"] += 1
            continue
        g["cases"] += 1
        if sa == "ok" and failing(sb):
            g["newly_failing"] += 1
            continue
        if failing(sa) and sb == "ok":
            g["fixed"] += 1
            continue
        if failing(sa) and failing(sb):
            ta = (x.get("error") or "").split(" ", 1)[0]
            tb = (y.get("error") or "").split(" ", 1)[0]
            if sa != sb or ta != tb:
                g["_err_changed"] += 1
            continue
        nonrepro = x.get("repeats_agreed") is False or y.get("repeats_agreed") is False
        tx, ty = x["tensors"], y["tensors"]
        names = list(dict.fromkeys([*tx, *ty]))
        # Shape and dtype are compared beside the digest: a digest that (in some file) did not
        # cover them must not make a reshaped tensor "identical".
        changed = [n for n in names if n not in tx or n not in ty
                   or any(tx[n][k] != ty[n][k] for k in ("digest", "dtype", "shape"))]
        g["tensors"] += len(names)
        g["changed"] += len(changed)
        g["changed_cases"] += int(bool(changed))
        if changed and nonrepro:
            g["not_reproducible"] += 1
        arr_a, arr_b = a.arrays(x), b.arrays(y)
        if arr_a is None or arr_b is None:
            g["arrays_kept"] = False
        else:
            for k in ("max_ulp", "max_rel", "max_abs"):
                g[k] = _fmax(g[k], 0.0)
        for n in changed:
            if n not in tx or n not in ty or tx[n]["dtype"] != ty[n]["dtype"] or tx[n]["shape"] != ty[n]["shape"]:
                g["beyond_tolerance"] += 1  # a tensor appeared, vanished or changed its structure
                continue
            delta = sketch_delta(tx[n]["dtype"], tx[n].get("sketch"), ty[n].get("sketch"))
            if delta is not None:
                g["_ulps"] += delta.ulps
                g["norm_rel_change"] = _fmax(g["norm_rel_change"], delta.norm_rel)
            if arr_a is not None and arr_b is not None:
                ulp, rel, absdiff, within = _measure(n, arr_a.get(n), arr_b.get(n))
                g["max_ulp"] = max(g["max_ulp"], ulp)
                g["max_rel"] = max(g["max_rel"], rel)
                g["max_abs"] = max(g["max_abs"], absdiff)
                g["beyond_tolerance"] += int(not within)
            elif delta is not None:
                g["_sampled"] += 1
            else:
                g["_no_sketch"] += 1

    rows = []
    for cell in sorted(groups):
        g = groups[cell]
        if g["_ulps"]:
            g["sample_max_ulp"] = float(max(g["_ulps"]))
            g["sample_median_ulp"] = float(np.median(np.array(g["_ulps"], dtype=np.float64)))
        if g["cases"] == 0:
            g["arrays_kept"] = False
        g["verdict"] = _verdict(g)
        rows.append({k: g[k] for k in _ROW_COLUMNS})
    df = pd.DataFrame(rows, columns=_ROW_COLUMNS)
    for col in _FLOATS:
        df[col] = df[col].astype(float)
    env = pd.DataFrame(environment_diff(a.environment, b.environment), columns=["field", "kind", "A", "B"])
    return AuditComparison(a, b, df, _subject_summary(df), env, warnings)


def _verdict(g: Mapping[str, Any]) -> str:
    if g["newly_failing"]:
        return "newly failing"
    if g["cases"] == 0:
        return "not compared"
    if g["changed"] and g["not_reproducible"]:
        return "not reproducible"
    if g["beyond_tolerance"] or g["_err_changed"]:
        return "changed beyond tolerance"
    if g["_no_sketch"]:
        return "changed (no sketch)"
    if g["_sampled"]:
        return "changed (sampled)"
    if g["changed"]:
        return "changed within tolerance"
    if g["fixed"]:
        return "fixed"
    return "identical"


def _subject_summary(df: Any) -> Any:
    import pandas as pd

    cols = ["subject", "role", "verdict", "rows", "cases", "changed_cases", "tensors", "changed", "max_ulp",
            "max_rel", "max_abs", "sample_max_ulp", "sample_median_ulp", "norm_rel_change"]
    out = []
    for subject, part in df.groupby("subject", sort=True):
        verdicts = [v for v in part["verdict"] if v != "not compared"] or ["not compared"]
        row = {"subject": subject, "role": part["role"].iloc[0],
               "verdict": min(verdicts, key=CHANGE_VERDICTS.index), "rows": len(part)}
        row.update({k: int(part[k].sum()) for k in ("cases", "changed_cases", "tensors", "changed")})
        # the worst row's figures (a subject's median ULP is its worst row's median)
        row.update({k: part[k].max(skipna=True) for k in _FLOATS})
        out.append(row)
    return pd.DataFrame(out, columns=cols)


_VERDICT_COLOURS = {
    "newly failing": "#f4a6a6", "not reproducible": "#f9d29d", "changed beyond tolerance": "#f4a6a6",
    "changed (no sketch)": "#fbe3a1", "changed (sampled)": "#fbe3a1", "changed within tolerance": "#fff3b0",
    "fixed": "#b8e0b8", "identical": "#d9f2d9", "not compared": "#e6e6e6",
}


def write_compare(cmp: AuditComparison, out_dir: str) -> dict[str, str]:
    """compare.md, compare.html (heatmap + tables), compare.csv under ``out_dir``; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f"compare.{k}") for k in ("md", "html", "csv")}
    atomic_write(paths["md"], cmp.to_markdown())
    atomic_write(paths["csv"], cmp.rows.to_csv(index=False))
    png = pages.changed_heatmap(cmp.rows)
    e = html.escape
    body = [f"<p>A: <code>{e(cmp.a.path)}</code> ({e(cmp.a.label)}, {e(cmp.a.created)})"
            f"<br>B: <code>{e(cmp.b.path)}</code> ({e(cmp.b.label)}, {e(cmp.b.created)})</p>"]
    body += [f"<p class='warn'>warning: {e(w)}</p>" for w in cmp.warnings]
    if png:
        body.append(f"<img alt='changed-tensor heatmap' src='data:image/png;base64,{png}'>")
    for role, title in _ROLE_SECTIONS:
        part = cmp.of_role(role)
        if role == "control" and not len(part):
            continue
        body.append(f"<h2>{e(title)}</h2>")
        if role == "oracle":
            body.append(f"<p>{e(_ORACLE_NOTE)}</p>")
        body.append(pages.styled_html(pages.present(part.drop(columns=["role"])), _VERDICT_COLOURS) if len(part)
                    else f"<p>No {e(role)} in these audits.</p>")
    body += ["<h2>Per subject, device and context</h2>", pages.styled_html(pages.present(cmp.rows), _VERDICT_COLOURS),
             "<h2>Environment differences</h2>",
             pages.styled_html(cmp.environment) if len(cmp.environment) else "<p>No fingerprint field differs.</p>"]
    atomic_write(paths["html"], pages.html_page("Audit comparison", "\n".join(body)))
    return paths


def compare_changed(cmp: AuditComparison) -> tuple[bool, str]:
    """``(changed, one line)`` for ``compare --exit-code``: changed when a row's verdict is anything but
    "identical" (rows with only skipped entries excepted) or an entry is in one audit only; and also
    when nothing at all was compared, since "the same" must have been seen, not assumed. A changed oracle
    row counts as a change, and the line says how many of the changed rows are the reference's."""
    rows = cmp.rows
    if not len(rows):
        return True, "nothing to compare: both audits are empty"
    only = int(rows["only_in_a"].sum() + rows["only_in_b"].sum())
    skipped_only = (rows["verdict"] == "not compared") & (rows["only_in_a"] == 0) & (rows["only_in_b"] == 0)
    bad = rows[(rows["verdict"] != "identical") & ~skipped_only]
    compared = int(rows["cases"].sum())
    if compared == 0:
        return True, "nothing compared: no entry ran in both audits (skipped or missing)"
    if len(bad) or only:
        kinds = collections.Counter(bad["verdict"])
        parts = [f"{v} {n}" for v, n in sorted(kinds.items())]
        if only:
            parts.append(f"{only} entries in one audit only")
        ref = int((bad["role"] == "oracle").sum())
        of_ref = f"; {ref} of them the reference (oracle)" if ref else ""
        return True, f"changed: {len(bad)} of {len(rows)} subject/device/context rows ({', '.join(parts)}{of_ref})"
    return False, f"same: {compared} entries identical in {len(rows)} subject/device/context rows"
