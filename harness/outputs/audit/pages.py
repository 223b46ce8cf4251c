"""How compare and merge write their tables: Markdown cells, HTML tables (pandas ``Styler``), the heatmap.

Escaping: a Markdown cell escapes ``<``/``>``/``&`` as entities (renderers pass raw HTML through) and ``|``;
an HTML table escapes cells and headers.
"""

from __future__ import annotations

import base64
import html
import io
import math
from typing import Any, Mapping

__all__ = ["md_text", "md_table", "fmt_num", "present", "styled_html", "escaped_style", "png", "changed_heatmap",
           "html_page"]


def md_text(v: Any) -> str:
    """One Markdown table cell or inline text: no newline, no bare ``|``, no raw HTML.

    >>> md_text("a|b <i>")
    'a\\\\|b &lt;i&gt;'
    """
    text = " ".join(str(v).splitlines()) if isinstance(v, str) else str(v)
    return html.escape(text, quote=False).replace("|", "\\|")


def md_table(df: Any) -> str:
    """A DataFrame as a Markdown table, every string cell and header through :func:`md_text`."""
    if not len(df):
        return "(none)"
    safe = df.copy()
    safe.columns = [md_text(c) for c in safe.columns]
    for col in safe.columns:
        if any(isinstance(v, str) for v in safe[col]):
            safe[col] = [md_text(v) if isinstance(v, str) else v for v in safe[col]]
    return safe.to_markdown(index=False)


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


def escaped_style(df: Any) -> Any:
    # pandas' Styler writes cell values and headers raw by default: escape both.
    return df.style.hide(axis="index").format(escape="html").format_index(escape="html", axis=1)


def styled_html(df: Any, colours: Mapping[str, str] | None = None, colour_col: str = "verdict") -> str:
    """An HTML table of ``df``, the ``colour_col`` cells coloured by ``colours`` (value -> CSS colour)."""
    sty = escaped_style(df)
    if colours and colour_col in df:
        sty = sty.map(lambda v: f"background-color: {colours.get(v, '')}", subset=[colour_col])
    return sty.to_html()


def png(fig: Any) -> str:
    """A matplotlib figure as base64 PNG text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
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
    return png(fig)


def html_page(title: str, body: str) -> str:
    """A whole HTML page around ``body`` (already HTML)."""
    return (f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;margin:1.5em} table{border-collapse:collapse;font-size:13px}"
            " td,th{border:1px solid #ccc;padding:2px 6px} .warn{color:#a33}</style></head><body>\n"
            f"<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")
