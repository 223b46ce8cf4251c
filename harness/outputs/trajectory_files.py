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
from typing import Any, Sequence

from harness.judge.trajectory import TABLE_COLUMNS, Divergence, table_rows
from harness.outputs.figures import _figure, _log_scale, _png

__all__ = ["plot_trajectory", "write_trajectory", "TABLE_NAME", "FIGURE_NAME", "VERDICT_NAME", "SUMMARY_COLUMNS",
           "summary_rows", "step_rows", "shown_pair", "figure_job", "BASELINE_LABEL"]

TABLE_NAME = "trajectory.csv"
FIGURE_NAME = "trajectory.png"
VERDICT_NAME = "verdict.txt"

#: How a table and a figure name the one-ULP instability baseline.
BASELINE_LABEL = "one ULP in one weight"

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


# --------------------------------------------------------------------------- a campaign's trajectories

#: The report's trajectory table: one row per model case x subject x device compared between two contexts.
SUMMARY_COLUMNS = ("subject", "device", "case", "contexts", "steps", "first differing step", "what differs first",
                   "first node", "rel L2 at the end", "loss diff at the end", "baseline rel L2", "baseline loss diff",
                   "verdict")


def _g(v: float | None) -> str:
    return "" if v is None else f"{v:.2g}"


def summary_rows(found: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per :class:`~harness.execute.trajectories.CampaignTrajectory` (:data:`SUMMARY_COLUMNS`): where
    the pair first differs and how far apart it ends, beside the baseline; "not compared: why" where it was not."""
    rows = []
    for t in found:
        row: dict[str, Any] = {c: "" for c in SUMMARY_COLUMNS}
        row.update({"subject": t.subject, "device": t.device, "case": t.case_id, "contexts": t.label})
        if t.pair is None:
            row["verdict"] = f"not compared: {t.reason}"
            rows.append(row)
            continue
        first, end, last = t.pair.first_differing, t.pair.last_measured, t.pair.last
        row.update({"steps": t.pair.steps, "verdict": t.line})
        if first is not None:
            row.update({"first differing step": first.step, "what differs first": "+".join(first.differs),
                        "first node": t.node, "rel L2 at the end": _g(end.rel_l2 if end else None),
                        "loss diff at the end": _g(last.loss_diff if last else None)})
        if t.baseline is not None:
            b_end, b_last = t.baseline.last_measured, t.baseline.last
            row.update({"baseline rel L2": _g(b_end.rel_l2 if b_end else None),
                        "baseline loss diff": _g(b_last.loss_diff if b_last else None)})
        rows.append(row)
    return rows


def step_rows(found: Sequence[Any]) -> list[dict[str, Any]]:
    """Every step of every compared pair and of its baseline (:data:`~harness.judge.trajectory.TABLE_COLUMNS`,
    each comparison named ``subject device case: A vs B`` or ``...: one ULP in one weight``)."""
    named: list[tuple[str, Divergence]] = []
    for t in found:
        head = f"{t.subject} {t.device} {t.case_id}"
        if t.pair is not None:
            named.append((f"{head}: {t.label}", t.pair))
        if t.baseline is not None:
            named.append((f"{head}: {BASELINE_LABEL}", t.baseline))
    return table_rows(named)


def shown_pair(found: Sequence[Any]) -> Any | None:
    """The trajectory the report draws: the compared pair that ends furthest apart (a differing one before any
    identical one), None where none was compared."""
    compared = [t for t in found if t.pair is not None]
    if not compared:
        return None

    def how_far(t: Any) -> tuple[bool, float]:
        end = t.pair.last_measured
        return (not t.pair.identical, end.rel_l2 if end is not None and end.rel_l2 is not None else 0.0)

    return max(compared, key=how_far)


def figure_job(found: Sequence[Any]) -> tuple[str, str, tuple[Any, ...]] | None:
    """The report's trajectory figure as a drawing job (:data:`harness.outputs.drawing.Job`): :func:`plot_trajectory`
    of :func:`shown_pair` beside its baseline, its verdict line the title; None where no pair was compared."""
    t = shown_pair(found)
    if t is None:
        return None
    pair = (f"{t.subject}: {t.label}", t.pair)
    base = (BASELINE_LABEL, t.baseline) if t.baseline is not None else None
    return (FIGURE_NAME, "trajectory", (pair, base, t.line))
