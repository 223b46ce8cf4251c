"""A trajectory's files: its table (``trajectory.csv``), its figure (``trajectory.png``) and its verdict line.

The figure draws, against the step, how far the compared pair's parameters are apart (relative L2, at the steps
that kept them) and how far its losses are (points: crosses for the baseline), on a log scale, with the one-ULP
instability baseline dashed beside them: the scale that says whether a divergence is larger than what training
does with one bit. A step where two runs agree has no point on a log axis; a comparison that never differs says
so in its legend. Pure: divergences in, files out.
"""

from __future__ import annotations

import csv
import math
import pathlib
import textwrap
from typing import Sequence

from harness.judge.trajectory import TABLE_COLUMNS, Divergence, table_rows
from harness.outputs.figures import _figure, _log_scale, _png

__all__ = ["plot_trajectory", "write_trajectory", "TABLE_NAME", "FIGURE_NAME", "VERDICT_NAME"]

TABLE_NAME = "trajectory.csv"
FIGURE_NAME = "trajectory.png"
VERDICT_NAME = "verdict.txt"

#: The pair's colour and the baseline's (Okabe-Ito: vermillion, blue).
_PAIR, _BASE = "#d55e00", "#0072b2"


def _points(div: Divergence, what: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for d in div.distances:
        v = d.rel_l2 if what == "rel_l2" else d.loss_diff
        if v is not None and math.isfinite(v) and v > 0:
            xs.append(d.step + 1)  # steps done: a log x axis starts at 1
            ys.append(float(v))
    return xs, ys


def plot_trajectory(pair: tuple[str, Divergence], baseline: tuple[str, Divergence] | None, title: str) -> bytes:
    """Two panels (parameters' relative L2 distance; loss difference) against the steps done, log-log; the
    baseline dashed. About 1100 x 420 px."""
    fig = _figure(11, 4.6)
    fig.suptitle("\n".join(textwrap.wrap(title, 150)[:3]), fontsize=9)
    for i, (what, label) in enumerate((("rel_l2", "parameters: relative L2 distance"),
                                       ("loss", "loss: absolute difference"))):
        ax = fig.add_subplot(1, 2, i + 1)
        drawn = False
        for named, style, colour in ((pair, "-", _PAIR), (baseline, "--", _BASE)):
            if named is None:
                continue
            name, div = named
            xs, ys = _points(div, what)
            if xs and what == "rel_l2":
                ax.plot(xs, ys, style, marker="o", markersize=3, color=colour, label=name)
                drawn = True
            elif xs:  # a loss difference is often 0 (no point): points only, so no line bridges those steps
                ax.plot(xs, ys, linestyle="none", marker="o" if style == "-" else "x", markersize=4, color=colour,
                        label=name)
                drawn = True
            else:
                ax.plot([], [], style, color=colour, label=f"{name}: no difference at any step")
        if drawn:
            _log_scale(ax, "y")
            _log_scale(ax, "x")
        ax.set_xlabel("steps done")
        ax.set_ylabel(label)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return _png(fig)


def write_trajectory(out: pathlib.Path, named: Sequence[tuple[str, Divergence]], line: str,
                     figure: bytes | None) -> list[pathlib.Path]:
    """The table (every step of every comparison), the figure and the verdict line under ``out``; the paths."""
    out.mkdir(parents=True, exist_ok=True)
    table = out / TABLE_NAME
    with table.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(TABLE_COLUMNS))
        w.writeheader()
        w.writerows(table_rows(named))
    written = [table]
    if figure is not None:
        (out / FIGURE_NAME).write_bytes(figure)
        written.append(out / FIGURE_NAME)
    (out / VERDICT_NAME).write_text(line + "\n")
    written.append(out / VERDICT_NAME)
    return written
