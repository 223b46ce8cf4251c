"""What a person reads: the report's page, its Markdown twin, the terminal matrix and the figures.

One renderer: the page and the Markdown summary are Jinja2 templates (``harness/outputs/templates/``) over one
:class:`ReportView`; one escaping per format (HTML: Jinja's autoescape; Markdown: :func:`md_escape`), one table
function per format (:func:`html_table`, :func:`md_table`, also used by the audit's pages). Verdict lines are
``(Verdict or Classification, text)`` pairs, coloured by the verdict, never by what the text says. One subject
order (:func:`subject_order`) for every table and figure.

Pure: frames, findings and PNG bytes in, strings and PNG bytes out (the caller writes them).
"""

from __future__ import annotations

import base64
import io
import math
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping, Sequence
from urllib.parse import quote

import numpy as np
import pandas as pd

from harness.core.records import Verdict
from harness.judge.findings import Classification, Finding
from harness.judge.headlines import Headline, contexts_by_device, headlines

__all__ = ["VERDICT_COLOURS", "CLASS_COLOURS", "ReportView", "report_view", "Line", "matrix_frame", "subject_order",
           "summary_html", "summary_md", "finding_lines", "run_files", "colour", "md_escape", "md_table", "html_table", "terminal_matrix", "plot_divergence",
           "plot_error_ratio", "plot_matrix", "prune_reports", "FINISHED", "invariance_frame", "SHOWN_FINDINGS",
           "ulp_example"]

#: One colour per verdict (the Okabe-Ito palette, readable with the common colour-vision deficiencies).
VERDICT_COLOURS = {
    "bit-identical": "#cfe8d8",        # bluish green, light
    "within tolerance": "#e3f1f9",     # sky blue, light
    "expected error": "#eeeeee",
    "diverged as allowed": "#fbe3b4",  # orange, light
    "known defect": "#e8dcef",         # reddish purple, light
    "skipped": "#f6f6f6",
    "not judged": "#f3c6a5",
    "error": "#f3c6a5",                # vermillion, lighter
    "broken": "#e69f9f",               # vermillion
}
_MARK = {"bit-identical": "=", "within tolerance": "≈", "expected error": "raises", "diverged as allowed": "≠",
         "known defect": "known", "skipped": "–", "not judged": "?", "error": "error", "broken": "BROKEN"}

#: One colour per finding class (most severe first), from the verdict palette.
CLASS_COLOURS = {
    Classification.CONTRACT_BROKEN: VERDICT_COLOURS["broken"],
    Classification.NEW_DEFECT: VERDICT_COLOURS["error"],
    Classification.NOT_JUDGED: VERDICT_COLOURS["not judged"],
    Classification.KNOWN_DEFECT: VERDICT_COLOURS["known defect"],
    Classification.ALLOWED: VERDICT_COLOURS["diverged as allowed"],
    Classification.EXPECTED_ERROR: VERDICT_COLOURS["expected error"],
    Classification.CONTROL: "#eeeeee",
}

#: The page shows this many findings before the controls (findings.csv and findings.json have them all).
SHOWN_FINDINGS = 30

#: A verdict line: what decides its colour (a verdict or a finding class), and its text.
Line = tuple[Verdict | Classification, str]


def colour(key: Verdict | Classification | str) -> str:
    """The colour of a verdict or a finding class (the one place a colour is chosen)."""
    if isinstance(key, Classification):
        return CLASS_COLOURS[key]
    return VERDICT_COLOURS.get(str(key), "")  # an unknown value: no colour (not a guess)


# ---------------------------------------------------------------------------------------------- escaping, tables


def md_escape(text: Any) -> str:
    """One Markdown table cell or inline text: no newline, no bare ``|``, no raw HTML, no code span.

    >>> md_escape("a|b <script>`x`\\nc")
    'a\\\\|b &lt;script&gt;\\\\`x\\\\` c'
    """
    if text is None or text is pd.NA or (isinstance(text, float) and math.isnan(text)):
        return ""
    s = " ".join(str(text).splitlines())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")


def _cell(v: Any) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return ""
    return str(v)


def md_table(df: pd.DataFrame, index: bool = False) -> str:
    """A frame as a Markdown table, every header and cell through :func:`md_escape`; ``_none_`` when empty."""
    if not len(df):
        return "_none_"
    cols = ([df.index.name or ""] if index else []) + [str(c) for c in df.columns]
    rows = ["| " + " | ".join(md_escape(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for i, (_, r) in enumerate(df.iterrows()):
        vals = ([df.index[i]] if index else []) + list(r)
        rows.append("| " + " | ".join(md_escape(_cell(v)) for v in vals) + " |")
    return "\n".join(rows)


def md_code(text: str) -> str:
    """A fenced Markdown code block for a command (a fence longer than any backtick run inside it)."""
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return f"{fence}sh\n{text}\n{fence}"


def nobreak(text: Any) -> Any:
    """HTML text (escaped by Jinja's escape) whose tokens with punctuation (``-4.98e-06``, ``grad.ws.0.1``,
    ``a/b``) are kept on one line: browsers break after a hyphen or a slash even with ``word-break: normal``."""
    from markupsafe import Markup, escape

    parts = re.split(r"(\s+)", str(text))
    return Markup("".join(f'<span class="nw">{escape(p)}</span>' if len(p) > 1 and re.search(r"[^\w\s]", p)
                          else str(escape(p)) for p in parts))


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates")),
                             autoescape=jinja2.select_autoescape(["html", "html.j2"], default_for_string=True),
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["md"] = md_escape
    env.filters["md_code"] = md_code
    env.filters["colour"] = colour
    env.filters["href"] = lambda p: quote(str(p).replace(os.sep, "/"), safe="/#=")
    env.filters["nobreak"] = nobreak
    env.filters["b64"] = lambda data: base64.b64encode(data).decode()
    return env


def html_table(df: pd.DataFrame, *, index: bool = False, colours: Mapping[str, Any] | None = None,
               code: Sequence[str] = (), titles: pd.DataFrame | None = None, cls: str = "report",
               palette: Mapping[str, str] | None = None) -> str:
    """A frame as an HTML table, escaped by Jinja's autoescape. ``colours``: column -> the column whose value
    is each row's verdict (its cell is coloured by :func:`colour`, or by ``palette``: value -> CSS colour, for
    another vocabulary such as the audit's); ``titles``: a frame of hover texts, same shape."""
    if not len(df):
        return "<p><em>none</em></p>"
    colours = colours or {}
    rows = []
    for i, (key, r) in enumerate(df.iterrows()):
        cells = []
        for j, c in enumerate(df.columns):
            verdict = r[colours[c]] if c in colours else None
            title = _cell(titles.iat[i, j]) if titles is not None else ""
            bg = "" if not isinstance(verdict, str) or not verdict else \
                palette.get(verdict, "") if palette is not None else colour(verdict)
            cells.append({"text": _cell(r[c]), "bg": bg,
                          "code": c in code, "title": title})
        rows.append({"head": _cell(key) if index else None, "cells": cells})
    return _env().get_template("table.html.j2").render(
        columns=[str(c) for c in df.columns], index_name=(df.index.name or "") if index else None, rows=rows,
        cls=cls)


# ---------------------------------------------------------------------------------------------- numbers


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


_ulp_text = ulp_text


def ulp_example(dtype: str = "float32", near: float = 1.0) -> str:
    """What one ULP is as a value, computed: ``float32 near 1: 1 ULP = 1.19e-07``."""
    t = np.dtype(dtype).type
    return f"{dtype} near {near:g}: 1 ULP = {float(np.spacing(t(near))):.3g}"


def _num(v: Any) -> float | None:
    try:
        f = float(str(v).split()[0])
    except (ValueError, IndexError, TypeError):
        return None
    return f if math.isfinite(f) else None


def size_lines(f: Finding) -> list[tuple[str, str]]:
    """How large a finding is, as (label, text): values first, then ULPs and error/allowed."""
    m = f.worst
    out: list[tuple[str, str]] = []
    a, e = _num(m.actual), _num(m.expected)
    if a is not None and e is not None:
        # enough digits that two different values never print the same
        p = next((p for p in range(6, 18) if f"{a:.{p}g}" != f"{e:.{p}g}"), 17) if a != e else 6
        out.append(("worst element", f"{a:.{p}g} against {e:.{p}g}" + (f" ({m.tensor})" if m.tensor else "")))
    absd = m.max_abs if m.max_abs is not None else (abs(a - e) if a is not None and e is not None else None)
    rel = m.max_rel if m.max_rel is not None else (abs(a - e) / abs(e) if a is not None and e else None)
    if absd is not None:
        out.append(("absolute difference", f"{absd:.3g}" + (f", relative {rel:.3g} ({rel * 100:.3g}%)"
                                                            if rel is not None else "")))
    if m.max_ulp is not None and m.kind not in ("oracle", "task"):
        ulps = "NaN against a number" if m.max_ulp >= 2**63 else f"{m.max_ulp:,} ULP"
        out.append(("ULP distance", ulps + (f" ({m.dtype})" if m.dtype else "")))
    if m.error_ratio is not None:
        out.append(("error / allowed", f"{m.error_ratio:.3g}" + (f" ({m.allowed})" if m.allowed else "")))
    if m.n_total and m.n_diff is not None:
        out.append(("elements differing", f"{m.n_diff:,} of {m.n_total:,} ({m.n_diff / m.n_total:.1%})"))
    if f.error:
        out.append(("error", f.error + (f" (raised in {f.where})" if f.where else "")))
    if f.reason:
        out.append(("why", f.reason))
    return out


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
    mark = _MARK.get(verdict, verdict)
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


# ---------------------------------------------------------------------------------------------- the view


@dataclass(frozen=True)
class ReportView:
    """Everything the page and the Markdown summary show, built once (:func:`report_view`)."""

    held: int                                    # cells that ran and hold
    total: int                                   # every cell of the matrix (skipped ones included)
    not_judged: tuple[tuple[str, int, str], ...]  # (where, cells, why): cells not judged or not run, with reason
    findings: Sequence[Finding]                  # most severe first
    cells: pd.DataFrame                          # tables.cells_frame (CELL_COLUMNS)
    figures: Sequence[tuple[str, bytes]]         # (file name, PNG bytes)
    environment: pd.DataFrame                    # key / value
    run_dir: str
    files: Sequence[str] = ()                    # the run directory's files, relative paths
    lines: Sequence[Line] = field(default_factory=tuple)  # the verdict lines after the gate line

    @property
    def fails(self) -> bool:
        ran = self.cells[self.cells["verdict"] != "skipped"] if len(self.cells) else self.cells
        bad = ran["verdict"].isin([v.value for v in Verdict if v.fails]).any() if len(ran) else False
        return bool(bad) or any(f.fails for f in self.findings)

    def headlines(self) -> list[Headline]:
        """The findings by cause (one bug, one headline), "every context" meaning every one this run's cells
        have on that device."""
        pairs = zip(self.cells["device"], self.cells["context"]) if len(self.cells) else ()
        return headlines(self.findings, contexts_by_device(pairs))

    def gate_line(self) -> Line:
        """The gate verdict in one line: PASS or FAIL, how many cells hold, the findings that fail the gate,
        what was not judged and why."""
        ran = self.total - sum(n for _, n, _ in self.not_judged)
        text = f"{'FAIL' if self.fails else 'PASS'}: " + (f"all {ran} cells that ran hold" if self.held == ran
                                                          else f"{self.held} of {ran} cells that ran hold")
        failing: dict[str, int] = {}
        for h in self.headlines():
            if h.fails:
                failing[str(h.classification)] = failing.get(str(h.classification), 0) + 1
        if failing:
            text += "; the gate fails on " + ", ".join(f"{n} {c}" for c, n in failing.items())
        if self.not_judged:
            text += f"; {self.total - ran} of {self.total} not judged — " + "; ".join(
                f"{w}: {why}" if len(self.not_judged) == 1 else f"{w} ({n} cells): {why}"
                for w, n, why in self.not_judged)
        return (Verdict.BROKEN if self.fails else Verdict.BIT_IDENTICAL, text)


def _not_judged(cells: pd.DataFrame) -> tuple[tuple[str, int, str], ...]:
    if not len(cells):
        return ()
    out = []
    nj = cells[cells["verdict"].isin(["skipped", "not judged"])]
    for (device, verdict), g in nj.groupby(["device", "verdict"], sort=True):
        reasons = sorted({r for r in g["reason"] if r}) or ["no reason recorded"]
        out.append((f"{device} {'not run' if verdict == 'skipped' else 'not judged'}", len(g), "; ".join(reasons)))
    return tuple(out)


def report_view(run_dir: str, cells: pd.DataFrame, findings: Sequence[Finding],
                figures: Sequence[tuple[str, bytes]], environment: pd.DataFrame,
                files: Sequence[str] = (), lines: Sequence[Line] = ()) -> ReportView:
    """The view of a run: the cells that hold and those not judged (with the cells' own reasons: a GPU that is
    missing says the reason the run recorded), the findings, the figures, the environment and the files."""
    nj = _not_judged(cells)
    held = 0
    if len(cells):
        ran = cells[~cells["verdict"].isin(["skipped", "not judged"])]
        held = int((~ran["verdict"].isin([v.value for v in Verdict if v.fails])).sum())
    return ReportView(held=held, total=len(cells), not_judged=nj, findings=list(findings), cells=cells,
                      figures=list(figures), environment=environment, run_dir=run_dir,
                      files=sorted(files), lines=tuple(lines) if lines else finding_lines(
                          headlines(findings, contexts_by_device(zip(cells["device"], cells["context"]))
                                    if len(cells) else None)))


def finding_lines(heads: Sequence[Headline], per_line: int = 3) -> tuple[Line, ...]:
    """One verdict line per finding class present, most severe first, coloured by the class: how many headline
    findings (:mod:`harness.judge.headlines`), and the first few (subject, device, what, where)."""
    out: list[Line] = []
    for cls in Classification:
        fs = [h for h in heads if h.classification == cls]
        if not fs:
            continue
        what = list(dict.fromkeys(f"{h.lead.subject} [{h.lead.device}] {h.what()} {h.where}" for h in fs))
        shown = "; ".join(what[:per_line]) + (f"; and {len(what) - per_line} more" if len(what) > per_line else "")
        out.append((cls, f"{len(fs)} {cls}: {shown}"))
    return tuple(out)


def _replay_note(f: Finding) -> str:
    """What the finding's replay command does when it reproduces (its exit code says so)."""
    if f.classification in (Classification.KNOWN_DEFECT, Classification.EXPECTED_ERROR):
        what = "the values beyond the oracle's tolerance" if f.kind_row.measure_kind == "oracle" else "the error"
        return f"prints {what}; exit 0: the contracts file declares it"
    return "exit 1 when it reproduces"


def run_files(run_dir: str) -> list[str]:
    """The files of a run directory, relative paths (what the page may link to)."""
    out = []
    for root, _dirs, names in os.walk(run_dir):
        for n in names:
            out.append(os.path.relpath(os.path.join(root, n), run_dir))
    return sorted(out)


_FIGURE_OF = {"repeat": "divergence.png", "process": "divergence.png", "context": "divergence.png",
              "device": "divergence.png", "relation": "divergence.png", "baseline": "divergence.png",
              "oracle": "error_vs_size.png"}

_FILE_NOTES = {
    "summary.html": "this page", "summary.md": "this report in Markdown",
    "cells.csv": "the verdict matrix, one row per cell", "findings.csv": "every finding, its commands",
    "findings.json": "every finding as a record", "summary.csv": "per subject x device x context",
    "results.csv.gz": "one row per tensor: every measure", "environment.json": "the fingerprint",
    "campaign.json": "the settings", "corpus.jsonl": "the cases", "timings.json": "where the time went",
}


def _finding_items(view: ReportView) -> list[dict[str, Any]]:
    files = set(view.files)
    items = []
    for row, f in enumerate(view.findings, start=1):
        links = []
        case = os.path.relpath(f.shrunk.file, view.run_dir) if f.shrunk is not None and f.shrunk.file else \
            os.path.join("cases", f"{f.repro_case}.json")
        if case in files:
            links.append((f"case {f.repro_case}", case))
        if "findings.csv" in files:
            links.append((f"findings.csv row {row}", f"findings.csv#row={row + 1}"))  # RFC 7111: row 1 = header
        fig = _FIGURE_OF.get(f.worst.kind, "verdicts.png")
        if fig in files:
            links.append((fig, fig))
        where = f"under '{f.relation}'" if f.relation else f.context
        if f.other and f.kind in ("cross-context difference", "cross-device difference"):
            where = f"{f.other} vs {f.context if f.kind == 'cross-context difference' else f.device}"
        items.append({"f": f, "anchor": f"finding-{f.id}", "where": where, "size": size_lines(f),
                      "replay": f.replay(), "replay_note": _replay_note(f), "export": f.export(), "links": links,
                      "also": [s for s in f.subjects if s != f.subject]})
    return items


def _headline_items(view: ReportView, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One card per headline: its lead finding's item shown in full, the other findings' items beneath."""
    by_id = {i["f"].id: i for i in items}
    return [{**by_id[h.lead.id], "h": h, "anchor": f"finding-{h.lead.id}", "rest": [by_id[f.id] for f in h.findings[1:]]}
            for h in view.headlines()]


def _context(view: ReportView) -> dict[str, Any]:
    items = _finding_items(view)
    heads = _headline_items(view, items)
    main = [i for i in heads if i["f"].classification != Classification.CONTROL]
    controls = [i for i in heads if i["f"].classification == Classification.CONTROL]
    matrix = matrix_frame(view.cells)
    files = [(p, _FILE_NOTES.get(p, "")) for p in view.files if not p.startswith(("cases/", "arrays/"))]
    n_cases = sum(p.startswith("cases/") for p in view.files)
    return {
        "v": view, "gate": view.gate_line(), "lines": list(view.lines), "shown": main[:SHOWN_FINDINGS],
        "more": max(len(main) - SHOWN_FINDINGS, 0), "controls": controls, "n_findings": len(items),
        "n_headlines": len(heads),
        "matrix": matrix, "files": files, "n_cases": n_cases, "legend": [(v, "" if _MARK[v].lower() == v.split()[0] else _MARK[v], c)
                                                        for v, c in VERDICT_COLOURS.items()],
        "ulp_examples": [ulp_example("float32", 1.0), ulp_example("float32", 1e-6)],
        "classes": list(Classification),
    }


def summary_html(view: ReportView) -> str:
    """The report's page: the gate verdict, the findings (controls folded), how to read the numbers, the
    matrix, the figures, the files and the environment."""
    ctx = _context(view)
    m = ctx["matrix"]
    # each matrix cell coloured by its own verdict, its values in its hover title
    ctx["matrix_html"] = _matrix_html(m, matrix_frame(view.cells, "verdict"), matrix_frame(view.cells, "title")) \
        if len(m) else "<p><em>nothing ran</em></p>"
    inv = invariance_frame(view.cells)
    ctx["invariance_html"] = html_table(inv, colours={"verdict": "verdict"})
    ctx["environment_html"] = html_table(view.environment)
    return _env().get_template("summary.html.j2").render(**ctx)


def _matrix_html(text: pd.DataFrame, verdicts: pd.DataFrame, titles: pd.DataFrame) -> str:
    rows = []
    for s in text.index:
        rows.append({"head": s, "cells": [{"text": text.at[s, c], "bg": colour(verdicts.at[s, c]) if verdicts.at[s, c]
                                           else "", "code": False, "title": titles.at[s, c]} for c in text.columns]})
    return _env().get_template("table.html.j2").render(columns=list(text.columns), index_name="subject", rows=rows,
                                                       cls="matrix")


def summary_md(view: ReportView) -> str:
    """The same report in Markdown (the figures linked, not embedded)."""
    ctx = _context(view)
    ctx["matrix_md"] = md_table(ctx["matrix"], index=True) if len(ctx["matrix"]) else "_nothing ran_"
    ctx["invariance_md"] = md_table(invariance_frame(view.cells))
    ctx["environment_md"] = md_table(view.environment)
    return _env().get_template("summary.md.j2").render(**ctx)


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


# ---------------------------------------------------------------------------------------------- figures


def preload() -> None:
    """:func:`preload_figures` and :func:`compile_templates`: what a report's process does beside the first runs
    where no :class:`~harness.outputs.drawing.FigureServer` imports matplotlib in its own."""
    compile_templates()
    preload_figures()


def compile_templates() -> None:
    """Compile the page's templates (a tenth of a second that the report's end no longer waits for). A failure
    here is left to the page, which reports it."""
    try:
        env = _env()
        for name in env.list_templates():
            env.get_template(name)
    except Exception:  # noqa: BLE001 - compiled again where they are used, failing there with the reason
        pass


def preload_figures() -> None:
    """Import what the figures need (matplotlib's figure and Agg canvas: a third of a second) and draw one small
    figure to PNG (fonts, a log axis), so that children forked from this process afterwards draw at once
    (:func:`harness.outputs.tables.start_figures`). A failure here is left to the drawing, which reports it."""
    try:
        fig = _figure(1.0, 1.0)
        ax = fig.add_subplot(1, 1, 1)
        _log_scale(ax, "y")
        ax.plot([1.0, 10.0], [1.0, 100.0])
        ax.set_title("preload")
        _png(fig)
    except Exception:  # noqa: BLE001 - drawn again where it counts, and failing there with its reason
        pass


def preloaded() -> bool:
    """Whether this process has imported the figures' plotting library (:func:`preload`)."""
    return "matplotlib.backends.backend_agg" in sys.modules


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _role_rules(ax: Any, rows: Sequence[str], cells: pd.DataFrame | None) -> None:
    # implementations, controls and oracles apart: a rule where the role changes
    if cells is None or not len(cells):
        return
    role = dict(zip(cells["subject"], cells["role"]))
    for i in range(1, len(rows)):
        if role.get(rows[i]) != role.get(rows[i - 1]):
            ax.axhline(i - 0.5, color="#333", lw=1.2)


#: Digits and minus as Unicode superscripts: ``10⁻⁶`` is plain text, drawn without matplotlib's mathtext.
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_text(x: float) -> str:
    """``1e-06`` -> ``"10⁻⁶"``, ``0.002`` -> ``"2×10⁻³"``: a log axis's tick label as plain text."""
    if not math.isfinite(x) or x == 0:
        return f"{x:g}"
    e = math.floor(math.log10(abs(x)))
    m = abs(x) / 10.0 ** e
    if m >= 9.9995:  # log10 rounded down a power of ten
        e, m = e + 1, m / 10.0
    mant = "" if abs(m - 1.0) < 5e-4 else f"{m:.3g}×"
    return f"{'−' if x < 0 else ''}{mant}10{str(e).translate(_SUPERSCRIPT)}"


def _log_scale(ax: Any, which: str) -> None:
    """A log axis whose tick labels are plain text (:func:`power_text`), on the ticks matplotlib labels: its own
    labels are mathtext, whose parser costs a log figure a third of its drawing time."""
    from matplotlib.ticker import LogFormatter

    class PowerLabels(LogFormatter):
        def __call__(self, x: float, pos: Any = None) -> str:
            return power_text(x) if super().__call__(x, pos) else ""

    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_formatter(PowerLabels(10.0))
    axis.set_minor_formatter(PowerLabels(10.0, labelOnlyBase=False))


def _plain_ticks(ax: Any) -> None:
    # subject names are names, not TeX: a "$" or "_" in a plug-in's name must not start math mode
    for t in [*ax.get_xticklabels(), *ax.get_yticklabels()]:
        t.set_parse_math(False)


def _png(fig: Any) -> bytes:
    import matplotlib

    buf = io.BytesIO()
    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    if isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine):
        # tight_layout() placed the axes and left a placeholder engine behind, and savefig draws the whole
        # figure once more for any engine before it draws to the file (a third of a figure's time): no engine.
        with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
            fig.set_layout_engine(None)
    with matplotlib.rc_context({"text.usetex": False}):  # a user's matplotlibrc must not hand names to TeX
        fig.savefig(buf, format="png")
    return buf.getvalue()


def plot_divergence(divergence: pd.DataFrame, cells: pd.DataFrame | None = None) -> bytes:
    """A heatmap of the worst ULP distance per subject x axis (repeat, process, context, device, relation),
    log scale, every cell annotated ("=" where every comparison was bit-identical, blank: not compared); the
    subjects in :func:`subject_order` of ``cells`` (the matrix's order); about 1200 x 500 px."""
    axes_order = ["repeat", "process", "context", "device", "baseline", "relation"]
    present = set(divergence["subject"]) if len(divergence) else set()
    ordered = [s for s in subject_order(cells) if s in present] if cells is not None else []
    subjects = ordered + sorted(present - set(ordered))
    axes = [a for a in axes_order if len(divergence) and a in set(divergence["axis"])]
    fig = _figure(12, max(3.0, 0.32 * len(subjects) + 1.6))
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title("Worst ULP distance per subject and axis of comparison (=: always bit-identical; blank: not "
                 "compared)", parse_math=False)
    if not subjects:
        ax.text(0.5, 0.5, "nothing was compared", ha="center", va="center", transform=ax.transAxes)
        return _png(fig)
    grid = np.full((len(subjects), len(axes)), np.nan)
    for r in divergence.itertuples():
        grid[subjects.index(r.subject), axes.index(r.axis)] = float(r.worst_ulp)
    shown = np.log10(1 + np.where(grid >= 2**64 - 1, 1e20, grid))
    im = ax.imshow(np.ma.masked_invalid(shown), aspect="auto", cmap="YlOrRd", vmin=0, vmax=max(6.0, np.nanmax(shown)))
    for i in range(len(subjects)):
        for j in range(len(axes)):
            v = grid[i, j]
            if np.isnan(v):
                continue
            ax.text(j, i, "=" if v == 0 else _ulp_text(v), ha="center", va="center", fontsize=9,
                    color="white" if shown[i, j] > 4 else "black", parse_math=False)
    ax.set_xticks(range(len(axes)), axes, fontsize=10)
    ax.set_yticks(range(len(subjects)), subjects, fontsize=9)
    _plain_ticks(ax)
    _role_rules(ax, subjects, cells)
    fig.colorbar(im, ax=ax, label="log10(1 + worst ULP)")
    fig.tight_layout()
    return _png(fig)


def plot_matrix(cells: pd.DataFrame) -> bytes:
    """The verdict matrix as a figure: one row per subject, one column per device x context or relation, each
    cell in its verdict's colour with its mark and worst ULP; width follows the columns (at most ~1300 px)."""
    from matplotlib.colors import ListedColormap

    text = matrix_frame(cells)
    names = list(VERDICT_COLOURS)
    rows, cols = (list(text.index), list(text.columns)) if len(text) else ([], [])
    fig = _figure(min(14.0, 4.4 + 0.9 * max(len(cols), 1)), max(2.8, 0.3 * len(rows) + 2.2))
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title("Verdict per subject x device, context and relation (number: worst ULP, or error / allowed "
                 "with ×)", fontsize=11, parse_math=False)
    if not rows:
        ax.text(0.5, 0.5, "nothing ran", ha="center", va="center", transform=ax.transAxes)
        return _png(fig)
    verdict = matrix_frame(cells, "verdict").reindex(index=rows, columns=cols)
    codes = verdict.map(lambda v: names.index(v) if isinstance(v, str) and v in names else np.nan).to_numpy(float)
    ax.imshow(np.ma.masked_invalid(codes), aspect="auto", cmap=ListedColormap([VERDICT_COLOURS[n] for n in names]),
              vmin=-0.5, vmax=len(names) - 0.5)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax.text(j, i, text.loc[r, c], ha="center", va="center", fontsize=7, parse_math=False)
    ax.set_xticks(range(len(cols)), cols, rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    _plain_ticks(ax)
    _role_rules(ax, rows, cells)
    from matplotlib.patches import Patch

    seen = [n for n in names if (verdict == n).any().any()]
    handles = [Patch(facecolor=VERDICT_COLOURS[n], edgecolor="#999", label=f"{_MARK[n]}  {n}") for n in seen]
    handles.append(Patch(facecolor="white", edgecolor="#999", label="blank: not run in this column"))
    ax.legend(handles=handles, title="key: verdict of the cell", loc="upper left", bbox_to_anchor=(1.01, 1.0),
              fontsize=8, title_fontsize=8, frameon=False)
    fig.tight_layout()
    return _png(fig)


def plot_error_ratio(oracle_errors: pd.DataFrame) -> bytes:
    """Error / allowed against the float64 oracle by input size, log-log, one colour per family (the subject
    name's first part: ``chainer``, ``espnet``, ...), with the tolerance line at 1 labelled; about 1200 x 500 px."""
    return _png(error_ratio_figure(oracle_errors))


def error_ratio_figure(oracle_errors: pd.DataFrame) -> Any:
    """The figure :func:`plot_error_ratio` draws (a matplotlib ``Figure``)."""
    fig = _figure(12, 5)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xlabel("case size (elements)")
    ax.set_ylabel("error / allowed (1 = at the tolerance)")
    ax.set_title("Error against the float64 oracle, by input size (every tensor of every run)")
    t = oracle_errors.dropna(subset=["error_ratio", "case_size"]) if len(oracle_errors) else oracle_errors
    if not len(t):
        ax.text(0.5, 0.5, "no result was compared with an oracle", ha="center", va="center", transform=ax.transAxes)
        return fig
    floor = 1e-6
    _log_scale(ax, "x")
    _log_scale(ax, "y")
    groups = t.groupby(t["subject"].str.split(".").str[0], sort=True)
    for i, (prefix, g) in enumerate(groups):
        q = g["error_ratio"].to_numpy(dtype=float)
        size = g["case_size"].to_numpy(dtype=float)
        ax.scatter(np.maximum(size, 1), np.clip(q, floor, None), s=10, alpha=0.5, color=f"C{i}", label=prefix)
    ax.axhline(1.0, color="#d55e00", lw=1.5, ls="--", label="tolerance (error = allowed)")
    ax.legend(fontsize=9, loc="lower right", title=f"families (an exact result is drawn at {floor:g})",
              title_fontsize=9)
    for t_ in ax.get_legend().get_texts():
        t_.set_parse_math(False)
    # Fixed margins (the labels are fixed text, the log ticks powers of ten): tight_layout measured every log
    # tick of both axes first, about half of this figure's drawing time.
    fig.subplots_adjust(left=0.065, right=0.985, bottom=0.11, top=0.925)
    return fig


# ---------------------------------------------------------------------------------------------- retention

_RUN_DIR = re.compile(r"^\d{8}T\d{6}Z-\d+$")


def prune_reports(base: str = "reports", keep: int = 10) -> list[str]:
    """Delete the oldest run directories of ``base`` beyond the newest ``keep`` (run directories only: names
    like ``20261202T215718Z-1234``; never ``README.md``, ``baselines/``, ``latest`` or what it points to).

    Only finished, idle runs go: a directory without its finished marker (:data:`FINISHED`, written last by a
    report) or whose ``.lock`` another process holds (a report running, or being resumed, now) is kept, and
    the lock is held while it is deleted so that no run can start writing into it meanwhile. Returns what
    was deleted."""
    if keep < 0:
        from harness.core.errors import InvalidArgument

        raise InvalidArgument(f"keep={keep} must be >= 0")
    if not os.path.isdir(base):
        return []
    latest = os.path.realpath(os.path.join(base, "latest"))
    runs = sorted(n for n in os.listdir(base) if _RUN_DIR.match(n) and os.path.isdir(os.path.join(base, n))
                  and not os.path.islink(os.path.join(base, n)))
    finished = [n for n in runs if os.path.exists(os.path.join(base, n, FINISHED))]
    doomed = [n for n in finished[:max(len(finished) - keep, 0)]
              if os.path.realpath(os.path.join(base, n)) != latest]
    gone = []
    for n in doomed:
        if _remove_if_idle(os.path.join(base, n)):
            gone.append(n)
    return gone


#: The file a report writes last into its run directory: a directory without it is not finished (running,
#: interrupted, or being resumed) and is never pruned.
FINISHED = "timings.json"


def _remove_if_idle(path: str) -> bool:
    """Delete ``path`` only while holding its ``.lock`` (non-blocking): a run holding it is left alone."""
    import fcntl

    lock = os.path.join(path, ".lock")
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        fd = None  # a run that never locked (an old report): nothing can be writing into it through the lock
    except OSError:
        return False
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # in use
            if not os.path.exists(os.path.join(path, FINISHED)):
                return False  # a resume took it and removed the marker before we locked
        shutil.rmtree(path)
        return True
    finally:
        if fd is not None:
            os.close(fd)
