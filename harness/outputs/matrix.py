"""The verdict matrix as a frame: one row per subject, one column per device x context or relation.

What the page's table, the terminal matrix and the matrix figure draw from (:func:`matrix_frame`), the
invariance table beside it, the one subject order of every table and figure (:func:`subject_order`) and the
way a ULP count reads in a cell (:func:`ulp_text`). Pure: a cells frame in, frames and strings out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.outputs.palette import MARKS

__all__ = ["ulp_text", "subject_order", "matrix_frame", "invariance_frame"]


def ulp_text(v: Any) -> str:
    """A ULP count for a cell: ``2.1M``, ``NaN`` (NaN against a number), ``""`` for none."""
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return ""
    v = int(v)
    if v >= 2**63:
        return "NaN"
    for unit, scale in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if v >= scale:
            return f"{v / scale:.3g}{unit}"
    return str(v)


# ---------------------------------------------------------------------------------------------- the matrix


def subject_order(cells: pd.DataFrame) -> list[str]:
    """The one subject order of every table and figure: implementations, then controls, then oracles (each by
    name). The role is the cell's own (the subject said it), never guessed from the name."""
    if not len(cells):
        return []
    role = dict(zip(cells["subject"], cells["role"]))
    rank = {"subject": 0, "control": 1, "oracle": 2}
    return sorted(role, key=lambda s: (rank.get(role[s], 3), s))


def _ran(cells: pd.DataFrame) -> pd.DataFrame:
    ran_devices = set(cells.loc[cells["verdict"] != "skipped", "device"])
    c = cells[cells["device"].isin(ran_devices)].copy()
    c["column"] = [f"{d} {r if r else ctx}" for d, ctx, r in zip(c["device"], c["context"], c["relation"])]
    return c


def _cell_text(verdict: str, ulp: Any, ratio: Any) -> str:
    mark = MARKS.get(verdict, verdict)
    sep = "" if len(mark) == 1 else " "
    if verdict == "within tolerance" and ratio is not None and not pd.isna(ratio):
        r = float(ratio)  # error / allowed: the share of the tolerance used
        return f"{mark}{sep}{'<0.01' if r < 0.01 else f'{r:.2g}'}×"
    u = ulp_text(ulp)
    return f"{mark}{sep}{u}" if u and u != "0" else mark


def _cell_title(r: Any) -> str:
    parts = [f"{r.subject} [{r.device}] {r.relation or r.context}: {r.verdict}"]
    if pd.notna(r.worst_ulp) and int(r.worst_ulp):
        parts.append(f"worst ULP distance {int(r.worst_ulp):,}")
    parts.append(f"{int(r.tensors_differing)} of {int(r.tensors)} tensors differ")
    if pd.notna(r.error_ratio):
        parts.append(f"error / allowed {float(r.error_ratio):.3g}" + (f" ({r.allowed})" if r.allowed else ""))
    if r.contract:
        parts.append(f"contract: {r.contract}")
    if r.reason:
        parts.append(f"reason: {r.reason}")
    return "; ".join(parts)


def _columns(c: pd.DataFrame) -> list[str]:
    # per device: the default context, the other contexts, then the relations
    rank = {col: (d, bool(r), ctx != "default", col) for col, d, ctx, r in
            zip(c["column"], c["device"], c["context"], c["relation"])}
    return sorted(set(c["column"]), key=lambda col: rank[col])


def _pivot(c: pd.DataFrame, values: str, index: list[str], columns: list[str]) -> pd.DataFrame:
    return c.pivot_table(index="subject", columns="column", values=values, aggfunc="first").reindex(
        index=index, columns=columns)


def matrix_frame(cells: pd.DataFrame, what: str = "text") -> pd.DataFrame:
    """The verdict matrix: one row per subject (:func:`subject_order`), one column per ``device context`` or
    ``device relation``; a device whose every cell was skipped is left out (the verdict line says why).
    ``what``: ``text`` (mark and worst ULP, or error/allowed for a cell within tolerance), ``verdict``, ``title``
    (the hover text: the values)."""
    if not len(cells):
        return pd.DataFrame()
    c = _ran(cells)
    if not len(c):
        return pd.DataFrame()
    if what == "text":
        c["value"] = [_cell_text(v, u, e) for v, u, e in zip(c["verdict"], c["worst_ulp"], c["error_ratio"])]
    elif what == "title":
        c["value"] = [_cell_title(r) for r in c.itertuples()]
    else:
        c["value"] = c["verdict"]
    order = [s for s in subject_order(cells) if s in set(c["subject"])]
    out = _pivot(c, "value", order, _columns(c)).fillna("")
    out.columns.name = None
    out.index.name = "subject"
    return out


def invariance_frame(cells: pd.DataFrame) -> pd.DataFrame:
    """Per subject x device x relation: tensors compared, the share bit-identical, the worst ULP distance."""
    cols = ["subject", "device", "relation", "verdict", "tensors", "bit-identical", "worst ULP"]
    rel = cells[(cells["relation"] != "") & (cells["verdict"] != "skipped")] if len(cells) else cells
    if not len(rel):
        return pd.DataFrame(columns=cols)
    order = {s: i for i, s in enumerate(subject_order(cells))}
    rel = rel.sort_values(["subject", "device", "relation"], key=lambda s: s.map(order) if s.name == "subject" else s)
    return pd.DataFrame({
        "subject": rel["subject"], "device": rel["device"], "relation": rel["relation"], "verdict": rel["verdict"],
        "tensors": rel["tensors"],
        "bit-identical": [f"{1 - d / n:.0%}" if n else "" for d, n in zip(rel["tensors_differing"], rel["tensors"])],
        "worst ULP": [ulp_text(u) or "0" for u in rel["worst_ulp"]]}, columns=cols).reset_index(drop=True)
