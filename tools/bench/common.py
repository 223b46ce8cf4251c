"""What every bench section shares: the row of ``bench.csv``, ratios and medians, plots, the machine."""

from __future__ import annotations

import io
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

__all__ = ["Row", "COLUMNS", "NO_RATIO_STATUSES", "PROJECT_ROOT", "GIB", "MIB", "KIB", "ratio", "median",
           "timed", "fmt_bytes", "slope", "linear_fit", "atomic_write", "figure", "save_fig", "log",
           "machine_info", "machine_line", "bytecode_note"]

#: The checkout root (the folder holding ``harness/`` and ``tools/``).
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIB = 2 ** 30
MIB = 2 ** 20
KIB = 2 ** 10

#: The columns of ``bench.csv``.
COLUMNS = ("section", "item", "ratio", "ratio_is", "numerator", "numerator_value", "denominator",
           "denominator_value", "unit", "rounds", "target", "status", "note", "machine")

#: Statuses of rows that carry no ratio on purpose.
NO_RATIO_STATUSES = ("skipped", "context", "not measured")


@dataclass
class Row:
    """One measured ratio (or, with a status of :data:`NO_RATIO_STATUSES`, one piece of context)."""

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
        """The row as a ``bench.csv`` record, naming the machine it was measured on."""
        d = {k: getattr(self, k) for k in COLUMNS if k != "machine"}
        d["machine"] = machine
        return d


def ratio(num: float, den: float) -> float:
    """``num / den``, NaN when either is not a finite number or ``den`` is 0."""
    try:
        return float(num) / float(den) if den and math.isfinite(den) and math.isfinite(num) else math.nan
    except (TypeError, ZeroDivisionError):
        return math.nan


def median(xs: Iterable[float]) -> float:
    """The median, NaN of nothing."""
    xs = [float(x) for x in xs]
    return statistics.median(xs) if xs else math.nan


def timed(fn: Callable[[], Any], inner: int = 1) -> tuple[float, Any]:
    """Seconds per call of ``fn`` (averaged over ``inner`` back-to-back calls) and its last result."""
    out = None
    t0 = time.perf_counter()
    for _ in range(inner):
        out = fn()
    return (time.perf_counter() - t0) / inner, out


def fmt_bytes(n: float) -> str:
    """``67108864`` -> ``"64 MiB"``; three significant digits, never in exponent form (``"1023 KiB"``)."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) or v >= 100 else f"{v:.3g} {unit}"
    return f"{int(n)} B"


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log(y) against log(x): the growth exponent (1 is linear)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return math.nan
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else math.nan


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least squares ``y = a + b * x``: (a, b, r2). NaNs with fewer than two distinct x."""
    n = len(xs)
    if n < 2 or len(set(xs)) < 2:
        return math.nan, math.nan, math.nan
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    return a, b, (1.0 - ss_res / ss_tot) if ss_tot else 1.0


def atomic_write(path: str, data: str | bytes) -> str:
    """Write ``data`` to ``path`` atomically; returns the path."""
    from harness.core.fileio import atomic_write as _write

    return _write(path, data)


def figure(width: float = 8.0, height: float = 4.5) -> Any:
    """A matplotlib figure off any GUI backend (``Figure`` directly: no pyplot state), 100 dpi."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def save_fig(fig: Any, path: str) -> str:
    """The figure as a PNG at ``path``, written atomically."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return atomic_write(path, buf.getvalue())


def log(msg: str, quiet: bool = False) -> None:
    """A progress line on stderr."""
    if not quiet:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)


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
        "bytecode": bytecode_note(), "fingerprint": fp,
    }


def bytecode_note(environ: Any = None) -> str:
    """Whether this run's processes can keep Python's bytecode caches. Where the environment sets
    ``PYTHONDONTWRITEBYTECODE`` and no ``PYTHONPYCACHEPREFIX``, none is ever written: every process the bench
    starts (each round's interpreter, each worker) compiles the harness from source, and that lands in every
    overhead figure (`make bench` keeps the caches under the venv)."""
    env = os.environ if environ is None else environ
    if env.get("PYTHONDONTWRITEBYTECODE") and not env.get("PYTHONPYCACHEPREFIX"):
        return ("not kept: PYTHONDONTWRITEBYTECODE is set and PYTHONPYCACHEPREFIX is not, so every process "
                "compiles the harness from source (run `make bench`)")
    return "kept"


def machine_line(m: dict[str, Any]) -> str:
    """``"<cpu>, <n> cores, BLAS <...>"``: the machine column of every row."""
    return f"{m['cpu_model']}, {m['cores']} cores, BLAS {m['blas']}"
