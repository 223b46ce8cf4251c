"""Section ``make``: ``make report`` / ``make test`` times where they were measured (context only)."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from tools.bench.common import PROJECT_ROOT, Row, ratio

__all__ = ["bench_make_times"]

def bench_make_times(reports_dir: str | None = None) -> tuple[list[Row], dict[str, Any]]:
    """``make report`` from ``reports/latest/timings.json``, ``make test`` from
    ``$HARNESS_MAKE_TEST_SECONDS`` or ``reports/make-test-seconds.txt``; "not measured in this run" otherwise."""
    reports_dir = reports_dir or os.path.join(PROJECT_ROOT, "reports")
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    tpath = os.path.join(reports_dir, "latest", "timings.json")
    timings = None
    if os.path.exists(tpath):
        try:
            with open(tpath, encoding="utf-8") as f:
                timings = json.load(f)
        except (OSError, json.JSONDecodeError):
            timings = None
    if timings and "total" in timings:
        raw["report"] = timings
        subj = float(timings.get("subject", 0.0))
        rows.append(Row("make", "make report: total / subject time", ratio(timings["total"], subj),
                         "report total / subjects' forward+backward (same run, oracles included)",
                         "make report total seconds", float(timings["total"]), "subject seconds", subj, "s", 1,
                         status="measured", note=f"from {os.path.relpath(tpath, PROJECT_ROOT)}; campaign "
                                                 f"{timings.get('campaign', math.nan):.1f} s, report writing "
                                                 f"{timings.get('report_writing', math.nan):.1f} s"))
    else:
        rows.append(Row("make", "make report", math.nan, "", "make report total seconds", math.nan, "", math.nan,
                         "s", 0, status="not measured",
                         note="not measured in this run (no reports/latest/timings.json)"))
    secs: float | None = None
    source = ""
    env = os.environ.get("HARNESS_MAKE_TEST_SECONDS")
    if env:
        try:
            secs, source = float(env), "$HARNESS_MAKE_TEST_SECONDS"
        except ValueError:
            secs = None
    fpath = os.path.join(reports_dir, "make-test-seconds.txt")
    if secs is None and os.path.exists(fpath):
        try:
            with open(fpath, encoding="utf-8") as f:
                secs, source = float(f.read().strip().split()[0]), os.path.relpath(fpath, PROJECT_ROOT)
        except (OSError, ValueError, IndexError):
            secs = None
    if secs is not None:
        raw["test_seconds"] = secs
        rows.append(Row("make", "make test", math.nan, "", "make test seconds", secs, "", math.nan, "s", 1,
                         status="context", note=f"from {source} (absolute time: context only)"))
    else:
        rows.append(Row("make", "make test", math.nan, "", "make test seconds", math.nan, "", math.nan, "s", 0,
                         status="not measured", note="not measured in this run"))
    return rows, raw
