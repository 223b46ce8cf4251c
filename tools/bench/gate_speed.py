"""Section ``gate``: the ci gate's wall time when it fails against when it passes.

A failing gate must not cost more than a green one: the ci profile reports a failing example without shrinking it,
and the dossier's commands are printed, not run. The workload is the pytest gate (``pytest -m gate``, the ``ci``
profile, two xdist workers: what ``make test`` runs of it), once as shipped and once with a planted regression
(``--subject-plugin suites.plugins.planted_lstm:SUBJECTS``: ``chainer.NStepLSTM``'s ``hy`` scaled by 1.01, beyond
the oracle's tolerance on every example). The two run back to back in alternating order, a pair per round; the row
is the median of the pairs' ratios. A pair counts only where the green run passed and the planted one failed:
otherwise the row says it was not measured, and why.
"""

from __future__ import annotations

import math
from typing import Any

from tools.bench.common import Row, log, ratio
from tools.bench.xdist import run_pytest

__all__ = ["bench_gate", "PLANTED"]

#: The planted regression the failing runs load.
PLANTED = ("--subject-plugin", "suites.plugins.planted_lstm:SUBJECTS")


def bench_gate(level: str = "full", rounds: int | None = None, quiet: bool = False
               ) -> tuple[list[Row], dict[str, Any]]:
    """Failing gate seconds / green gate seconds, paired per round (nested pytest sessions: skipped in smoke)."""
    item = "failing gate / green gate seconds"
    if level == "smoke":
        return [Row("gate", item, math.nan, "", "failing gate seconds", math.nan, "green gate seconds", math.nan,
                    "s", 0, status="skipped",
                    note="skipped in the smoke bench: it runs nested pytest sessions (make bench runs it)")], {}
    rounds = rounds or (1 if level == "quick" else 2)
    workload = ["-m", "gate"]
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    refused = ""
    for r in range(rounds):
        order = ("green", "failing") if r % 2 == 0 else ("failing", "green")
        got: dict[str, dict[str, Any]] = {}
        for which in order:
            got[which] = run_pytest(workload + (list(PLANTED) if which == "failing" else []), 2, 900.0)
            log(f"gate round {r + 1}: {which}: {got[which]['executed']} cases in {got[which]['wall']:.1f} s "
                f"(rc {got[which]['rc']})", quiet)
        green, failing = got["green"], got["failing"]
        if green["rc"] != 0:
            refused = f"the green gate did not pass (rc {green['rc']}): {green['tail'][-300:]!r}"
        elif failing["rc"] != 1 or not failing["counts"].get("failed"):
            refused = f"the planted regression did not fail the gate (rc {failing['rc']}, {failing['counts']})"
        if refused:
            break
        pairs.append((green, failing))
    raw = {"pairs": [{k: {kk: vv for kk, vv in v.items() if kk != "tail"} for k, v in
                      (("green", g), ("failing", f))} for g, f in pairs]}
    if refused or not pairs:
        return [Row("gate", item, math.nan, "", "failing gate seconds", math.nan, "green gate seconds", math.nan,
                    "s", 0, status="not measured", note=refused or "no round ran")], raw
    ratios = [ratio(f["wall"], g["wall"]) for g, f in pairs]
    mid = sorted(range(len(pairs)), key=lambda i: ratios[i])[len(pairs) // 2]
    green, failing = pairs[mid]
    value = ratios[mid]
    note = (f"pytest -m gate, HARNESS_PROFILE=ci, -n 2; failing: {' '.join(PLANTED)} ({failing['counts']}); "
            f"green: {green['counts']}; pairs " + ", ".join(f"{f['wall']:.1f} s / {g['wall']:.1f} s"
                                                            for g, f in pairs))
    return [Row("gate", item, value, "failing gate wall / green gate wall, same round", "failing gate seconds",
                failing["wall"], "green gate seconds", green["wall"], "s", len(pairs), target="<= 1.0",
                status="met" if value <= 1.0 else "missed", note=note)], raw
