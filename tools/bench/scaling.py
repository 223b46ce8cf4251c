"""Section ``scaling``: the default campaign at 1x, 4x and 16x the default corpus; time per task and the
overhead ratio at each size, and whether cost is linear in the number of tasks."""

from __future__ import annotations

import math
from typing import Any, Sequence

from tools.bench.common import Row, figure, linear_fit, log, ratio, save_fig, slope
from tools.bench.driver import PARTS
from tools.bench.overhead import TARGET, campaign_round, pair_ratios, paired_rounds

__all__ = ["bench_scaling", "plot_scaling", "FACTORS", "linearity", "ALONE"]

#: Corpus sizes, as multiples of the default corpus.
FACTORS = (1, 4, 16)

#: Cost is called linear when the marginal cost per task of the largest step is within this factor of the
#: smallest step's (and the straight-line fit explains the points).
_LINEAR_TOLERANCE = 0.25


def linearity(tasks: Sequence[float], walls: Sequence[float]) -> dict[str, Any]:
    """Fit ``wall = a + b * tasks`` and compare the marginal cost per task between consecutive sizes.

    Returns the fit (a: fixed seconds, b: seconds per task, r2), the marginal costs, the log-log exponent of
    wall against tasks, and a one-line verdict: ``linear`` when every marginal cost is within
    :data:`_LINEAR_TOLERANCE` of the first, ``superlinear``/``sublinear`` when the last is above/below.
    """
    a, b, r2 = linear_fit(list(tasks), list(walls))
    pts = sorted(zip(tasks, walls))
    marginal = [ratio(w1 - w0, n1 - n0) for (n0, w0), (n1, w1) in zip(pts, pts[1:])]
    if len(marginal) < 1 or not all(math.isfinite(m) for m in marginal):
        verdict = "not enough sizes to say"
    else:
        drift = ratio(marginal[-1], marginal[0]) - 1.0
        kind = ("linear" if abs(drift) <= _LINEAR_TOLERANCE else "superlinear" if drift > 0 else "sublinear")
        verdict = (f"{kind}: wall = {a:.2f} s + {b * 1e3:.1f} ms x tasks (r2 {r2:.4f}); marginal cost per task "
                   + ", ".join(f"{m * 1e3:.1f} ms" for m in marginal)
                   + f" between consecutive sizes ({drift:+.0%} from the first to the last step)")
    return {"a": a, "b": b, "r2": r2, "marginal": marginal, "exponent": slope(tasks, walls), "verdict": verdict}


#: The sizes whose subjects' time is also measured in one lane, and the pairs of rounds each gets (full and quick
#: levels), each round in lanes then one in one lane (:func:`~tools.bench.overhead.paired_rounds`): the row is
#: the pair of median ratio. The largest size gets one pair: its two rounds take longer than the three pairs of
#: the default size.
ALONE = {1: 3, 2: 3, 4: 3, 16: 1}

#: Pairs of rounds at the default size (``ALONE[1]``).
ROUNDS = ALONE[1]


def _ratio(p: dict[str, float]) -> float:
    """The overhead ratio of a point: against the subjects' time in one lane where it was measured."""
    return ratio(p["total"], p.get("subject_alone", p["subject"]))


def _harness_seconds(p: dict[str, float]) -> float:
    """The one-lane round's wall seconds that are not the subjects' own: in one lane one run goes at a time, so
    the subjects' seconds lie inside the wall and the difference is never negative. A round in lanes has no such
    figure (its subjects' seconds are summed over lanes that ran side by side): NaN there."""
    if "subject_alone" not in p:
        return math.nan
    return max(0.0, p["total_alone"] - p["subject_alone"])


def bench_scaling(level: str = "full", factors: Sequence[int] | None = None, quiet: bool = False
                  ) -> tuple[list[Row], dict[str, Any]]:
    """The rows: per size, time per task and the overhead ratio; then the linearity fit. ``level``: ``full``
    (the default corpus, R=5 + 2 fresh, each size in a fresh interpreter, :data:`ROUNDS` rounds at the sizes
    of :data:`ALONE`), ``quick`` (3 anchor cases per copy) or ``smoke`` (3 anchors, sizes 1x and 2x, R=1 + 0
    fresh, one round each, in this process, no report writing: the overhead section measures that)."""
    smoke = level == "smoke"
    quick = level != "full"
    factors = tuple(factors or ((1, 2) if smoke else FACTORS))
    repeats, fresh = (1, 0) if smoke else (5, 2)
    points = []
    for f in factors:
        if f in ALONE:
            # The targets' sizes: the subjects' own time in one lane (lanes slow each subject a little, see the
            # overhead section), right after each round in lanes; three pairs, the pair of median ratio kept.
            pairs, mid = paired_rounds(f, quick, repeats, fresh, 1 if smoke else ALONE[f],
                                       fresh_interpreter=not smoke, report=not smoke)
            r, a = pairs[mid]
            r["subject_alone"], r["total_alone"] = a["subject"], a["total"]
            r["subject_cpu_alone"], r["cores"] = a.get("subject_cpu", math.nan), a.get("cores", math.nan)
            r["pairs"] = pair_ratios(pairs)
            tried = [p for p, _ in pairs]
        else:
            tried = [campaign_round(f, quick, repeats, fresh, fresh_interpreter=not smoke, report=not smoke)]
            r = tried[0]
        r["factor"], r["rounds"], r["round_totals"] = f, float(len(tried)), [p["total"] for p in tried]
        points.append(r)
        log(f"scaling {f}x: {int(r['tasks'])} tasks in {r['total']:.1f} s, overhead {_ratio(r):.2f}", quiet)
    base = "3 anchor cases" if quick else "the default corpus"
    rows: list[Row] = []
    for p in points:
        n = p["tasks"]
        note = (("smoke: no report writing; " if smoke else "")
                + f"{p['factor']}x {base} ({int(p['cases'])} cases), cpu, context default, R={repeats} + {fresh} "
                f"fresh, {int(n)} tasks, {int(p['runs'])} runs; campaign {p['campaign']:.1f} s, report writing "
                f"{p['report_writing']:.1f} s, worker start-up {p['worker_startup']:.1f} s")
        ov = _ratio(p)
        alone = "subject_alone" in p
        target = f"<= {TARGET}" if alone and not quick else ""
        note += (f"; {int(p['jobs'])} lanes; subject time " + (
            f"measured in one lane (--jobs 1: wall {p['total_alone']:.1f} s, ratio "
            f"{ratio(p['total_alone'], p['subject_alone']):.2f}); the two-lane floor (subjects' CPU seconds in "
            f"one lane {p['subject_cpu_alone']:.1f} s / {p['cores']:g} cores / their one-lane seconds) "
            f"{ratio(p['subject_cpu_alone'] / p['cores'], p['subject_alone']):.2f}" if alone else
            "summed over the lanes, as no round in one lane ran at this size (inflated by running side by side: "
            "the ratio is flattered)"))
        if p["rounds"] > 1:
            note += f"; the pair of median ratio of {p['pairs']} (each in lanes, then in one lane)"
        rows.append(Row("scaling", f"{p['factor']}x: overhead ratio", ov, "campaign wall / subjects' forward+backward",
                        "campaign wall (case building + campaign + measure pass + report writing)", p["total"],
                        "subjects' forward+backward" + (", one lane" if alone else ", summed in lanes"),
                        p["subject_alone"] if alone else p["subject"], "s", int(p["rounds"]), target=target,
                        status=("met" if ov <= TARGET else "missed") if target else "ok", note=note))
        rows.append(Row("scaling", f"{p['factor']}x: seconds per task", ratio(p["total"], n), "campaign wall / tasks",
                        "campaign wall", p["total"], "tasks", n, "s/task", 1, note=note))
        own = p["subject_alone"] if alone else p["subject"]
        rows.append(Row("scaling", f"{p['factor']}x: subject seconds per task", ratio(own, n),
                        "subjects' forward+backward / tasks", "subjects' forward+backward" + (
                            ", one lane" if alone else ", summed in lanes"), own, "tasks", n, "s/task", 1,
                        note=("the row above in one lane cannot go below this; in two lanes, half of it"
                              if alone else "summed over lanes that ran side by side: no floor of the row above")))
    fit = linearity([p["tasks"] for p in points], [p["total"] for p in points])
    last, first = points[-1], points[0]
    rows.append(Row("scaling", "cost per task, largest / smallest size",
                    ratio(ratio(last["total"], last["tasks"]), ratio(first["total"], first["tasks"])),
                    "seconds per task at the largest size / at the smallest", f"s/task at {last['factor']}x",
                    ratio(last["total"], last["tasks"]), f"s/task at {first['factor']}x",
                    ratio(first["total"], first["tasks"]), "", 1, note=fit["verdict"]))
    # The harness's own cost per task, from the one-lane rounds only (the sizes of ALONE): wall minus the
    # subjects' seconds, both measured in that one lane, so numerator and denominator can be checked.
    alone = [p for p in points if "subject_alone" in p]
    own = linearity([p["tasks"] for p in alone], [_harness_seconds(p) for p in alone])
    for p in alone:
        rows.append(Row("scaling", f"{p['factor']}x: harness seconds per task, one lane", ratio(_harness_seconds(p),
                        p["tasks"]), "(one-lane wall - one-lane subjects) / tasks",
                        "one-lane wall - subjects' seconds", _harness_seconds(p), "tasks", p["tasks"], "s/task", 1,
                        note=f"one-lane wall {p['total_alone']:.2f} s, subjects {p['subject_alone']:.2f} s"))
    if len(alone) >= 2:
        lo, hi = alone[0], alone[-1]
        rows.append(Row("scaling", "harness cost per task, largest / smallest size (one lane)",
                        ratio(ratio(_harness_seconds(hi), hi["tasks"]), ratio(_harness_seconds(lo), lo["tasks"])),
                        "harness seconds per task, one lane, at the largest size / at the smallest",
                        f"s/task at {hi['factor']}x", ratio(_harness_seconds(hi), hi["tasks"]),
                        f"s/task at {lo['factor']}x", ratio(_harness_seconds(lo), lo["tasks"]), "", 1,
                        note=own["verdict"] + "; parts in ms per task: " + "; ".join(
                            f"{p['factor']}x " + ", ".join(f"{k} {ratio(p[k], p['tasks']) * 1e3:.1f}"
                                                           for k, _ in PARTS) for p in points)))
    return rows, {"points": points, "fit": fit, "harness_fit": own, "repeats": repeats, "fresh": fresh, "quick": quick}


def plot_scaling(raw: dict[str, Any], path: str) -> str:
    """Two panels, readable at 800 px: wall seconds against tasks (with the straight-line fit), and seconds per
    task and the overhead ratio against the corpus factor."""
    pts = raw["points"]
    fit = raw["fit"]
    fig = figure(8, 3.6)
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    n = [p["tasks"] for p in pts]
    ax1.plot(n, [p["total"] for p in pts], "o", label="campaign wall")
    ax1.plot(n, [p.get("subject_alone", p["subject"]) for p in pts], "s", label="subjects' own (one lane)")
    if math.isfinite(fit["a"]):
        xs = [0.0, max(n)]
        ax1.plot(xs, [fit["a"] + fit["b"] * x for x in xs], "--", color="grey",
                 label=f"{fit['a']:.1f} s + {fit['b'] * 1e3:.0f} ms/task")
    ax1.set_xlabel("tasks")
    ax1.set_ylabel("seconds")
    ax1.set_title("Cost against tasks")
    ax1.legend(fontsize=8)
    f = [p["factor"] for p in pts]
    ax2.plot(f, [_ratio(p) for p in pts], "-o", label="overhead ratio")
    ax2.axhline(TARGET, color="black", ls="--", lw=1, label=f"target {TARGET}")
    ax2.set_xscale("log", base=2)
    ax2.set_xticks(f)
    ax2.set_xticklabels([f"{x}x" for x in f])
    ax2.set_xlabel("corpus size (x default)")
    ax2.set_ylabel("campaign wall / subjects' time")
    ax3 = ax2.twinx()
    ax3.plot(f, [ratio(p["total"], p["tasks"]) * 1e3 for p in pts], ":s", color="#dd8452", label="ms per task")
    ax3.set_ylabel("ms per task", color="#dd8452")
    ax2.set_title("Overhead and time per task")
    h1, l1 = ax2.get_legend_handles_labels()
    h2, l2 = ax3.get_legend_handles_labels()
    ax2.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper right")
    fig.tight_layout()
    return save_fig(fig, path)
