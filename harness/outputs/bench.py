"""`harness bench`: what the harness costs, as ratios of things measured side by side in one run.

The machine is noisy, so no figure here is an absolute time: each is a *ratio* of two
quantities measured in the same run, interleaved where possible, each the median of several
rounds (absolute seconds appear only as context). Six sections, one CSV row per measured ratio:

1. ``overhead``: wall time of a ``report``-like campaign (the default corpus on the CPU, context
   ``default``, R=5 repeats + 2 fresh processes, then :func:`harness.outputs.tables.write_report`) divided
   by the time the subjects themselves spent in forward + backward, and where the rest goes
   (case building, worker start-up, transfer, comparator, oracle, report writing).
2. ``comparator``: bytes/s of :func:`harness.judge.bitwise.compare_repeats` on two repetitions against
   ``numpy.array_equal`` and against ``array_equal`` + SHA-256 of both, on the same arrays.
3. ``oracle``: the float64 oracle's time against its subject's, per family, over small sweeps of
   batch, sequence length and width.
4. ``determinism``: backward time and peak memory (tracemalloc) of ``chainer.embed_id`` and
   ``espnet.embed_id`` against the number of ids N and the vocabulary V.
5. ``scaling``: cases per second of the ``ci`` gate under pytest-xdist ``-n 2`` against ``-n 1``.
6. ``make``: ``make report`` / ``make test`` times where they were measured (context only).

Files (``reports/bench/<run-id>/`` or ``--out DIR``), each written atomically: ``bench.csv``,
``bench.md``, ``bench.json`` and PNG plots. ``--quick`` shrinks every size (the whole bench in
well under a minute, for the test suite).
"""

from __future__ import annotations

import datetime as _dt
import gc
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

__all__ = [
    "cmd_bench", "run_bench", "SECTIONS", "COLUMNS", "comparator_throughput", "bench_overhead",
    "bench_comparator", "bench_oracle", "bench_determinism", "bench_scaling", "bench_make_times",
    "parse_pytest_counts", "GIB",
]

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIB = 2 ** 30
MIB = 2 ** 20
KIB = 2 ** 10

#: Section keys, in report order.
SECTIONS = ("overhead", "comparator", "oracle", "determinism", "hook", "scaling", "make")

#: The columns of ``bench.csv``.
COLUMNS = ("section", "item", "ratio", "ratio_is", "numerator", "numerator_value", "denominator",
           "denominator_value", "unit", "rounds", "target", "status", "note", "machine")

#: Statuses of rows that carry no ratio on purpose.
NO_RATIO_STATUSES = ("skipped", "context", "not measured")

_TITLES = {
    "overhead": "1. Overhead ratio of a report-like campaign",
    "comparator": "2. Comparator throughput",
    "oracle": "3. Oracle cost",
    "determinism": "4. The price of determinism (embed_id backward)",
    "hook": "4b. The localize hook: a run with HashStreamHook installed / without",
    "scaling": "5. Scaling of the ci gate with pytest-xdist",
    "make": "6. make test / make report times",
}


# --------------------------------------------------------------------------- rows and helpers


@dataclass
class _Row:
    section: str
    item: str
    ratio: float
    ratio_is: str
    numerator: str
    numerator_value: float
    denominator: str
    denominator_value: float
    unit: str
    rounds: int
    target: str = ""
    status: str = "ok"
    note: str = ""

    def as_dict(self, machine: str) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in COLUMNS if k != "machine"}
        d["machine"] = machine
        return d


def _ratio(num: float, den: float) -> float:
    try:
        return float(num) / float(den) if den and math.isfinite(den) and math.isfinite(num) else math.nan
    except (TypeError, ZeroDivisionError):
        return math.nan


def _median(xs: Iterable[float]) -> float:
    xs = [float(x) for x in xs]
    return statistics.median(xs) if xs else math.nan


def _timed(fn: Callable[[], Any], inner: int = 1) -> tuple[float, Any]:
    """Seconds per call of ``fn`` (averaged over ``inner`` back-to-back calls) and its last result."""
    out = None
    t0 = time.perf_counter()
    for _ in range(inner):
        out = fn()
    return (time.perf_counter() - t0) / inner, out


def _fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{int(n)} B"


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log(y) against log(x): the growth exponent."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return math.nan
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else math.nan


def _atomic_write(path: str, data: str | bytes) -> str:
    from harness.core.fileio import atomic_write

    return atomic_write(path, data)


def _figure(width: float = 8.0, height: float = 4.5) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def _save_fig(fig: Any, path: str) -> str:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return _atomic_write(path, buf.getvalue())


def _log(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- machine


def machine_info() -> dict[str, Any]:
    """CPU model, cores and BLAS (from :func:`harness.core.env.fingerprint`), and GPU availability."""
    from harness.core.env import fingerprint

    fp = fingerprint()
    blas = fp.get("blas") or []
    blas_text = ", ".join(f"{b.get('internal_api')} {b.get('version')} ({b.get('num_threads')} threads)"
                          for b in blas) or "unknown"
    return {
        "cpu_model": fp["cpu"]["model"], "cores": fp["cpu"]["cores"], "blas": blas_text,
        "numpy": fp["packages"].get("numpy"), "chainer": fp["packages"].get("chainer"),
        "espnet": fp["packages"].get("espnet"), "python": fp["python"],
        "gpu": fp["gpu"].get("reason"), "gpu_available": bool(fp["gpu"].get("available")),
        "fingerprint": fp,
    }


def _machine_line(m: dict[str, Any]) -> str:
    return f"{m['cpu_model']}, {m['cores']} cores, BLAS {m['blas']}"


# --------------------------------------------------------------------------- 1. overhead


def _overhead_corpus(quick: bool) -> list[Any]:
    from harness.generate.corpora import anchor_cases, default_corpus

    if quick:
        # One collision embed, one small bidirectional LSTM, one pipeline: every family, tiny.
        return [c for c in anchor_cases() if c.seed in (11, 22, 31)]
    return default_corpus()


class _Stopwatch:
    """Read-only instrumentation of the runner for one campaign: wraps a few of its functions to
    time them (worker start and close, the per-run record of runs.jsonl) and restores them after.
    Where the runner no longer has one of them, that part stays in the residual."""

    _TARGETS = (("WorkerSet", "start", "worker_startup"), ("WorkerSet", "close", "worker_startup"),
                (None, "_tensor_meta", "run_records"))

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {"worker_startup": 0.0, "run_records": 0.0}
        self._saved: list[tuple[Any, str, Any]] = []
        self.wrapped: set[str] = set()

    def __enter__(self) -> "_Stopwatch":
        from harness.execute import campaign as runner

        for owner_name, attr, bucket in self._TARGETS:
            owner = getattr(runner, owner_name, None) if owner_name else runner
            fn = getattr(owner, attr, None) if owner is not None else None
            if fn is None or not callable(fn):
                continue
            self._saved.append((owner, attr, fn))
            self.wrapped.add(bucket)
            setattr(owner, attr, self._wrap(fn, bucket))
        return self

    def _wrap(self, fn: Callable[..., Any], bucket: str) -> Callable[..., Any]:
        def timed(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.seconds[bucket] += time.perf_counter() - t0

        return timed

    def __exit__(self, *exc: Any) -> None:
        for owner, attr, fn in reversed(self._saved):
            setattr(owner, attr, fn)


def _one_campaign(quick: bool, repeats: int, fresh: int) -> dict[str, float]:
    """One report-like campaign in a temporary directory; its timings, bucketed additively."""
    from harness.outputs import tables
    from harness.core.contexts import parse_contexts
    from harness.core.devices import parse_devices
    from harness.core.env import fingerprint
    from harness.execute.campaign import Campaign, CampaignSettings, plan
    from harness.subjects.registry import subjects_for

    tmp = tempfile.mkdtemp(prefix="harness-bench-")
    try:
        t_start = time.perf_counter()
        cases = _overhead_corpus(quick)
        subjects = subjects_for(None)
        devices = parse_devices("cpu")
        contexts = parse_contexts("default")
        tasks = plan(cases, subjects, devices, contexts)
        campaign = Campaign(tmp, CampaignSettings(repeats=repeats, fresh=fresh, quiet=True))
        campaign.write_inputs(cases, {"subjects": [s.name for s in subjects], "devices": [d.id for d in devices],
                                      "contexts": [c.name for c in contexts], "shard": None})
        t_cases = time.perf_counter() - t_start
        with _Stopwatch() as sw:
            t0 = time.perf_counter()
            campaign.run(tasks)
            t_campaign = time.perf_counter() - t0
        t0 = time.perf_counter()
        tables.write_report(tmp, environment=fingerprint(), root_cause=None)
        t_report = time.perf_counter() - t0
        total = time.perf_counter() - t_start
        oracle = 0.0
        with open(os.path.join(tmp, "runs.jsonl"), encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                from harness.subjects.registry import get_subject

                if get_subject(r["subject"]).role == "oracle":
                    oracle += sum(v for k, v in r["timings"].items() if k in ("forward", "backward", "double-backward"))
        st = campaign.stats
        subject_all = float(st["subject"])
        # what the campaign's wall time holds beyond the runs and the comparisons
        residual = max(t_campaign - subject_all - st["transfer_and_overhead"] - st["compare"], 0.0)
        startup = min(sw.seconds["worker_startup"], residual) if "worker_startup" in sw.wrapped else residual
        return {
            "total": total,
            "subject": subject_all - oracle,
            "case_building": t_cases,
            # starting the pool and fresh workers (in parallel: wall time) and closing them
            "worker_startup": startup,
            "transfer": float(st["transfer_and_overhead"]),
            # the rest of the campaign's bookkeeping: each run's runs.jsonl record (digest and
            # NaN/Inf counts of every tensor), the JSON lines, the progress bar
            "run_records": max(residual - startup, 0.0),
            "run_records_tensor_meta": sw.seconds["run_records"],
            "compare": float(st["compare"]),
            "oracle": oracle,
            "report_writing": t_report,
            "campaign": t_campaign,
            "worker_startup_summed": float(st["worker_startup"]),
            "runs": float(st["runs"]),
            "tasks": float(len(tasks)),
            "cases": float(len(cases)),
            "restarts": float(st["restarts"]),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _campaign_round(quick: bool, repeats: int, fresh: int) -> dict[str, float]:
    """One campaign round in a fresh interpreter, as ``harness report`` runs: nothing is imported or
    cached from earlier rounds (matplotlib's import lands in report writing, as in a real report)."""
    code = ("import json, sys\n"
            "from harness.outputs import tables  # imported before the clock starts, as in run_report\n"
            "from harness.outputs.bench import _one_campaign\n"
            f"res = _one_campaign({bool(quick)!r}, {int(repeats)}, {int(fresh)})\n"
            "sys.stdout.write('\\n' + json.dumps(res) + '\\n')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = PROJECT_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"overhead round failed (exit {p.returncode}): {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


_OVERHEAD_PARTS = (
    ("case_building", "case building (corpus, plan, corpus.jsonl)"),
    ("worker_startup", "worker start-up and close (wall)"),
    ("transfer", "transfer and per-run overhead (pipe, pickling, input building in the worker)"),
    ("run_records", "runs.jsonl records (per-run digests, NaN/Inf counts), other bookkeeping"),
    ("compare", "comparator (digests, bit comparison, npz of rep 0)"),
    ("oracle", "oracle subjects' own time"),
    ("report_writing", "report writing (tables, plots, html)"),
)


def bench_overhead(quick: bool, rounds: int | None = None, repeats: int = 5, fresh: int = 2,
                   quiet: bool = False) -> tuple[list[_Row], dict[str, Any]]:
    """Section 1. Returns the rows and the per-round raw timings."""
    rounds = rounds or (2 if quick else 3)
    per_round = []
    for k in range(rounds):
        per_round.append(_campaign_round(quick, repeats, fresh))
        _log(f"overhead round {k + 1}/{rounds}: total {per_round[-1]['total']:.1f} s, "
             f"subjects {per_round[-1]['subject']:.1f} s", quiet)
    med = {key: _median(r[key] for r in per_round) for key in per_round[0]}
    ratios = [_ratio(r["total"], r["subject"]) for r in per_round]
    overhead = _median(ratios)
    corpus = ("3 anchor cases (quick)" if quick else f"default corpus ({int(med['cases'])} cases)")
    base_note = (f"{corpus}, cpu, context default, R={repeats} + {fresh} fresh, {int(med['tasks'])} tasks, "
                 f"{int(med['runs'])} runs; subject time excludes the oracle subjects; localization not run")
    rows = [_Row("overhead", "overhead ratio", overhead, "campaign wall / subjects' forward+backward",
                 "campaign wall (case building + campaign + report writing)", med["total"],
                 "subjects' forward+backward (Campaign.stats subject - oracle)", med["subject"], "s", rounds,
                 target="<= 1.5 (floor 1.0)", status="met" if overhead <= 1.5 else "missed", note=base_note)]
    for key, label in _OVERHEAD_PARTS:
        share = _median(_ratio(r[key], r["subject"]) for r in per_round)
        rows.append(_Row("overhead", f"breakdown: {key}", share, f"{key} / subjects' forward+backward",
                         label, med[key], "subjects' forward+backward", med["subject"], "s", rounds,
                         note="adds to the overhead ratio; the parts sum to (ratio - 1)"))
    rows.append(_Row("overhead", "context: worker start-up summed over processes",
                     _ratio(med["worker_startup_summed"], med["subject"]),
                     "summed start-up / subjects' forward+backward", "Campaign.stats worker_startup (summed)",
                     med["worker_startup_summed"], "subjects' forward+backward", med["subject"], "s", rounds,
                     status="context", note="workers start in parallel, so the wall cost is the breakdown row"))
    return rows, {"rounds": per_round}


def plot_overhead(raw: dict[str, Any], path: str) -> str:
    per_round = raw["rounds"]
    med = {key: _median(r[key] for r in per_round) for key in per_round[0]}
    fig = _figure(8, 3.8)
    ax = fig.add_subplot(1, 1, 1)
    left = 0.0
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]
    parts = [("subject", "subjects")] + [(k, k) for k, _ in _OVERHEAD_PARTS]
    for (key, label), color in zip(parts, colors):
        w = _ratio(med[key], med["subject"])
        ax.barh([0], [w], left=left, color=color, label=f"{label} {w:.2f}")
        left += w
    ax.axvline(1.5, color="black", ls="--", lw=1)
    ax.text(1.5, -0.35, " target 1.5", va="center")
    ax.set_yticks([])
    ax.set_xlabel("seconds / subjects' forward+backward seconds")
    ax.set_title(f"Overhead ratio {left:.2f} (median of {len(per_round)} rounds)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=4, fontsize=8)
    return _save_fig(fig, path)


# --------------------------------------------------------------------------- 2. comparator


def _sha_both(a: np.ndarray, b: np.ndarray) -> tuple[str, str]:
    return (hashlib.sha256(memoryview(a.reshape(-1).view(np.uint8))).hexdigest(),
            hashlib.sha256(memoryview(b.reshape(-1).view(np.uint8))).hexdigest())


def comparator_throughput(a: np.ndarray, b: np.ndarray, rounds: int = 5, inner: int | None = None
                          ) -> dict[str, Any]:
    """Bytes/s of the comparator and of its baselines on the same two arrays, interleaved per round.

    Methods: ``comparator`` (:func:`harness.judge.bitwise.compare_repeats` of ``[a, b]``, the runner's
    path: two SHA-256 digests, NaN/Inf counts, and for differing arrays the bit comparison, the
    diff count, the max ULP and the first index), ``comparator_forced`` (the same with
    ``early_exit=False``: the element-wise work is done even when the digests agree),
    ``array_equal`` (:func:`numpy.array_equal`) and ``array_equal+sha256`` (``array_equal``, then
    SHA-256 of both arrays, one after the other). Bytes are those of both inputs. Each time is
    the median over ``rounds`` of the mean over ``inner`` back-to-back calls (chosen from the size
    when not given). Returns seconds, bytes/s, the ratios against the comparator, and the
    comparison (a :class:`~harness.judge.bitwise.TensorComparison`).
    """
    from harness.judge import bitwise as compare

    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    nbytes = int(a.nbytes + b.nbytes)
    if inner is None:
        inner = int(max(1, min(200, (2 * MIB) // max(nbytes, 1))))
    methods: dict[str, Callable[[], Any]] = {
        "comparator": lambda: compare.compare_repeats("x", [a, b]),
        "comparator_forced": lambda: compare.compare_repeats("x", [a, b], early_exit=False),
        "array_equal": lambda: np.array_equal(a, b),
        "array_equal+sha256": lambda: (np.array_equal(a, b), _sha_both(a, b)),
    }
    times: dict[str, list[float]] = {m: [] for m in methods}
    results: dict[str, Any] = {}
    for r in range(rounds):
        order = list(methods) if r % 2 == 0 else list(reversed(methods))  # no method always goes first
        for m in order:
            t, results[m] = _timed(methods[m], inner)
            times[m].append(t)
    seconds = {m: _median(v) for m, v in times.items()}
    return {
        "bytes": nbytes, "rounds": rounds, "inner": inner, "seconds": seconds,
        "bytes_per_s": {m: nbytes / s if s > 0 else math.inf for m, s in seconds.items()},
        # throughput of the comparator as a fraction of each baseline's (= t_baseline / t_comparator)
        "ratio_vs_array_equal": _ratio(seconds["array_equal"], seconds["comparator"]),
        "ratio_vs_array_equal_sha256": _ratio(seconds["array_equal+sha256"], seconds["comparator"]),
        "ratio_forced_vs_array_equal": _ratio(seconds["array_equal"], seconds["comparator_forced"]),
        "comparison": results["comparator"],
        "array_equal": bool(results["array_equal"]),
    }


def _comparator_plan(quick: bool) -> list[tuple[str, int]]:
    if quick:
        sizes = [1 * KIB, 64 * KIB, 4 * MIB]
        return [(dt, s) for dt in ("float16", "float32", "float64") for s in sizes]
    sizes = [1 * KIB, 64 * KIB, 4 * MIB, 64 * MIB]
    return [(dt, s) for dt in ("float16", "float32", "float64") for s in sizes] + [("float32", 256 * MIB)]


def _comparator_arrays(dtype: str, nbytes: int, variant: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    n = max(1, nbytes // np.dtype(dtype).itemsize)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n, dtype=np.float32).astype(dtype, copy=False)
    b = a.copy()
    if variant == "one differs":
        i = n // 2
        b[i] = np.nextafter(b[i], np.asarray(np.inf, dtype=dtype))
    return a, b


def bench_comparator(quick: bool, rounds: int | None = None, quiet: bool = False
                     ) -> tuple[list[_Row], dict[str, Any]]:
    """Section 2."""
    rows: list[_Row] = []
    raw: list[dict[str, Any]] = []
    for dtype, nbytes in _comparator_plan(quick):
        rr = rounds or (5 if nbytes <= 4 * MIB else 3)
        for variant in ("identical", "one differs"):
            a, b = _comparator_arrays(dtype, nbytes, variant)
            res = comparator_throughput(a, b, rounds=rr)
            c = res["comparison"]
            expect_diff = 0 if variant == "identical" else 1
            if c.n_diff != expect_diff:  # the bench must measure a comparator that gets it right
                raise AssertionError(f"comparator found n_diff={c.n_diff} on {dtype} {variant}; expected {expect_diff}")
            del a, b
            label = f"{dtype} {_fmt_bytes(nbytes)} {variant}"
            headline = dtype == "float32" and nbytes == 64 * MIB
            bps = res["bytes_per_s"]
            t1 = res["ratio_vs_array_equal"]
            t2 = res["ratio_vs_array_equal_sha256"]
            note = (f"inner={res['inner']}; comparator {bps['comparator'] / 1e9:.3g} GB/s, array_equal "
                    f"{bps['array_equal'] / 1e9:.3g} GB/s, array_equal+sha256 {bps['array_equal+sha256'] / 1e9:.3g} GB/s")
            rows.append(_Row("comparator", f"{label}: vs array_equal", t1,
                             "comparator bytes/s / array_equal bytes/s", "comparator bytes/s", bps["comparator"],
                             "numpy.array_equal bytes/s", bps["array_equal"], "B/s", rr,
                             target=">= 1/3 (64 MiB float32)" if headline else "",
                             status=("met" if t1 >= 1 / 3 else "missed") if headline else "ok", note=note))
            rows.append(_Row("comparator", f"{label}: vs array_equal+sha256", t2,
                             "comparator bytes/s / (array_equal then sha256 of both) bytes/s", "comparator bytes/s",
                             bps["comparator"], "array_equal+sha256 bytes/s", bps["array_equal+sha256"], "B/s", rr,
                             target=">= 1 (64 MiB float32)" if headline else "",
                             status=("met" if t2 >= 1 else "missed") if headline else "ok", note=note))
            if variant == "identical":
                rows.append(_Row("comparator", f"{label}: early_exit=False vs array_equal",
                                 res["ratio_forced_vs_array_equal"],
                                 "forced element-wise comparator bytes/s / array_equal bytes/s",
                                 "comparator (early_exit=False) bytes/s", bps["comparator_forced"],
                                 "numpy.array_equal bytes/s", bps["array_equal"], "B/s", rr,
                                 note="the element-wise work done although the digests agree"))
            raw.append({"dtype": dtype, "nbytes": nbytes, "variant": variant, "rounds": rr,
                        "seconds": res["seconds"], "bytes_per_s": bps})
        _log(f"comparator {dtype} {_fmt_bytes(nbytes)} done", quiet)
    return rows, {"points": raw}


def plot_comparator(raw: dict[str, Any], path: str) -> str:
    pts = raw["points"]
    dtypes = sorted({p["dtype"] for p in pts}, key=lambda d: np.dtype(d).itemsize)
    fig = _figure(4.2 * len(dtypes), 4.0)
    styles = {"comparator": "-o", "comparator_forced": ":o", "array_equal": "--s", "array_equal+sha256": "-.^"}
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
    fig.legend(loc="upper center", ncol=4, fontsize=7, bbox_to_anchor=(0.5, 0.0))
    return _save_fig(fig, path)


# --------------------------------------------------------------------------- 3. oracle

_ORACLE_FAMILIES = {"embed": "chainer.embed_id", "lstm": "chainer.NStepLSTM", "pipeline": "pipeline.embed_lstm"}
_ORACLE_OF = {"embed": "oracle.embed", "lstm": "oracle.lstm", "pipeline": "oracle.pipeline"}


def _oracle_points(quick: bool) -> dict[str, dict[str, Any]]:
    """Per family: the base point and 3 values for each of batch, length and width (base in the middle)."""
    if quick:
        return {
            "embed": {"base": {"batch": 4, "length": 8, "width": 8}, "sweep": {
                "batch": [2, 4, 8], "length": [4, 8, 16], "width": [4, 8, 16]}},
            "lstm": {"base": {"batch": 2, "length": 4, "width": 8}, "sweep": {
                "batch": [1, 2, 4], "length": [2, 4, 8], "width": [4, 8, 16]}},
            "pipeline": {"base": {"batch": 2, "length": 4, "width": 8}, "sweep": {
                "batch": [1, 2, 4], "length": [2, 4, 8], "width": [4, 8, 16]}},
        }
    return {
        "embed": {"base": {"batch": 16, "length": 32, "width": 32}, "sweep": {
            "batch": [4, 16, 64], "length": [8, 32, 128], "width": [8, 32, 128]}},
        "lstm": {"base": {"batch": 8, "length": 16, "width": 32}, "sweep": {
            "batch": [2, 8, 32], "length": [4, 16, 64], "width": [8, 32, 128]}},
        "pipeline": {"base": {"batch": 8, "length": 16, "width": 32}, "sweep": {
            "batch": [2, 8, 32], "length": [4, 16, 64], "width": [8, 32, 128]}},
    }


def _oracle_case(family: str, batch: int, length: int, width: int) -> Any:
    from harness.core.cases import Case

    if family == "embed":
        # ids drawn uniformly from a vocabulary of 100: most rows collect several terms
        return Case("embed", 7, {"vocab": 100, "width": width, "ids_shape": [batch, length]})
    if family == "lstm":
        return Case("lstm", 7, {"n_layers": 1, "in_size": width, "hidden": width, "lengths": [length] * batch})
    return Case("pipeline", 7, {"vocab": 100, "width": width, "hidden": width, "n_layers": 1,
                                "lengths": [length] * batch, "ignore_label": -1})


def _subject_seconds(subject_name: str, case: Any) -> float:
    from harness.core.contexts import get_context
    from harness.core.devices import parse_device
    from harness.subjects.base import execute
    from harness.subjects.registry import get_subject

    res = execute(get_subject(subject_name), case, parse_device("cpu"), get_context("default"))
    if not res.ok:
        raise RuntimeError(f"{subject_name} on {case!r} did not run: {res.error or res.skip_reason}")
    return res.subject_seconds


def bench_oracle(quick: bool, rounds: int | None = None, quiet: bool = False) -> tuple[list[_Row], dict[str, Any]]:
    """Section 3: oracle seconds / subject seconds, in process, interleaved per round."""
    rounds = rounds or (2 if quick else 3)
    plan = _oracle_points(quick)
    rows: list[_Row] = []
    raw: dict[str, Any] = {}
    for family, spec in plan.items():
        subj, orc = _ORACLE_FAMILIES[family], _ORACLE_OF[family]
        points: dict[tuple[int, int, int], dict[str, float]] = {}

        def measure(batch: int, length: int, width: int) -> dict[str, float]:
            key = (batch, length, width)
            if key not in points:
                case = _oracle_case(family, batch, length, width)
                ts: list[float] = []
                to: list[float] = []
                for r in range(rounds):
                    pair = [(subj, ts), (orc, to)] if r % 2 == 0 else [(orc, to), (subj, ts)]
                    for name, acc in pair:
                        acc.append(_subject_seconds(name, case))
                points[key] = {"subject": _median(ts), "oracle": _median(to),
                               "ratio": _median(_ratio(o, s) for o, s in zip(to, ts))}
            return points[key]

        base = spec["base"]
        _subject_seconds(subj, _oracle_case(family, **base))  # warm-up: imports, first-call caches
        _subject_seconds(orc, _oracle_case(family, **base))
        b = measure(**base)
        rows.append(_Row("oracle", f"{family}: base (batch {base['batch']}, length {base['length']}, "
                                   f"width {base['width']})", b["ratio"], f"{orc} / {subj} seconds",
                         f"{orc} seconds", b["oracle"], f"{subj} forward+backward seconds", b["subject"], "s",
                         rounds, note="in process, CPU, context default; subject time includes double backward "
                                      "where the subject runs one" if family == "embed" else
                         "in process, CPU, context default"))
        raw[family] = {"base": base, "sweep": {}}
        for param, values in spec["sweep"].items():
            series = []
            for v in values:
                p = dict(base)
                p[param] = v
                m = measure(**p)
                series.append((v, m))
            xo = _slope([v for v, _ in series], [m["oracle"] for _, m in series])
            xs = _slope([v for v, _ in series], [m["subject"] for _, m in series])
            for v, m in series:
                rows.append(_Row("oracle", f"{family}: {param}={v}", m["ratio"], f"{orc} / {subj} seconds",
                                 f"{orc} seconds", m["oracle"], f"{subj} seconds", m["subject"], "s", rounds,
                                 note=f"sweep of {param} (others at base): oracle ~ {param}^{xo:.2f}, "
                                      f"subject ~ {param}^{xs:.2f}"))
            raw[family]["sweep"][param] = [{"value": v, **m} for v, m in series]
            raw[family]["sweep"][param + "_exponents"] = {"oracle": xo, "subject": xs}
        _log(f"oracle {family} done", quiet)
    return rows, raw


def plot_oracle(raw: dict[str, Any], path: str) -> str:
    params = ("batch", "length", "width")
    fig = _figure(12, 3.8)
    for i, param in enumerate(params):
        ax = fig.add_subplot(1, 3, i + 1)
        for family, data in raw.items():
            series = data["sweep"].get(param, [])
            if series:
                ax.plot([s["value"] for s in series], [s["ratio"] for s in series], "-o",
                        label=f"{family} ({_ORACLE_OF[family]} / {_ORACLE_FAMILIES[family]})")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_xlabel(param)
        if i == 0:
            ax.set_ylabel("oracle seconds / subject seconds")
    fig.legend(*fig.axes[0].get_legend_handles_labels(), loc="upper center", ncol=3, fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle("Oracle cost against its subject")
    return _save_fig(fig, path)


# --------------------------------------------------------------------------- 4. determinism

_EMBED_WIDTH = 16
_DET_SUBJECTS = ("chainer.embed_id", "espnet.embed_id")


def _embed_fn(name: str) -> Callable[..., Any]:
    from harness.core.compat import import_chainer

    if name == "chainer.embed_id":
        return import_chainer().functions.embed_id
    from harness.subjects.embed import espnet_module

    return espnet_module().embed_id


def _det_points(quick: bool) -> tuple[list[tuple[int, int]], int, int]:
    """(N, V) points: an N sweep at a fixed V and a V sweep at a fixed N."""
    if quick:
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


def bench_determinism(quick: bool, rounds: int | None = None, gpu: bool | None = None, quiet: bool = False
                      ) -> tuple[list[_Row], dict[str, Any]]:
    """Section 4: espnet.embed_id against chainer.embed_id, backward time and peak memory vs N and V."""
    from harness.core.devices import available_gpus, parse_device

    rounds = rounds or (3 if quick else 5)
    pts, v0, n0 = _det_points(quick)
    d = _EMBED_WIDTH
    fns = {name: _embed_fn(name) for name in _DET_SUBJECTS}
    rows: list[_Row] = []
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
                times[name].append(_median(_backward_cpu(fns[name], x, W, gy, trace=False)[0]
                                           for _ in range(inner)))
        peaks = {name: _backward_cpu(fn, x, W, gy, trace=True)[1] for name, fn in fns.items()}
        tc, te = _median(times["chainer.embed_id"]), _median(times["espnet.embed_id"])
        ratio_t = _median(_ratio(e, c) for e, c in zip(times["espnet.embed_id"], times["chainer.embed_id"]))
        note = "CPU: both run the same sequential Python loop over the ids (gW[ix] += igy), so ~1 is expected"
        rows.append(_Row("determinism", f"cpu N={N} V={V}: backward time", ratio_t,
                         "espnet.embed_id / chainer.embed_id backward seconds", "espnet.embed_id backward s", te,
                         "chainer.embed_id backward s", tc, "s", rounds, note=note))
        rows.append(_Row("determinism", f"cpu N={N} V={V}: peak memory", _ratio(peaks["espnet.embed_id"],
                                                                                 peaks["chainer.embed_id"]),
                         "espnet.embed_id / chainer.embed_id tracemalloc peak during backward",
                         "espnet.embed_id peak bytes", peaks["espnet.embed_id"], "chainer.embed_id peak bytes",
                         peaks["chainer.embed_id"], "B", 1,
                         note=f"W is V x {d} float32 ({_fmt_bytes(V * d * 4)}); tracemalloc around y.backward()"))
        for name in fns:
            raw["cpu"].append({"subject": name, "N": N, "V": V, "seconds": _median(times[name]),
                               "peak": peaks[name]})
        del x, W, gy
        _log(f"determinism cpu N={N} V={V} done", quiet)

    # the largest N*V within 8 GiB on the CPU, extrapolated from the sweep
    budget = 8 * GIB
    limits: dict[str, float] = {}
    for name in fns:
        sel = [p for p in raw["cpu"] if p["subject"] == name]
        a, b, c = _fit_memory(sel)
        n_sel = [p for p in sel if p["V"] == v0]
        sec_per_id = _median(p["seconds"] / p["N"] for p in n_sel)
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
        rows.append(_Row("determinism", f"cpu {name}: largest V within 8 GiB (width {d})", math.nan,
                         "extrapolated from the sweep (least squares)", "largest V", v_max, "8 GiB", budget,
                         "ids / B", len(sel), status="context", note=text))
    rows.append(_Row("determinism", "cpu: largest V within 8 GiB, espnet / chainer",
                     _ratio(limits["espnet.embed_id"], limits["chainer.embed_id"]),
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
            tc = _median(t for t, _ in res["chainer.embed_id"])
            te = _median(t for t, _ in res["espnet.embed_id"])
            pc = max(p for _, p in res["chainer.embed_id"])
            pe = max(p for _, p in res["espnet.embed_id"])
            rows.append(_Row("determinism", f"gpu N={N} V={V}: backward time", _ratio(te, tc),
                             "espnet.embed_id / chainer.embed_id backward seconds", "espnet.embed_id backward s", te,
                             "chainer.embed_id backward s", tc, "s", rounds,
                             note="GPU: ESPnet's one-hot GEMM against Chainer's atomicAdd scatter"))
            rows.append(_Row("determinism", f"gpu N={N} V={V}: peak memory", _ratio(pe, pc),
                             "espnet.embed_id / chainer.embed_id peak pool bytes during backward",
                             "espnet.embed_id peak bytes", pe, "chainer.embed_id peak bytes", pc, "B", rounds,
                             note="CuPy memory-pool allocations during y.backward()"))
            for name in fns:
                raw["gpu"].append({"subject": name, "N": N, "V": V,
                                   "seconds": _median(t for t, _ in res[name]),
                                   "peak": max(p for _, p in res[name])})
    else:
        reason = parse_device("gpu:0").availability()[1]
        rows.append(_Row("determinism", "gpu: backward time and peak memory", math.nan,
                         "espnet.embed_id / chainer.embed_id on GPU", "espnet.embed_id", math.nan,
                         "chainer.embed_id", math.nan, "", 0, status="skipped", note=f"skipped: no GPU ({reason})"))
    nv_gpu = 2 ** 31
    rows.append(_Row("determinism", "gpu espnet.embed_id: largest N*V within 8 GiB", math.nan,
                     "derived from the code, not measured", "N*V", float(nv_gpu), "8 GiB", float(budget), "ids*ids / B",
                     0, status="context",
                     note="derived from the code, not measured: the GPU backward of "
                          "espnet/nets/chainer_backend/deterministic_embed_id.py allocates a one-hot "
                          "xi = zeros((N, V), float32), 4*N*V bytes, so N*V <= 2^31 within 8 GiB (plus gW, "
                          "V x D); its flat index arange(N, int32) * V + x is int32 and also wraps at N*V >= 2^31. "
                          "Chainer's atomicAdd path needs only gW (V x D): no N*V term"))
    return rows, raw


def plot_determinism(raw: dict[str, Any], path: str) -> str:
    fig = _figure(12, 4.0)
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
    return _save_fig(fig, path)


# --------------------------------------------------------------------------- 5. scaling

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


def _run_pytest(args: Sequence[str], workers: int, timeout: float) -> dict[str, Any]:
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


def bench_scaling(quick: bool, rounds: int | None = None, budget_s: float | None = None,
                  quiet: bool = False) -> tuple[list[_Row], dict[str, Any]]:
    """Section 5: cases per second at -n 2 / at -n 1 (pytest-xdist), interleaved per round."""
    fallback = ["suites/test_compare.py", "suites/test_strategies.py"]
    if quick:
        workload, why = ["suites/test_compare.py"], "quick mode: suites/test_compare.py (HARNESS_PROFILE=ci) as a small workload"
    else:
        workload, why = ["-m", "gate"], "the ci gate: pytest -m gate with HARNESS_PROFILE=ci"
    rounds = rounds or (2 if quick else 3)
    budget_s = budget_s if budget_s is not None else (60.0 if quick else 240.0)
    timeout = 120.0 if quick else 400.0
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    t_start = time.perf_counter()
    for r in range(rounds):
        for w in ((1, 2) if r % 2 == 0 else (2, 1)):
            res = _run_pytest(workload, w, timeout)
            if res["rc"] == 5 and workload[:2] == ["-m", "gate"]:  # no tests collected: -m gate selects nothing
                workload, why = fallback, "-m gate selected nothing: suites/test_compare.py suites/test_strategies.py"
                res = _run_pytest(workload, w, timeout)
            runs[w].append(res)
            _log(f"scaling round {r + 1}: -n {w}: {res['executed']} cases in {res['wall']:.1f} s (rc {res['rc']})",
                 quiet)
        if r >= 1 and time.perf_counter() - t_start > budget_s:
            break  # at least 2 rounds; stop once the section's time budget is spent
    done = min(len(runs[1]), len(runs[2]))
    rate = {w: [x["executed"] / x["wall"] if x["wall"] > 0 else math.nan for x in runs[w][:done]] for w in (1, 2)}
    ratio = _median(_ratio(b, a) for a, b in zip(rate[1], rate[2]))
    c1 = runs[1][0]["counts"] if runs[1] else {}
    failed = c1.get("failed", 0) + c1.get("error", 0)
    note = (f"{why}; {runs[1][0]['executed'] if runs[1] else 0} cases executed per run "
            f"({', '.join(f'{v} {k}' for k, v in sorted(c1.items()))}); skipped tests not counted"
            + (f"; {failed} failing tests are still counted as executed cases" if failed else "")
            + f"; ideal on {os.cpu_count()} cores: {min(2, os.cpu_count() or 1)}")
    rows = [_Row("scaling", "cases/s at -n 2 / at -n 1", ratio, "cases per second at -n 2 / at -n 1",
                 "cases/s at -n 2", _median(rate[2]), "cases/s at -n 1", _median(rate[1]), "cases/s", done,
                 target="2 on 2 cores (ideal)", status="ok", note=note),
            _Row("scaling", "context: wall at -n 1", math.nan, "", "seconds at -n 1",
                 _median(x["wall"] for x in runs[1][:done]), "seconds at -n 2",
                 _median(x["wall"] for x in runs[2][:done]), "s", done, status="context",
                 note=" ".join(runs[1][0]["cmd"][1:]) if runs[1] else "")]
    return rows, {"workload": workload, "runs": {str(k): [{kk: vv for kk, vv in x.items() if kk != "tail"}
                                                          for x in v] for k, v in runs.items()},
                  "tails": {str(k): v[-1]["tail"] for k, v in runs.items() if v}}


# --------------------------------------------------------------------------- 6. make times


def bench_make_times(reports_dir: str | None = None) -> tuple[list[_Row], dict[str, Any]]:
    """Section 6: ``make report`` from ``reports/latest/timings.json``, ``make test`` from
    ``$HARNESS_MAKE_TEST_SECONDS`` or ``reports/make-test-seconds.txt``; "not measured in this run" otherwise."""
    reports_dir = reports_dir or os.path.join(PROJECT_ROOT, "reports")
    rows: list[_Row] = []
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
        rows.append(_Row("make", "make report: total / subject time", _ratio(timings["total"], subj),
                         "report total / subjects' forward+backward (same run, oracles included)",
                         "make report total seconds", float(timings["total"]), "subject seconds", subj, "s", 1,
                         status="measured", note=f"from {os.path.relpath(tpath, PROJECT_ROOT)}; campaign "
                                                 f"{timings.get('campaign', math.nan):.1f} s, report writing "
                                                 f"{timings.get('report_writing', math.nan):.1f} s"))
    else:
        rows.append(_Row("make", "make report", math.nan, "", "make report total seconds", math.nan, "", math.nan,
                         "s", 0, status="not measured", note="not measured in this run (no reports/latest/timings.json)"))
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
        rows.append(_Row("make", "make test", math.nan, "", "make test seconds", secs, "", math.nan, "s", 1,
                         status="context", note=f"from {source} (absolute time: context only)"))
    else:
        rows.append(_Row("make", "make test", math.nan, "", "make test seconds", math.nan, "", math.nan, "s", 0,
                         status="not measured", note="not measured in this run"))
    return rows, raw


# --------------------------------------------------------------------------- the whole bench


def new_bench_dir(base: str | None = None) -> str:
    """``reports/bench/<UTC timestamp>-<pid>``."""
    from harness.outputs.report import REPORTS_DIR

    base = base or os.path.join(REPORTS_DIR, "bench")
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return os.path.join(base, f"{stamp}-{os.getpid()}")


def _markdown(frame: Any) -> str:
    show = frame.drop(columns=["section", "machine"]).copy()
    for col in ("ratio", "numerator_value", "denominator_value"):
        show[col] = show[col].map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v))
                                  else f"{v:.4g}")
    return show.to_markdown(index=False)


def bench_hook(quick: bool, rounds: int | None = None, quiet: bool = False) -> tuple[list[_Row], dict[str, Any]]:
    """Section 4b: wall time of one subject run with the localize hook installed / without it.

    Off, the hook costs nothing: it is a context manager, and no code path consults it when it
    is not installed. On, it hashes every node's inputs, outputs and gradients.
    """
    from harness.core.cases import Case
    from harness.core.contexts import get_context
    from harness.core.devices import CPU
    from harness.outputs.localize import HashStreamHook
    from harness.subjects.base import execute
    from harness.subjects.registry import get_subject

    rounds = rounds or (3 if quick else 7)
    cases = {
        "chainer.NStepLSTM": Case("lstm", 3, {"n_layers": 1, "in_size": 16 if quick else 64,
                                              "hidden": 16 if quick else 64, "lengths": [8 if quick else 20] * 8}),
        "chainer.embed_id": Case("embed", 1, {"vocab": 100, "width": 16, "ids_shape": [64, 32]}),
    }
    rows: list[_Row] = []
    raw: dict[str, Any] = {}
    for name, case in cases.items():
        subj, ctx = get_subject(name), get_context("default")
        execute(subj, case, CPU, ctx)  # warm-up
        off: list[float] = []
        on: list[float] = []
        for r in range(rounds):
            for with_hook in ((False, True) if r % 2 == 0 else (True, False)):
                t0 = time.perf_counter()
                if with_hook:
                    with HashStreamHook():
                        execute(subj, case, CPU, ctx)
                else:
                    execute(subj, case, CPU, ctx)
                (on if with_hook else off).append(time.perf_counter() - t0)
        ratio = _median(_ratio(a, b) for a, b in zip(on, off))
        rows.append(_Row("hook", f"{name}: run with hook / without", ratio, "seconds with hook / without",
                         "seconds with HashStreamHook", _median(on), "seconds without", _median(off), "s", rounds,
                         note=f"case {case.id}; CPU, context default"))
        raw[name] = {"on": on, "off": off}
        _log(f"hook {name} done", quiet)
    return rows, raw


def run_bench(out_dir: str | None = None, quick: bool = False, quiet: bool = False,
              sections: Sequence[str] = SECTIONS, reports_dir: str | None = None) -> dict[str, Any]:
    """Run the bench into ``out_dir``; returns ``{"dir", "files", "frame", "wall"}``."""
    import pandas as pd

    t_start = time.perf_counter()
    out_dir = out_dir or new_bench_dir()
    os.makedirs(out_dir, exist_ok=True)
    machine = machine_info()
    mline = _machine_line(machine)
    _log(f"{'quick' if quick else 'full'} bench into {out_dir} on {mline}", quiet)
    rows: list[_Row] = []
    raw: dict[str, Any] = {}
    walls: dict[str, float] = {}
    plots = {"overhead": ("overhead.png", plot_overhead), "comparator": ("comparator_throughput.png", plot_comparator),
             "oracle": ("oracle_cost.png", plot_oracle), "determinism": ("determinism.png", plot_determinism)}
    runners: dict[str, Callable[[], tuple[list[_Row], dict[str, Any]]]] = {
        "overhead": lambda: bench_overhead(quick, quiet=quiet),
        "comparator": lambda: bench_comparator(quick, quiet=quiet),
        "oracle": lambda: bench_oracle(quick, quiet=quiet),
        "determinism": lambda: bench_determinism(quick, quiet=quiet),
        "hook": lambda: bench_hook(quick, quiet=quiet),
        "scaling": lambda: bench_scaling(quick, quiet=quiet),
        "make": lambda: bench_make_times(reports_dir),
    }
    files: dict[str, str] = {}
    for sec in sections:
        t0 = time.perf_counter()
        sec_rows, sec_raw = runners[sec]()
        walls[sec] = time.perf_counter() - t0
        rows.extend(sec_rows)
        raw[sec] = sec_raw
        if sec in plots:
            name, fn = plots[sec]
            files[name] = fn(sec_raw, os.path.join(out_dir, name))
        _log(f"section {sec}: {walls[sec]:.1f} s", quiet)
    frame = pd.DataFrame([r.as_dict(mline) for r in rows], columns=list(COLUMNS))
    wall = time.perf_counter() - t_start
    files["bench.csv"] = _atomic_write(os.path.join(out_dir, "bench.csv"), frame.to_csv(index=False))
    md = [f"# harness bench ({'quick' if quick else 'full'})", "",
          "Every figure is a ratio of two quantities measured side by side in this run, each the median of "
          "`rounds` rounds; absolute values are context. Rows with status `skipped`, `context` or "
          "`not measured` carry no ratio.", "",
          pd.DataFrame([{"cpu": machine["cpu_model"], "cores": machine["cores"], "blas": machine["blas"],
                         "python": machine["python"], "numpy": machine["numpy"], "chainer": machine["chainer"],
                         "espnet": machine["espnet"], "gpu": machine["gpu"]}]).to_markdown(index=False), "",
          f"Bench wall time: {wall:.1f} s ({', '.join(f'{k} {v:.1f} s' for k, v in walls.items())}).", ""]
    for sec in sections:
        sub = frame[frame["section"] == sec]
        md += [f"## {_TITLES[sec]}", "", f"Machine: {mline}.", "", _markdown(sub), ""]
        if sec in plots:
            md += [f"![{plots[sec][0]}]({plots[sec][0]})", ""]
    files["bench.md"] = _atomic_write(os.path.join(out_dir, "bench.md"), "\n".join(md))
    meta = {"quick": quick, "wall": wall, "section_walls": walls, "machine": {k: v for k, v in machine.items()
                                                                              if k != "fingerprint"},
            "raw": raw}
    files["bench.json"] = _atomic_write(os.path.join(out_dir, "bench.json"),
                                        json.dumps(meta, indent=1, sort_keys=True, default=_json_default) + "\n")
    return {"dir": out_dir, "files": files, "frame": frame, "wall": wall, "section_walls": walls}


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    return str(o)


def _headlines(frame: Any) -> list[str]:
    out = []
    for _, r in frame.iterrows():
        item = r["item"]
        keep = (r["section"] in ("overhead", "scaling", "make") and not item.startswith("context")
                or (r["section"] == "comparator" and "float32 64 MiB" in item)
                or (r["section"] == "oracle" and "base" in item)
                or (r["section"] == "determinism" and r["status"] in ("skipped", "derived")))
        if keep:
            val = "" if isinstance(r["ratio"], float) and math.isnan(r["ratio"]) else f"{r['ratio']:.3g}"
            tgt = f" (target {r['target']}: {r['status']})" if r["target"] else ""
            out.append(f"  {r['section']:12s} {item:60s} {val}{tgt}")
    return out


def cmd_bench(args: Any) -> int:
    """The ``bench`` verb: ``python -m harness bench [--out DIR] [--quick]``."""
    res = run_bench(getattr(args, "out", None), quick=bool(getattr(args, "quick", False)))
    print("\n".join(_headlines(res["frame"])))
    print(f"\nbench: {res['files']['bench.md']} ({res['wall']:.0f} s)")
    return 0
