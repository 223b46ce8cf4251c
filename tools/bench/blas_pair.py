"""Rows of section ``overhead``: what two lanes can gain on this machine when each subject's BLAS splits its
products over every core, against the same work with BLAS at one thread.

Two processes each run the same loop of float32 matrix products (:data:`SIDE`; OpenBLAS splits a product of
that size over its threads), started at once, the second :data:`~harness.execute.lanes.BESIDE_NICE` nice levels
lower as the campaign's second lane runs; against one process running the loop alone. The row is the pair's wall
time (until both finish) over twice the lone process's wall: 0.5 is two cores fully used, 1.0 is no gain over one
lane, above 1.0 two lanes lose. Each child runs in the workers' environment (:data:`WORKER_ENV_DEFAULTS`), with
``OPENBLAS_NUM_THREADS`` set to the thread count measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tools.bench.common import Row, log, ratio

__all__ = ["blas_pair_rows", "SIDE", "PRODUCTS"]

#: The products' side (float32, SIDE x SIDE at SIDE x SIDE) and how many each child runs.
SIDE = 256
PRODUCTS = 1500

_BESIDE = "at the second lane's priority (harness.execute.lanes.BESIDE_NICE)"

_CHILD = """
import json, sys, time
import numpy as np
side, products = int(sys.argv[1]), int(sys.argv[2])
a = np.random.default_rng(0).standard_normal((side, side)).astype(np.float32)
a @ a  # BLAS's threads started before the clock
t0, c0 = time.perf_counter(), time.process_time()
for _ in range(products):
    a = np.tanh(a @ a * np.float32(0.01))
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
"""


def _env(threads: int) -> dict[str, str]:
    from harness.core.worker_defaults import WORKER_ENV_DEFAULTS

    env = {**os.environ, **WORKER_ENV_DEFAULTS}
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


def _start(threads: int, nice: int = 0) -> subprocess.Popen[str]:
    def lower() -> None:
        os.nice(nice)

    return subprocess.Popen([sys.executable, "-c", _CHILD, str(SIDE), str(PRODUCTS)], env=_env(threads),
                            stdout=subprocess.PIPE, text=True, preexec_fn=lower if nice else None)


def _result(p: subprocess.Popen[str]) -> dict[str, float]:
    out, _ = p.communicate(timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"BLAS loop exited {p.returncode}")
    return json.loads(out.strip().splitlines()[-1])


def one_round(threads: int) -> dict[str, Any]:
    """The loop alone, then two copies side by side (the second one lower, as lanes run): walls and CPU seconds."""
    from harness.execute.lanes import BESIDE_NICE

    alone = _result(_start(threads))
    pair = [_start(threads), _start(threads, BESIDE_NICE)]
    both = [_result(p) for p in pair]
    return {"alone": alone, "pair": both, "pair_wall": max(b["wall"] for b in both)}


def blas_pair_rows(threads: tuple[int, ...] | None = None, rounds: int = 2, quiet: bool = False
                   ) -> tuple[list[Row], dict[str, Any]]:
    """One row per thread count (default: as many as this machine has cores, then 1): the pair's wall over
    twice the lone loop's, the median of ``rounds`` rounds; and one context row of the CPU seconds it costs."""
    cores = os.cpu_count() or 1
    counts = threads or ((cores, 1) if cores > 1 else (1,))
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    for n in counts:
        got = [one_round(n) for _ in range(max(1, rounds))]
        raw[f"threads{n}"] = got
        ratios = [ratio(g["pair_wall"], 2 * g["alone"]["wall"]) for g in got]
        mid = got[sorted(range(len(got)), key=lambda i: ratios[i])[len(got) // 2]]
        log(f"BLAS at {n} thread(s): pair/serial {', '.join(f'{r:.2f}' for r in ratios)}", quiet)
        rows.append(Row(
            "overhead", f"two lanes' limit with BLAS at {n} thread(s): side by side / one after the other",
            ratio(mid["pair_wall"], 2 * mid["alone"]["wall"]), "pair's wall / (2 x one loop's wall)",
            f"two loops side by side, the second {_BESIDE}", mid["pair_wall"],
            "the loop alone, twice", 2 * mid["alone"]["wall"], "s", len(got), status="context",
            note=f"{PRODUCTS} float32 products of {SIDE} x {SIDE} each, OPENBLAS_NUM_THREADS={n}, the workers' "
                 f"environment; 0.5: both cores used; above 1: two lanes lose to one; rounds "
                 f"{', '.join(f'{r:.2f}' for r in ratios)}"))
        cpu_pair = sum(b["cpu"] for b in mid["pair"])
        rows.append(Row(
            "overhead", f"CPU seconds side by side / alone, BLAS at {n} thread(s)",
            ratio(cpu_pair, 2 * mid["alone"]["cpu"]), "CPU seconds of the pair / (2 x one loop's)",
            "the pair's CPU seconds", cpu_pair, "the loop's CPU seconds alone, twice", 2 * mid["alone"]["cpu"], "s",
            1, status="context", note="above 1: threads spin waiting for a sibling that has no core"))
    return rows, raw

