"""How compare and merge write their tables: through the report's renderer (:mod:`harness.outputs.render`: one
Markdown escaping, one HTML table), and the heatmap.
"""

from __future__ import annotations

import base64
import html
import io
import math
from typing import Any, Mapping

from harness.outputs import render

__all__ = ["md_text", "md_table", "fmt_num", "present", "styled_html", "escaped_style", "png", "changed_heatmap",
           "html_page"]


# One escaping per format, the report's: a Markdown cell through render.md_escape, a table through render.md_table.
md_text = render.md_escape
md_table = render.md_table


def fmt_num(v: Any, kind: str) -> str:
    """``-`` for a missing value, ``inf``, a whole ULP count (``kind="ulp"``) or three significant digits."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    if kind == "ulp":
        return str(int(v))
    return f"{v:.3g}"


_ULP_COLUMNS = ("max_ulp", "sample_max_ulp", "sample_median_ulp")
_REL_COLUMNS = ("max_rel", "max_abs", "norm_rel_change")


def present(df: Any) -> Any:
    """A copy of a compare table with its numbers as text (see :func:`fmt_num`)."""
    out = df.copy()
    for col in _ULP_COLUMNS:
        if col in out:
            out[col] = [fmt_num(v, "rel" if col == "sample_median_ulp" else "ulp") for v in out[col]]
    for col in _REL_COLUMNS:
        if col in out:
            out[col] = [fmt_num(v, "rel") for v in out[col]]
    return out


def styled_html(df: Any, colours: Mapping[str, str] | None = None, colour_col: str = "verdict") -> str:
    """An HTML table of ``df`` (the report's one HTML table, escaped), the ``colour_col`` cells coloured by
    ``colours`` (the audit's verdict words -> CSS colour)."""
    return render.html_table(df, colours={colour_col: colour_col} if colours and colour_col in df else None,
                             palette=dict(colours or {}))


def escaped_style(df: Any) -> Any:
    """A pandas Styler with every cell and header HTML-escaped: merge's per-cell colouring by the cell's own
    mark (``=``, ``~``, ``!``) still uses it, the one table :func:`render.html_table` does not colour yet."""
    return df.style.hide(axis="index").format(escape="html").format_index(escape="html", axis=1)


def png(fig: Any) -> str:
    """A matplotlib figure as base64 PNG text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"text.usetex": False}):  # a user's matplotlibrc must not hand names to TeX
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def changed_heatmap(rows: Any) -> str:
    """A base64 PNG: changed-tensor counts, subjects x device/context ("" for no rows)."""
    from matplotlib.figure import Figure

    if not len(rows):
        return ""
    piv = rows.assign(col=rows["device"] + "/" + rows["context"]).pivot_table(
        index="subject", columns="col", values="changed", aggfunc="sum", fill_value=0)
    fig = Figure(figsize=(2.0 + 1.3 * piv.shape[1], 1.0 + 0.42 * piv.shape[0]))
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(piv.values, cmap="Reds", aspect="auto", vmin=0, vmax=max(1, int(piv.values.max())))
    ax.set_xticks(range(piv.shape[1]), labels=list(piv.columns), rotation=30, ha="right")
    ax.set_yticks(range(piv.shape[0]), labels=list(piv.index))
    for i in range(piv.shape[0]):
        for j in range(piv.shape[1]):
            v = int(piv.values[i, j])
            ax.text(j, i, str(v), ha="center", va="center", fontsize=8,
                    color="white" if v > 0.6 * max(1, int(piv.values.max())) else "black")
    ax.set_title("tensors with a changed digest (A vs B)")
    fig.colorbar(im, ax=ax, shrink=0.8)
    # names are drawn as text: a subject or context named "$\\foo{$" is not mathtext (nor TeX)
    for t in [*ax.get_xticklabels(), *ax.get_yticklabels(), *ax.texts, ax.title]:
        t.set_parse_math(False)
    return png(fig)


def html_page(title: str, body: str) -> str:
    """A whole HTML page around ``body`` (already HTML)."""
    return (f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;margin:1.5em} table{border-collapse:collapse;font-size:13px}"
            " td,th{border:1px solid #ccc;padding:2px 6px} .warn{color:#a33}</style></head><body>\n"
            f"<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")
