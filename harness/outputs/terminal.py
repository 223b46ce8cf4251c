"""What the terminal shows of a report: its verdict lines, then the verdict matrix in columns a terminal holds
(:func:`terminal_matrix`), or a compact table of the summary (:func:`terminal_summary`).

Headers too long for their column are abbreviated and spelled out in a key line, never cut silently.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from harness.outputs.matrix import matrix_frame

__all__ = ["terminal_matrix", "terminal_summary"]


def _abbreviations(labels: Sequence[str], room: int) -> list[str]:
    """Each label, or where it is longer than ``room`` its prefix and a dot (``dupl.``); prefixes that would be
    the same (``d.`` for default, debug and duplicate) get a number (``d1.``, ``d2.``), so no two columns read
    alike."""
    names = list(dict.fromkeys(labels))  # a label in several device groups reads the same in each
    out = [lab if len(lab) <= room else lab[:room - 1] + "." for lab in names]
    clash = {ab for ab in out if out.count(ab) > 1}
    n: dict[str, int] = {}
    for i, (lab, ab) in enumerate(zip(names, out)):
        if ab in clash and ab != lab:
            n[ab] = n.get(ab, 0) + 1
            tag = str(n[ab])
            out[i] = lab[:max(room - 1 - len(tag), 1)] + tag + "."
    short = dict(zip(names, out))
    return [short[lab] for lab in labels]


def terminal_matrix(cells: pd.DataFrame, width: int = 100) -> str:
    """The verdict matrix for a terminal: one line per subject; a column name longer than its cell is
    abbreviated (``dupl.``, numbered where two would read alike) and a key line under the matrix spells it out,
    so no header is cut silently. With several devices a first header line names each column's device."""
    m = matrix_frame(cells)
    if not len(m):
        return ""
    name_w = max(len(s) for s in m.index)
    devices = [c.split(" ", 1)[0] for c in m.columns]
    labels = [c.split(" ", 1)[1] if " " in c else c for c in m.columns]
    widest = max([len(lab) for lab in labels] + [len(d) for d in devices]
                 + [len(str(v)) for v in m.to_numpy().ravel()])
    cell_w = max(7, min(widest + 1, (width - name_w - 2) // max(len(m.columns), 1)))
    short = _abbreviations(labels, cell_w - 1)
    key = [f"{ab} = {lab}" for ab, lab in zip(short, labels) if ab != lab]
    heads = [" " * (name_w + 2) + "".join(lab.rjust(cell_w) for lab in short)]
    if len(set(devices)) > 1:
        dev = _abbreviations(devices, cell_w - 1)
        key = [f"{ab} = {d}" for ab, d in zip(dev, devices) if ab != d] + key
        heads.insert(0, " " * (name_w + 2) + "".join(d.rjust(cell_w) for d in dev))
    body = [s.ljust(name_w + 2) + "".join(str(v)[:cell_w - 1].rjust(cell_w) for v in row) for s, row in m.iterrows()]
    return "\n".join([*heads, *body] + (["key: " + ", ".join(dict.fromkeys(key))] if key else []))


def terminal_summary(summary: pd.DataFrame, headline: Sequence[str] = (), cells: pd.DataFrame | None = None) -> str:
    """The verdict in a few lines, then the verdict matrix (with ``cells``) or a compact table of
    :func:`~harness.outputs.tables.summary_frame`."""
    if not len(summary):
        return "no tasks"
    if cells is not None:
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
