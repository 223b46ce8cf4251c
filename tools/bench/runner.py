"""The whole bench: run the sections, write ``bench.csv``, ``bench.md``, ``bench.json`` and the plots."""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import time
from typing import Any, Callable, Sequence

import numpy as np

from tools.bench.common import COLUMNS, Row, atomic_write, log, machine_info, machine_line

__all__ = ["SECTIONS", "TITLES", "LEVELS", "run_bench", "new_bench_dir", "headlines"]

#: Section keys, in report order.
SECTIONS = ("overhead", "scaling", "comparator", "digest", "oracle", "sizes", "determinism", "hook", "xdist", "gate",
            "make")

#: ``full`` (``make bench``), ``quick`` (every size shrunk, about a minute), ``smoke`` (tiny inputs in this
#: process, a few seconds: what ``make test`` runs; the xdist section is skipped there with a reason).
LEVELS = ("full", "quick", "smoke")

TITLES = {
    "overhead": "1. Overhead ratio of a report-like campaign",
    "scaling": "2. How cost grows with the corpus (1x, 4x, 16x)",
    "comparator": "3. Comparator throughput",
    "digest": "4. Digest algorithms against numpy.array_equal",
    "oracle": "5. Oracle cost",
    "sizes": "5b. From ci sizes to realistic ones: oracle and harness seconds per subject second",
    "determinism": "6. The price of determinism (embed_id backward)",
    "hook": "7. The localize hook: a run with HashStreamHook installed / without",
    "xdist": "8. The ci gate under pytest-xdist",
    "gate": "8b. A failing gate against a green one",
    "make": "9. make test / make report times",
}


def _runners(level: str, quiet: bool, reports_dir: str | None
             ) -> dict[str, Callable[[], tuple[list[Row], dict[str, Any]]]]:
    from tools.bench import (
        comparator,
        determinism,
        digest,
        gate_speed,
        hook,
        make_times,
        oracle,
        overhead,
        scaling,
        sizes,
        xdist,
    )

    return {
        "overhead": lambda: overhead.bench_overhead(level, quiet=quiet),
        "scaling": lambda: scaling.bench_scaling(level, quiet=quiet),
        "comparator": lambda: comparator.bench_comparator(level, quiet=quiet),
        "digest": lambda: digest.bench_digest(level, quiet=quiet),
        "oracle": lambda: oracle.bench_oracle(level, quiet=quiet),
        "sizes": lambda: sizes.bench_sizes(level, quiet=quiet),
        "determinism": lambda: determinism.bench_determinism(level, quiet=quiet),
        "hook": lambda: hook.bench_hook(level, quiet=quiet),
        "xdist": lambda: xdist.bench_xdist(level, quiet=quiet),
        "gate": lambda: gate_speed.bench_gate(level, quiet=quiet),
        "make": lambda: make_times.bench_make_times(reports_dir),
    }


def _plots() -> dict[str, tuple[str, Callable[[dict[str, Any], str], str]]]:
    from tools.bench import comparator, determinism, digest, oracle, overhead, scaling, sizes

    return {"overhead": ("overhead.png", overhead.plot_overhead), "scaling": ("scaling.png", scaling.plot_scaling),
            "comparator": ("comparator_throughput.png", comparator.plot_comparator),
            "digest": ("digest.png", digest.plot_digest), "oracle": ("oracle_cost.png", oracle.plot_oracle),
            "sizes": ("sizes.png", sizes.plot_sizes),
            "determinism": ("determinism.png", determinism.plot_determinism)}


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


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    return str(o)


def run_bench(out_dir: str | None = None, level: str = "full", quiet: bool = False,
              sections: Sequence[str] = SECTIONS, reports_dir: str | None = None) -> dict[str, Any]:
    """Run the bench's ``sections`` at ``level`` into ``out_dir``; returns ``{"dir", "files", "frame", "wall",
    "section_walls"}``.

    Raises:
        InvalidArgument: for an unknown level or section, before anything runs.
    """
    import pandas as pd

    from harness.core.errors import InvalidArgument

    if level not in LEVELS:
        raise InvalidArgument(f"level={level!r} is not one of {', '.join(LEVELS)}")
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise InvalidArgument(f"sections={','.join(unknown)!r}: not bench sections ({', '.join(SECTIONS)})")
    t_start = time.perf_counter()
    out_dir = out_dir or new_bench_dir()
    os.makedirs(out_dir, exist_ok=True)
    machine = machine_info()
    mline = machine_line(machine)
    log(f"{level} bench into {out_dir} on {mline}", quiet)
    if machine["bytecode"] != "kept":
        log(f"bytecode caches {machine['bytecode']}", quiet)
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    walls: dict[str, float] = {}
    runners, plots = _runners(level, quiet, reports_dir), _plots()
    files: dict[str, str] = {}
    for sec in sections:
        t0 = time.perf_counter()
        sec_rows, sec_raw = runners[sec]()
        walls[sec] = time.perf_counter() - t0
        rows.extend(sec_rows)
        raw[sec] = sec_raw
        if sec in plots and sec_raw:
            name, fn = plots[sec]
            files[name] = fn(sec_raw, os.path.join(out_dir, name))
        log(f"section {sec}: {walls[sec]:.1f} s", quiet)
    frame = pd.DataFrame([r.as_dict(mline) for r in rows], columns=list(COLUMNS))
    wall = time.perf_counter() - t_start
    files["bench.csv"] = atomic_write(os.path.join(out_dir, "bench.csv"), frame.to_csv(index=False))
    md = [f"# harness bench ({level})", "",
          "Every figure is a ratio of two quantities measured side by side in this run (the median of `rounds` "
          "rounds, the best of them for the digest section); absolute values are context. Rows with status "
          "`skipped`, `context` or `not measured` carry no ratio.", "",
          pd.DataFrame([{"cpu": machine["cpu_model"], "cores": machine["cores"], "blas": machine["blas"],
                         "python": machine["python"], "numpy": machine["numpy"], "chainer": machine["chainer"],
                         "espnet": machine["espnet"], "gpu": machine["gpu"],
                         "bytecode caches": machine["bytecode"]}]).to_markdown(index=False), "",
          f"Bench wall time: {wall:.1f} s ({', '.join(f'{k} {v:.1f} s' for k, v in walls.items())}).", ""]
    for sec in sections:
        sub = frame[frame["section"] == sec]
        md += [f"## {TITLES[sec]}", "", f"Machine: {mline}.", "", _markdown(sub), ""]
        if sec in plots and plots[sec][0] in files:
            md += [f"![{plots[sec][0]}]({plots[sec][0]})", ""]
    files["bench.md"] = atomic_write(os.path.join(out_dir, "bench.md"), "\n".join(md))
    meta = {"level": level, "quick": level != "full", "wall": wall, "section_walls": walls,
            "machine": {k: v for k, v in machine.items() if k != "fingerprint"}, "raw": raw}
    files["bench.json"] = atomic_write(os.path.join(out_dir, "bench.json"),
                                       json.dumps(meta, indent=1, sort_keys=True, default=_json_default) + "\n")
    return {"dir": out_dir, "files": files, "frame": frame, "wall": wall, "section_walls": walls}


def headlines(frame: Any) -> list[str]:
    """The rows worth printing on the terminal: ratios with targets, and each section's main figure."""
    out = []
    for _, r in frame.iterrows():
        item = r["item"]
        keep = (r["section"] in ("overhead", "make", "xdist", "gate") and not item.startswith(("context", "breakdown"))
                or r["section"] == "scaling" and ("overhead ratio" in item or "largest" in item)
                or r["section"] == "digest"
                or (r["section"] == "comparator"
                    and ("float32 64 MiB" in item or "float32 1 KiB identical: vs array_equal" == item))
                or (r["section"] == "oracle" and "base" in item)
                or (r["section"] == "determinism" and r["status"] in ("skipped", "derived")))
        if keep:
            val = "" if isinstance(r["ratio"], float) and math.isnan(r["ratio"]) else f"{r['ratio']:.3g}"
            tgt = f" (target {r['target']}: {r['status']})" if isinstance(r["target"], str) and r["target"] else ""
            out.append(f"  {r['section']:12s} {item:60s} {val}{tgt}")
    return out
