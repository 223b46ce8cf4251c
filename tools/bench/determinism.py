"""Section ``determinism``: the price of determinism -- backward time and peak memory (tracemalloc) of
``chainer.embed_id`` and ``espnet.embed_id`` against the number of ids N and the vocabulary V."""

from __future__ import annotations

import gc
import math
import time
import tracemalloc
from typing import Any, Callable

import numpy as np

from tools.bench.common import GIB, Row, figure, fmt_bytes, log, median, ratio, save_fig

__all__ = ["bench_determinism", "plot_determinism"]

_EMBED_WIDTH = 16
_DET_SUBJECTS = ("chainer.embed_id", "espnet.embed_id")


def _embed_fn(name: str) -> Callable[..., Any]:
    from harness.core.compat import import_chainer

    if name == "chainer.embed_id":
        return import_chainer().functions.embed_id
    from harness.subjects.embed import espnet_module

    return espnet_module().embed_id


def _det_points(level: str) -> tuple[list[tuple[int, int]], int, int]:
    """(N, V) points: an N sweep at a fixed V and a V sweep at a fixed N."""
    if level == "smoke":
        ns, vs, v0, n0 = [100, 300], [100, 300], 300, 300
    elif level == "quick":
        ns, vs, v0, n0 = [100, 1000], [100, 1000], 1000, 1000
    else:
        ns, vs, v0, n0 = [1000, 10_000, 100_000], [1000, 10_000, 100_000], 10_000, 10_000
    pts = [(n, v0) for n in ns] + [(n0, v) for v in vs if (n0, v) not in [(n, v0) for n in ns]]
    return pts, v0, n0


def _backward_cpu(fn: Callable[..., Any], x: np.ndarray, W: np.ndarray, gy: np.ndarray,
                  trace: bool) -> tuple[float, int]:
    """Seconds of one ``y.backward()`` and, with ``trace``, tracemalloc's peak during it (bytes)."""
    from harness.core.compat import import_chainer

    chainer = import_chainer()
    Wv = chainer.Variable(W)
    y = fn(x, Wv)
    y.grad = gy
    if trace:
        tracemalloc.start()
        tracemalloc.reset_peak()
    enabled = gc.isenabled()
    gc.disable()  # a collection of Chainer's many objects must not land inside one timing
    try:
        t0 = time.perf_counter()
        y.backward()
        t = time.perf_counter() - t0
    finally:
        if enabled:
            gc.enable()
    peak = 0
    if trace:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    if Wv.grad is None:
        raise RuntimeError("embed_id backward produced no gradient")
    return t, int(peak)


def _gpu_measure(fn: Callable[..., Any], x: np.ndarray, W: np.ndarray, gy: np.ndarray) -> tuple[float, int]:
    """Seconds and peak pool bytes of one backward on GPU 0 (CuPy); used only where a GPU exists."""
    import cupy as cp
    from cupy.cuda import memory_hook

    from harness.core.compat import import_chainer

    chainer = import_chainer()

    class _Peak(memory_hook.MemoryHook):
        name = "HarnessPeak"

        def __init__(self) -> None:
            self.current = self.peak = 0
            self.sizes: dict[int, int] = {}

        def malloc_postprocess(self, device_id: int, size: int, mem_size: int, mem_ptr: int = 0,
                               pmem_id: int = 0) -> None:
            self.sizes[mem_ptr] = mem_size
            self.current += mem_size
            self.peak = max(self.peak, self.current)

        def free_postprocess(self, device_id: int, mem_size: int, mem_ptr: int = 0, pmem_id: int = 0) -> None:
            self.current -= self.sizes.pop(mem_ptr, mem_size)

    with cp.cuda.Device(0):
        xg, Wg, gyg = cp.asarray(x), cp.asarray(W), cp.asarray(gy)
        Wv = chainer.Variable(Wg)
        y = fn(xg, Wv)
        y.grad = gyg
        cp.cuda.Device(0).synchronize()
        hook = _Peak()
        with hook:
            t0 = time.perf_counter()
            y.backward()
            cp.cuda.Device(0).synchronize()
            t = time.perf_counter() - t0
        return t, int(hook.peak)


def _fit_memory(points: list[dict[str, Any]]) -> tuple[float, float, float]:
    """Least squares peak = a + b*V + c*N (bytes) over the sweep."""
    A = np.array([[1.0, p["V"], p["N"]] for p in points])
    y = np.array([float(p["peak"]) for p in points])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    return float(coef[0]), float(coef[1]), float(coef[2])


def bench_determinism(level: str = "full", rounds: int | None = None, gpu: bool | None = None,
                      quiet: bool = False) -> tuple[list[Row], dict[str, Any]]:
    """espnet.embed_id against chainer.embed_id: backward time and peak memory against N and V."""
    from harness.core.devices import available_gpus, parse_device

    rounds = rounds or (1 if level == "smoke" else 3 if level == "quick" else 5)
    pts, v0, n0 = _det_points(level)
    d = _EMBED_WIDTH
    fns = {name: _embed_fn(name) for name in _DET_SUBJECTS}
    rows: list[Row] = []
    raw: dict[str, Any] = {"cpu": [], "gpu": [], "width": d, "fits": {}}
    for N, V in pts:
        rng = np.random.default_rng(N * 7 + V)
        x = rng.integers(0, V, size=N).astype(np.int32)
        W = rng.standard_normal((V, d), dtype=np.float32)
        gy = rng.standard_normal((N, d), dtype=np.float32)
        for name, fn in fns.items():  # warm-up and the tracemalloc run
            _backward_cpu(fn, x[:10], W, gy[:10], trace=False)
        times: dict[str, list[float]] = {n: [] for n in fns}
        inner = max(1, min(20, 20_000 // N))  # small N: average a few backwards per timing
        for r in range(rounds):
            order = list(fns) if r % 2 == 0 else list(reversed(fns))
            for name in order:
                times[name].append(median(_backward_cpu(fns[name], x, W, gy, trace=False)[0]
                                           for _ in range(inner)))
        peaks = {name: _backward_cpu(fn, x, W, gy, trace=True)[1] for name, fn in fns.items()}
        tc, te = median(times["chainer.embed_id"]), median(times["espnet.embed_id"])
        ratio_t = median(ratio(e, c) for e, c in zip(times["espnet.embed_id"], times["chainer.embed_id"]))
        note = "CPU: both run the same sequential Python loop over the ids (gW[ix] += igy), so ~1 is expected"
        rows.append(Row("determinism", f"cpu N={N} V={V}: backward time", ratio_t,
                         "espnet.embed_id / chainer.embed_id backward seconds", "espnet.embed_id backward s", te,
                         "chainer.embed_id backward s", tc, "s", rounds, note=note))
        rows.append(Row("determinism", f"cpu N={N} V={V}: peak memory", ratio(peaks["espnet.embed_id"],
                                                                                 peaks["chainer.embed_id"]),
                         "espnet.embed_id / chainer.embed_id tracemalloc peak during backward",
                         "espnet.embed_id peak bytes", peaks["espnet.embed_id"], "chainer.embed_id peak bytes",
                         peaks["chainer.embed_id"], "B", 1,
                         note=f"W is V x {d} float32 ({fmt_bytes(V * d * 4)}); tracemalloc around y.backward()"))
        for name in fns:
            raw["cpu"].append({"subject": name, "N": N, "V": V, "seconds": median(times[name]),
                               "peak": peaks[name]})
        del x, W, gy
        log(f"determinism cpu N={N} V={V} done", quiet)

    # the largest N*V within 8 GiB on the CPU, extrapolated from the sweep
    budget = 8 * GIB
    limits: dict[str, float] = {}
    for name in fns:
        sel = [p for p in raw["cpu"] if p["subject"] == name]
        a, b, c = _fit_memory(sel)
        n_sel = [p for p in sel if p["V"] == v0]
        sec_per_id = median(p["seconds"] / p["N"] for p in n_sel)
        raw["fits"][name] = {"a": a, "b_per_V": b, "c_per_N": c, "seconds_per_id": sec_per_id}
        v_max = (budget - a) / b if b > 0 else math.inf
        if c > 1.0:  # grows with N by more than a byte per id: the product is bounded
            nv_max = (budget - a) ** 2 / (4 * b * c) if b > 0 else math.inf
            text = f"peak ~ {a:.3g} + {b:.3g}*V + {c:.3g}*N bytes: N*V <= {nv_max:.3g} within 8 GiB"
        else:
            nv_max = math.inf
            text = (f"peak ~ {a:.3g} + {b:.3g}*V + {c:.2g}*N bytes (width {d}): memory does not grow with N, "
                    f"so N*V is bounded only by V <= {v_max:.3g} (gW and temporaries); N is bounded by "
                    f"time: {sec_per_id * 1e6:.2f} us per id")
        limits[name] = v_max
        rows.append(Row("determinism", f"cpu {name}: largest V within 8 GiB (width {d})", math.nan,
                         "extrapolated from the sweep (least squares)", "largest V", v_max, "8 GiB", budget,
                         "ids / B", len(sel), status="context", note=text))
    rows.append(Row("determinism", "cpu: largest V within 8 GiB, espnet / chainer",
                     ratio(limits["espnet.embed_id"], limits["chainer.embed_id"]),
                     "espnet.embed_id V_max / chainer.embed_id V_max", "espnet.embed_id V_max",
                     limits["espnet.embed_id"], "chainer.embed_id V_max", limits["chainer.embed_id"], "ids", 1,
                     status="derived", note="extrapolated from the CPU sweep's tracemalloc peaks"))

    # the GPU path
    have_gpu = available_gpus() > 0 if gpu is None else gpu
    if have_gpu:
        for N, V in pts:
            rng = np.random.default_rng(N * 7 + V)
            x = rng.integers(0, V, size=N).astype(np.int32)
            W = rng.standard_normal((V, d), dtype=np.float32)
            gy = rng.standard_normal((N, d), dtype=np.float32)
            for fn in fns.values():
                _gpu_measure(fn, x, W, gy)  # warm-up: kernels compile
            res: dict[str, list[tuple[float, int]]] = {n: [] for n in fns}
            for r in range(rounds):
                for name in (list(fns) if r % 2 == 0 else list(reversed(fns))):
                    res[name].append(_gpu_measure(fns[name], x, W, gy))
            tc = median(t for t, _ in res["chainer.embed_id"])
            te = median(t for t, _ in res["espnet.embed_id"])
            pc = max(p for _, p in res["chainer.embed_id"])
            pe = max(p for _, p in res["espnet.embed_id"])
            rows.append(Row("determinism", f"gpu N={N} V={V}: backward time", ratio(te, tc),
                             "espnet.embed_id / chainer.embed_id backward seconds", "espnet.embed_id backward s", te,
                             "chainer.embed_id backward s", tc, "s", rounds,
                             note="GPU: ESPnet's one-hot GEMM against Chainer's atomicAdd scatter"))
            rows.append(Row("determinism", f"gpu N={N} V={V}: peak memory", ratio(pe, pc),
                             "espnet.embed_id / chainer.embed_id peak pool bytes during backward",
                             "espnet.embed_id peak bytes", pe, "chainer.embed_id peak bytes", pc, "B", rounds,
                             note="CuPy memory-pool allocations during y.backward()"))
            for name in fns:
                raw["gpu"].append({"subject": name, "N": N, "V": V,
                                   "seconds": median(t for t, _ in res[name]),
                                   "peak": max(p for _, p in res[name])})
    else:
        reason = parse_device("gpu:0").availability()[1]
        rows.append(Row("determinism", "gpu: backward time and peak memory", math.nan,
                         "espnet.embed_id / chainer.embed_id on GPU", "espnet.embed_id", math.nan,
                         "chainer.embed_id", math.nan, "", 0, status="skipped", note=f"skipped: no GPU ({reason})"))
    nv_gpu = 2 ** 31
    rows.append(Row("determinism", "gpu espnet.embed_id: largest N*V within 8 GiB", math.nan,
                     "derived from the code, not measured", "N*V", float(nv_gpu), "8 GiB", float(budget), "ids*ids / B",
                     0, status="context",
                     note="derived from the code, not measured: the GPU backward of "
                          "espnet/nets/chainer_backend/deterministic_embed_id.py allocates a one-hot "
                          "xi = zeros((N, V), float32), 4*N*V bytes, so N*V <= 2^31 within 8 GiB (plus gW, "
                          "V x D); its flat index arange(N, int32) * V + x is int32 and also wraps at N*V >= 2^31. "
                          "Chainer's atomicAdd path needs only gW (V x D): no N*V term"))
    return rows, raw


def plot_determinism(raw: dict[str, Any], path: str) -> str:
    """Backward time against N and peak memory against V, per subject."""
    fig = figure(12, 4.0)
    pts = raw["cpu"]
    vs_fixed = {p["V"] for p in pts}
    ns_fixed = {p["N"] for p in pts}
    # the N sweep is at the most common V, the V sweep at the most common N
    v0 = max(vs_fixed, key=lambda v: sum(p["V"] == v for p in pts))
    n0 = max(ns_fixed, key=lambda n: sum(p["N"] == n for p in pts))
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for name, style in zip(_DET_SUBJECTS, ("-o", "--s")):
        sn = sorted((p for p in pts if p["subject"] == name and p["V"] == v0), key=lambda p: p["N"])
        sv = sorted((p for p in pts if p["subject"] == name and p["N"] == n0), key=lambda p: p["V"])
        ax1.plot([p["N"] for p in sn], [p["seconds"] for p in sn], style, label=f"{name} (V={v0})")
        ax2.plot([p["V"] for p in sv], [p["peak"] for p in sv], style, label=f"{name} (N={n0})")
    gpu = raw.get("gpu") or []
    if gpu:
        for name, style in zip(_DET_SUBJECTS, (":o", ":s")):
            sn = sorted((p for p in gpu if p["subject"] == name and p["V"] == v0), key=lambda p: p["N"])
            ax1.plot([p["N"] for p in sn], [p["seconds"] for p in sn], style, label=f"{name} GPU")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    ax1.set_xlabel("number of ids N")
    ax1.set_ylabel("backward seconds")
    ax1.set_title("CPU backward time" + ("" if gpu else " (GPU: skipped, no GPU)"))
    ax2.set_xlabel("vocabulary V")
    ax2.set_ylabel("tracemalloc peak bytes during backward")
    ax2.set_title(f"CPU peak memory (width {raw['width']})")
    return save_fig(fig, path)
