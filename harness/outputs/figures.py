"""The report's figures, drawn with matplotlib to PNG bytes: the verdict matrix, the divergence heatmap, the error
against the oracle by size.

Kept apart from the page: the figures are drawn in children (:mod:`harness.outputs.drawing`) that import
matplotlib and never render a page. Plain text everywhere (no mathtext, no TeX): subject names are names.
Pure: frames in, PNG bytes out (the caller writes them).
"""

from __future__ import annotations

import io
import math
import sys
from typing import Any, Sequence

import numpy as np
import pandas as pd

from harness.outputs.matrix import matrix_frame, subject_order, ulp_text
from harness.outputs.palette import MARKS, VERDICT_COLOURS

__all__ = ["preload_figures", "preloaded", "power_text", "plot_divergence", "plot_matrix", "plot_error_ratio",
           "error_ratio_figure"]


def preload_figures() -> None:
    """Import what the figures need (matplotlib's figure and Agg canvas: a third of a second) and draw one small
    figure to PNG (fonts, a log axis), so that children forked from this process afterwards draw at once
    (:func:`harness.outputs.report_files.start_figures`). A failure here is left to the drawing, which reports it."""
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
    return _palette_png(buf.getvalue())


def _palette_png(data: bytes) -> bytes:
    """A PNG as 256 colours (no dithering): the figures are flat fills, lines and antialiased text, which look
    the same in a palette, and the file is about a third of the RGBA one (each figure is kept twice: as a file
    and inside summary.html)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        quantized = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MAXCOVERAGE,
                                               dither=Image.Dither.NONE)
    out = io.BytesIO()
    quantized.save(out, format="png")
    return out.getvalue()


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
            ax.text(j, i, "=" if v == 0 else ulp_text(v), ha="center", va="center", fontsize=9,
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
    handles = [Patch(facecolor=VERDICT_COLOURS[n], edgecolor="#999", label=f"{MARKS[n]}  {n}") for n in seen]
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
