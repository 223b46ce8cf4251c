"""Section ``comparator``: bytes/s of :func:`harness.judge.comparator.compare_repeats` on two repetitions
against ``numpy.array_equal`` and against ``array_equal`` + the harness digest of both, on the same arrays."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from tools.bench.common import KIB, MIB, Row, figure, fmt_bytes, log, median, ratio, save_fig, timed

__all__ = ["comparator_throughput", "bench_comparator", "plot_comparator", "TARGET", "GOAL", "SMALL_TARGET",
           "METHODS"]

#: Target: the comparator on identical 64 MiB float32 at >= 0.5 of array_equal's throughput (goal 0.8).
TARGET, GOAL = 0.5, 0.8
#: Target: on identical 1 KiB float32 (most tensors of a campaign are a few KiB) at >= 1/3 of it.
SMALL_TARGET = 1 / 3

#: The methods timed, in order.
METHODS = ("comparator", "comparator_forced", "array_equal", "array_equal+digest")


def comparator_throughput(a: np.ndarray, b: np.ndarray, rounds: int = 5, inner: int | None = None
                          ) -> dict[str, Any]:
    """Bytes/s of the comparator and of its baselines on the same two arrays, interleaved per round.

    Methods: ``comparator`` (:func:`harness.judge.comparator.compare_repeats` of ``[a, b]``, the runner's
    path: two digests, NaN/Inf counts, and for differing arrays the bit comparison, the diff count, the
    max ULP and the first index), ``comparator_forced`` (the same with ``early_exit=False``: the
    element-wise work is done even when the digests agree), ``array_equal`` (:func:`numpy.array_equal`)
    and ``array_equal+digest`` (``array_equal``, then :func:`harness.judge.digest.digest_all` of both).
    Bytes are those of both inputs. Each time is the median over ``rounds`` of the mean over ``inner``
    back-to-back calls (chosen from the size when not given). Returns seconds, bytes/s, the ratios
    against the comparator, and the comparison (a :class:`~harness.core.records.TensorComparison`).
    """
    from harness.judge import comparator as bitwise
    from harness.judge import digest as digests

    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    nbytes = int(a.nbytes + b.nbytes)
    if inner is None:
        inner = int(max(1, min(200, (2 * MIB) // max(nbytes, 1))))
    methods: dict[str, Callable[[], Any]] = {
        "comparator": lambda: bitwise.compare_repeats("x", [a, b]),
        "comparator_forced": lambda: bitwise.compare_repeats("x", [a, b], early_exit=False),
        "array_equal": lambda: np.array_equal(a, b),
        "array_equal+digest": lambda: (np.array_equal(a, b), digests.digest_all([a, b])),
    }
    times: dict[str, list[float]] = {m: [] for m in methods}
    results: dict[str, Any] = {}
    for r in range(rounds):
        order = list(methods) if r % 2 == 0 else list(reversed(methods))  # no method always goes first
        for m in order:
            t, results[m] = timed(methods[m], inner)
            times[m].append(t)
    seconds = {m: median(v) for m, v in times.items()}
    return {
        "bytes": nbytes, "rounds": rounds, "inner": inner, "seconds": seconds, "algorithm": digests.DIGEST_ALGORITHM,
        "bytes_per_s": {m: nbytes / s if s > 0 else math.inf for m, s in seconds.items()},
        # throughput of the comparator as a fraction of each baseline's (= t_baseline / t_comparator)
        "ratio_vs_array_equal": ratio(seconds["array_equal"], seconds["comparator"]),
        "ratio_vs_array_equal_digest": ratio(seconds["array_equal+digest"], seconds["comparator"]),
        "ratio_forced_vs_array_equal": ratio(seconds["array_equal"], seconds["comparator_forced"]),
        "comparison": results["comparator"],
        "array_equal": bool(results["array_equal"]),
    }


def _plan(level: str) -> list[tuple[str, int]]:
    if level == "smoke":
        return [("float32", 64 * KIB)]
    if level == "quick":
        sizes = [1 * KIB, 64 * KIB, 4 * MIB]
        return [(dt, s) for dt in ("float16", "float32", "float64") for s in sizes]
    sizes = [1 * KIB, 64 * KIB, 4 * MIB, 64 * MIB]
    return [(dt, s) for dt in ("float16", "float32", "float64") for s in sizes] + [("float32", 256 * MIB)]


def _arrays(dtype: str, nbytes: int, variant: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    n = max(1, nbytes // np.dtype(dtype).itemsize)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n, dtype=np.float32).astype(dtype, copy=False)
    b = a.copy()
    if variant == "one differs":
        i = n // 2
        b[i] = np.nextafter(b[i], np.asarray(np.inf, dtype=dtype))
    return a, b


def bench_comparator(level: str = "full", rounds: int | None = None, quiet: bool = False
                     ) -> tuple[list[Row], dict[str, Any]]:
    """The section's rows: per dtype, size and variant (identical / one element one ULP off)."""
    rows: list[Row] = []
    raw: list[dict[str, Any]] = []
    for dtype, nbytes in _plan(level):
        rr = rounds or (2 if level == "smoke" else 5 if nbytes <= 4 * MIB else 3)
        for variant in ("identical", "one differs"):
            a, b = _arrays(dtype, nbytes, variant)
            res = comparator_throughput(a, b, rounds=rr)
            c = res["comparison"]
            expect_diff = 0 if variant == "identical" else 1
            if c.n_diff != expect_diff:  # the bench must measure a comparator that gets it right
                raise AssertionError(f"comparator found n_diff={c.n_diff} on {dtype} {variant}; expected {expect_diff}")
            del a, b
            label = f"{dtype} {fmt_bytes(nbytes)} {variant}"
            headline = dtype == "float32" and nbytes == 64 * MIB and variant == "identical"
            small = dtype == "float32" and nbytes == 1 * KIB and variant == "identical"
            bps = res["bytes_per_s"]
            t1 = res["ratio_vs_array_equal"]
            t2 = res["ratio_vs_array_equal_digest"]
            note = (f"inner={res['inner']}; digest {res['algorithm']}; comparator {bps['comparator'] / 1e9:.3g} GB/s, "
                    f"array_equal {bps['array_equal'] / 1e9:.3g} GB/s, array_equal+digest "
                    f"{bps['array_equal+digest'] / 1e9:.3g} GB/s")
            rows.append(Row("comparator", f"{label}: vs array_equal", t1,
                            "comparator bytes/s / array_equal bytes/s", "comparator bytes/s", bps["comparator"],
                            "numpy.array_equal bytes/s", bps["array_equal"], "B/s", rr,
                            target=(f">= {TARGET} (goal {GOAL})" if headline else ">= 1/3" if small else ""),
                            status=(("met" if t1 >= TARGET else "missed") if headline
                                    else ("met" if t1 >= SMALL_TARGET else "missed") if small else "ok"),
                            note=note))
            rows.append(Row("comparator", f"{label}: vs array_equal+digest", t2,
                            "comparator bytes/s / (array_equal then digest of both) bytes/s", "comparator bytes/s",
                            bps["comparator"], "array_equal+digest bytes/s", bps["array_equal+digest"], "B/s", rr,
                            note=note))
            if variant == "identical":
                rows.append(Row("comparator", f"{label}: early_exit=False vs array_equal",
                                res["ratio_forced_vs_array_equal"],
                                "forced element-wise comparator bytes/s / array_equal bytes/s",
                                "comparator (early_exit=False) bytes/s", bps["comparator_forced"],
                                "numpy.array_equal bytes/s", bps["array_equal"], "B/s", rr,
                                note="the element-wise work done although the digests agree"))
            raw.append({"dtype": dtype, "nbytes": nbytes, "variant": variant, "rounds": rr,
                        "seconds": res["seconds"], "bytes_per_s": bps})
        log(f"comparator {dtype} {fmt_bytes(nbytes)} done", quiet)
    return rows, {"points": raw}


def plot_comparator(raw: dict[str, Any], path: str) -> str:
    """Bytes/s against size, one panel per dtype."""
    pts = raw["points"]
    dtypes = sorted({p["dtype"] for p in pts}, key=lambda d: np.dtype(d).itemsize)
    fig = figure(max(8.0, 4.2 * len(dtypes)), 4.0)
    styles = {"comparator": "-o", "comparator_forced": ":o", "array_equal": "--s", "array_equal+digest": "-.^"}
    for i, dt in enumerate(dtypes):
        ax = fig.add_subplot(1, len(dtypes), i + 1)
        for variant, alpha in (("identical", 1.0), ("one differs", 0.5)):
            sel = sorted((p for p in pts if p["dtype"] == dt and p["variant"] == variant), key=lambda p: p["nbytes"])
            if not sel:
                continue
            xs = [p["nbytes"] for p in sel]
            for m, st in styles.items():
                if m == "comparator_forced" and variant != "identical":
                    continue
                ax.plot(xs, [p["bytes_per_s"][m] for p in sel], st, alpha=alpha,
                        label=f"{m} ({variant})" if i == 0 else None, ms=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes per array")
        ax.set_title(dt)
        if i == 0:
            ax.set_ylabel("bytes/s (both arrays)")
    fig.legend(loc="upper center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    return save_fig(fig, path)
