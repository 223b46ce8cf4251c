"""Section ``xdist``: cases per second of the ``ci`` gate under pytest-xdist ``-n 2`` against ``-n 1``."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from typing import Any, Sequence

from tools.bench.common import PROJECT_ROOT, Row, log, median, ratio

__all__ = ["bench_xdist", "parse_pytest_counts", "run_pytest"]

#: The comparator's unit tests: the quick mode's small workload.
COMPARATOR_TESTS = tuple(f"suites/unit/judge/test_{m}.py" for m in ("ulp", "comparator", "digest", "tolerance"))
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")


def parse_pytest_counts(output: str) -> dict[str, int]:
    """The counts of pytest's final summary line (``3 passed, 1 failed, 2 skipped in 1.2s``)."""
    counts: dict[str, int] = {}
    lines = [ln for ln in output.splitlines() if re.search(r"\bin [0-9.]+s", ln) and _COUNT.search(ln)]
    if not lines:
        return counts
    for n, kind in _COUNT.findall(lines[-1]):
        kind = "error" if kind.startswith("error") else kind
        counts[kind] = counts.get(kind, 0) + int(n)
    return counts


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("PYTEST_") or k == "PYTEST_ADDOPTS")}
    env["HARNESS_PROFILE"] = "ci"  # the ci gate: Hypothesis's ci profile (12 examples, derandomized)
    return env


def run_pytest(args: Sequence[str], workers: int, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "-n", str(workers)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=PROJECT_ROOT, env=_clean_env(), capture_output=True, text=True,
                           timeout=timeout)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as exc:
        rc = 124
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    wall = time.perf_counter() - t0
    counts = parse_pytest_counts(out)
    executed = sum(counts.get(k, 0) for k in ("passed", "failed", "error", "xfailed", "xpassed"))
    return {"cmd": cmd, "rc": rc, "wall": wall, "counts": counts, "executed": executed,
            "tail": out[-2000:]}


def bench_xdist(level: str = "full", rounds: int | None = None, budget_s: float | None = None,
                  quiet: bool = False) -> tuple[list[Row], dict[str, Any]]:
    """Cases per second at -n 2 / at -n 1 (pytest-xdist), interleaved per round. Runs nested pytest
    sessions, so ``smoke`` (what ``make test`` runs) skips it with a reason."""
    if level == "smoke":
        return [Row("xdist", "cases/s at -n 2 / at -n 1", math.nan, "", "cases/s at -n 2", math.nan,
                    "cases/s at -n 1", math.nan, "cases/s", 0, status="skipped",
                    note="skipped in the smoke bench: it runs nested pytest sessions (make bench runs it)")], {}
    quick = level == "quick"
    fallback = [*COMPARATOR_TESTS, "suites/unit/generate/test_strategies.py"]
    if quick:
        workload, why = list(COMPARATOR_TESTS), ("quick mode: "
                                                  "suites/unit/judge/test_{ulp,comparator,digest,tolerance}.py "
                                                  "(HARNESS_PROFILE=ci) as a small workload")
    else:
        workload, why = ["-m", "gate"], "the ci gate: pytest -m gate with HARNESS_PROFILE=ci"
    rounds = rounds or (2 if quick else 3)
    budget_s = budget_s if budget_s is not None else (60.0 if quick else 240.0)
    timeout = 120.0 if quick else 400.0
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    t_start = time.perf_counter()
    for r in range(rounds):
        for w in ((1, 2) if r % 2 == 0 else (2, 1)):
            res = run_pytest(workload, w, timeout)
            if res["rc"] == 5 and workload[:2] == ["-m", "gate"]:  # no tests collected: -m gate selects nothing
                workload, why = fallback, ("-m gate selected nothing: suites/unit/judge/test_{ulp,comparator,digest,"
                                        "tolerance}.py suites/unit/generate/test_strategies.py")
                res = run_pytest(workload, w, timeout)
            runs[w].append(res)
            log(f"xdist round {r + 1}: -n {w}: {res['executed']} cases in {res['wall']:.1f} s (rc {res['rc']})",
                 quiet)
        if r >= 1 and time.perf_counter() - t_start > budget_s:
            break  # at least 2 rounds; stop once the section's time budget is spent
    done = min(len(runs[1]), len(runs[2]))
    rate = {w: [x["executed"] / x["wall"] if x["wall"] > 0 else math.nan for x in runs[w][:done]] for w in (1, 2)}
    speedup = median(ratio(b, a) for a, b in zip(rate[1], rate[2]))
    c1 = runs[1][0]["counts"] if runs[1] else {}
    failed = c1.get("failed", 0) + c1.get("error", 0)
    note = (f"{why}; {runs[1][0]['executed'] if runs[1] else 0} cases executed per run "
            f"({', '.join(f'{v} {k}' for k, v in sorted(c1.items()))}); skipped tests not counted"
            + (f"; {failed} failing tests are still counted as executed cases" if failed else "")
            + f"; ideal on {os.cpu_count()} cores: {min(2, os.cpu_count() or 1)}")
    rows = [Row("xdist", "cases/s at -n 2 / at -n 1", speedup, "cases per second at -n 2 / at -n 1",
                 "cases/s at -n 2", median(rate[2]), "cases/s at -n 1", median(rate[1]), "cases/s", done,
                 target="2 on 2 cores (ideal)", status="ok", note=note),
            Row("xdist", "context: wall at -n 1", math.nan, "", "seconds at -n 1",
                 median(x["wall"] for x in runs[1][:done]), "seconds at -n 2",
                 median(x["wall"] for x in runs[2][:done]), "s", done, status="context",
                 note=" ".join(runs[1][0]["cmd"][1:]) if runs[1] else "")]
    return rows, {"workload": workload, "runs": {str(k): [{kk: vv for kk, vv in x.items() if kk != "tail"}
                                                          for x in v] for k, v in runs.items()},
                  "tails": {str(k): v[-1]["tail"] for k, v in runs.items() if v}}
