"""Section ``digest``: the digest algorithms side by side with ``numpy.array_equal`` on two float32 arrays
(64 MiB each in the full bench), best of 5, interleaved; the pick for run records and audit files."""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any, Callable

import numpy as np

from tools.bench.common import MIB, Row, figure, fmt_bytes, log, ratio, save_fig

__all__ = ["bench_digest", "plot_digest", "digest_methods", "measure_digests"]


def _view(a: np.ndarray) -> memoryview:
    return memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))


def digest_methods(a: np.ndarray, b: np.ndarray) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """The methods (each handles both arrays) and, for those that could not be set up, why they are skipped."""
    from harness.judge import digest as digests

    ma, mb = _view(a), _view(b)
    methods: dict[str, Callable[[], Any]] = {
        "array_equal": lambda: np.array_equal(a, b),
        "sha256": lambda: (hashlib.sha256(ma).digest(), hashlib.sha256(mb).digest()),
    }
    skipped: dict[str, str] = {}
    try:
        import blake3

        methods["blake3 (1 thread)"] = lambda: (blake3.blake3(ma).digest(), blake3.blake3(mb).digest())
        auto = blake3.blake3.AUTO
        methods["blake3 (max_threads)"] = lambda: (blake3.blake3(ma, max_threads=auto).digest(),
                                                   blake3.blake3(mb, max_threads=auto).digest())
    except ImportError as exc:
        skipped["blake3 (1 thread)"] = skipped["blake3 (max_threads)"] = f"skipped: blake3 not importable ({exc})"
    try:
        import xxhash

        methods["xxh3_128"] = lambda: (xxhash.xxh3_128(ma).digest(), xxhash.xxh3_128(mb).digest())
    except ImportError as exc:
        skipped["xxh3_128"] = f"skipped: xxhash not importable ({exc})"
    # what run records use: the default algorithm with the dtype/shape header, both arrays on threads
    methods[f"harness digest_all ({digests.DIGEST_ALGORITHM})"] = lambda: digests.digest_all([a, b])
    return methods, skipped


def measure_digests(a: np.ndarray, b: np.ndarray, rounds: int = 5) -> dict[str, Any]:
    """Best-of-``rounds`` seconds of each method on both arrays, the order alternating between rounds."""
    methods, skipped = digest_methods(a, b)
    times: dict[str, list[float]] = {m: [] for m in methods}
    for r in range(rounds):
        order = list(methods) if r % 2 == 0 else list(reversed(methods))
        for m in order:
            t0 = time.perf_counter()
            methods[m]()
            times[m].append(time.perf_counter() - t0)
    best = {m: min(v) for m, v in times.items()}
    return {"bytes": int(a.nbytes + b.nbytes), "rounds": rounds, "seconds": best, "all": times, "skipped": skipped}


#: the algorithm each method stands for (only these can be picked as a digest)
_ALGORITHM = {"sha256": "sha256", "blake3 (1 thread)": "blake3", "xxh3_128": "xxh3_128"}


def bench_digest(level: str = "full", rounds: int = 5, quiet: bool = False) -> tuple[list[Row], dict[str, Any]]:
    """Rows: each method's throughput as a fraction of ``array_equal``'s (= t_array_equal / t_method), then the
    pick: the fastest single-thread algorithm (a digest of many arrays is already parallel across arrays)."""
    from harness.judge.digest import DIGEST_ALGORITHM

    nbytes = {"smoke": 1 * MIB, "quick": 16 * MIB, "full": 64 * MIB}[level]
    a = np.random.default_rng(0).standard_normal(nbytes // 4, dtype=np.float32)
    b = a.copy()
    res = measure_digests(a, b, rounds)
    del a, b
    sec = res["seconds"]
    base = sec["array_equal"]
    size = f"two {fmt_bytes(nbytes)} float32 arrays"
    rows: list[Row] = []
    for m, s in sec.items():
        if m == "array_equal":
            continue
        rows.append(Row("digest", f"{m}: throughput / array_equal's", ratio(base, s),
                        "array_equal seconds / method seconds (both arrays)", f"{m} seconds", s,
                        "numpy.array_equal seconds", base, "s", rounds,
                        note=f"{size}, best of {rounds}; {res['bytes'] / s / 1e9:.3g} GB/s"))
    for m, why in res["skipped"].items():
        rows.append(Row("digest", f"{m}: throughput / array_equal's", math.nan, "", m, math.nan, "array_equal",
                        base, "s", 0, status="skipped", note=why))
    measured = {alg: sec[m] for m, alg in _ALGORITHM.items() if m in sec}
    pick = min(measured, key=measured.get) if measured else None
    rows.append(Row("digest", "pick: fastest digest algorithm", ratio(base, measured[pick]) if pick else math.nan,
                    "array_equal seconds / the pick's seconds", f"{pick} seconds",
                    measured.get(pick, math.nan) if pick else math.nan, "numpy.array_equal seconds", base, "s", rounds,
                    target=f"harness default {DIGEST_ALGORITHM}",
                    status="met" if pick == DIGEST_ALGORITHM else "missed",
                    note=f"measured pick {pick}; harness DIGEST_ALGORITHM {DIGEST_ALGORITHM} (accidental change only, "
                         "not adversaries: see harness/judge/digest.py)"))
    log(f"digest {size} done", quiet)
    return rows, {"nbytes": nbytes, **{k: v for k, v in res.items() if k != "all"}, "all": res["all"], "pick": pick}


def plot_digest(raw: dict[str, Any], path: str) -> str:
    """Horizontal bars: GB/s of each method on both arrays."""
    sec = raw["seconds"]
    names = sorted(sec, key=sec.get)
    fig = figure(8, 0.5 * len(names) + 1.5)
    ax = fig.add_subplot(1, 1, 1)
    gbs = [raw["bytes"] / sec[m] / 1e9 for m in names]
    ax.barh(range(len(names)), gbs, color=["#55a868" if m == "array_equal" else "#4c72b0" for m in names])
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    for i, v in enumerate(gbs):
        ax.text(v, i, f" {v:.1f}", va="center", fontsize=9)
    ax.set_xlabel("GB/s over both arrays (best of %d)" % raw["rounds"])
    ax.set_title(f"Digests of two {fmt_bytes(raw['nbytes'])} float32 arrays")
    return save_fig(fig, path)
