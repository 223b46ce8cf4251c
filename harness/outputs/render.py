"""What a person reads: the report's page and its Markdown twin, and the one escaping and table per format.

One renderer: the page and the Markdown summary are Jinja2 templates (``harness/outputs/templates/``) over one
:class:`~harness.outputs.page_view.ReportView`; one escaping per format (HTML: Jinja's autoescape; Markdown:
:func:`md_escape`), one table function per format (:func:`html_table`, :func:`md_table`, also used by the
audit's pages). Verdict lines are ``(Verdict or Classification, text)`` pairs, coloured by the verdict
(:mod:`harness.outputs.palette`), never by what the text says. The matrix, the finding cards, the figures and
the terminal's view are their own modules (:mod:`~harness.outputs.matrix`, :mod:`~harness.outputs.finding_cards`,
:mod:`~harness.outputs.figures`, :mod:`~harness.outputs.terminal`).

Pure: a view in, strings out (the caller writes them).
"""

from __future__ import annotations

import base64
import math
import os
import re
from functools import lru_cache
from typing import Any, Mapping, Sequence
from urllib.parse import quote

import numpy as np
import pandas as pd

from harness.judge.findings import Classification
from harness.outputs.figures import preload_figures
from harness.outputs.finding_cards import finding_items, headline_items
from harness.outputs.matrix import invariance_frame, matrix_frame
from harness.outputs.page_view import ReportView
from harness.outputs.palette import MARKS, VERDICT_COLOURS, colour

__all__ = ["summary_html", "summary_md", "md_escape", "md_table", "html_table", "SHOWN_FINDINGS", "ulp_example",
           "preload", "compile_templates"]


#: The page shows this many findings before the controls (findings.csv and findings.json have them all).
SHOWN_FINDINGS = 30


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


def ulp_example(dtype: str = "float32", near: float = 1.0) -> str:
    """What one ULP is as a value, computed: ``float32 near 1: 1 ULP = 1.19e-07``."""
    t = np.dtype(dtype).type
    return f"{dtype} near {near:g}: 1 ULP = {float(np.spacing(t(near))):.3g}"


_FILE_NOTES = {
    "summary.html": "this page", "summary.md": "this report in Markdown",
    "cells.csv": "the verdict matrix, one row per cell", "findings.csv": "every finding, its commands",
    "findings.json": "every finding as a record", "summary.csv": "per subject x device x context",
    "results.csv.gz": "one row per tensor: every measure", "environment.json": "the fingerprint",
    "campaign.json": "the settings", "corpus.jsonl": "the cases", "timings.json": "where the time went",
    "trajectories.csv": "every step of every trajectory compared, and of its baseline",
}


def _context(view: ReportView) -> dict[str, Any]:
    items = finding_items(view)
    heads = headline_items(view, items)
    main = [i for i in heads if i["f"].classification != Classification.CONTROL]
    controls = [i for i in heads if i["f"].classification == Classification.CONTROL]
    matrix = matrix_frame(view.cells)
    files = [(p, _FILE_NOTES.get(p, "")) for p in view.files if not p.startswith(("cases/", "arrays/"))]
    n_cases = sum(p.startswith("cases/") for p in view.files)
    return {
        "v": view, "gate": view.gate_line(), "lines": list(view.lines), "shown": main[:SHOWN_FINDINGS],
        "more": max(len(main) - SHOWN_FINDINGS, 0), "controls": controls, "n_findings": len(items),
        "n_headlines": len(heads),
        "matrix": matrix, "files": files, "n_cases": n_cases,
        "legend": [(v, "" if MARKS[v].lower() == v.split()[0] else MARKS[v], c) for v, c in VERDICT_COLOURS.items()],
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
    ctx["trajectories_html"] = html_table(_trajectory_frame(view))
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
    ctx["trajectories_md"] = md_table(_trajectory_frame(view))
    return _env().get_template("summary.md.j2").render(**ctx)


def _trajectory_frame(view: ReportView) -> pd.DataFrame:
    from harness.outputs.trajectory_files import SUMMARY_COLUMNS

    return pd.DataFrame(list(view.trajectories), columns=list(SUMMARY_COLUMNS))


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
