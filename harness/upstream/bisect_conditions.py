"""What changes a probe's bits beside its packages, for ``harness bisect``: recorded once, pinned in every probe.

The same wheels give other bits on another CPU, with other OpenBLAS kernels (``OPENBLAS_CORETYPE``; OpenBLAS
picks them from the CPU where it is not set) or with another number of BLAS threads. :func:`measure` takes the
CPU (model and flags, :mod:`harness.core.env`'s fingerprint reading), the variables the harness sets in every
worker and those the context and the user pin (``--env NAME=VALUE``), then asks the harness's own NumPy in a
child which kernels and threads OpenBLAS picks under them; what it picked is pinned too, so that every probe
runs the kernels and threads the answer names. Every other variable that can change results
(:data:`harness.core.env.RESULT_ENV_PATTERNS`) is left out of a probe's environment, so nothing unrecorded
reaches it. :func:`held` checks a probe's report against the pins.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from harness.core import lifeline
from harness.core.contexts import get_context
from harness.core.errors import InvalidArgument, SetupError
from harness.upstream import bisect_envs as envs

__all__ = ["Conditions", "THREAD_VARS", "CORETYPE", "REPORT", "parse_env", "pinned_once", "context_env", "measure",
           "held", "report_of", "blas_words"]

#: The variables that set how many threads a BLAS runs (OpenBLAS, OpenMP, MKL): all pinned to one count.
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: The variable that picks OpenBLAS's kernels.
CORETYPE = "OPENBLAS_CORETYPE"

#: Run as ``python -I -c REPORT DIST...``: the versions of the distributions named, and the BLAS NumPy loaded
#: (threadpoolctl's view: its kernels and threads), as one JSON line.
REPORT = r"""
import json, sys
from importlib import metadata
out = {"versions": {}, "blas": []}
for d in sys.argv[1:]:
    try:
        out["versions"][d] = metadata.version(d)
    except metadata.PackageNotFoundError:
        out["versions"][d] = None
try:
    import numpy
    from threadpoolctl import threadpool_info
    out["blas"] = [{k: lib.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
                   for lib in threadpool_info() if lib.get("user_api") == "blas"]
except Exception as exc:
    out["problem"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""

def _fingerprint() -> Any:
    """:mod:`harness.core.env`, imported when first needed (it imports NumPy; ``--help`` must not)."""
    from harness.core import env

    return env


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_env(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``["OPENBLAS_CORETYPE=SkylakeX"]`` -> ``(("OPENBLAS_CORETYPE", "SkylakeX"),)``; one line naming the item
    otherwise (a name given twice with two values too: :func:`pinned_once`)."""
    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not _NAME.match(name):
            raise InvalidArgument(f"env={item!r}: a pin is NAME=VALUE (e.g. OPENBLAS_CORETYPE=SkylakeX)")
        out.append((name, value))
    return pinned_once(out)


def pinned_once(pins: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The (NAME, VALUE) pins sorted, each name once: a name pinned to two values is one line naming both."""
    out: dict[str, str] = {}
    for name, value in pins:
        if out.get(name, value) != value:
            raise InvalidArgument(f"env={f'{name}={value}'!r}: {name} is pinned twice ({out[name]!r} and {value!r})")
        out[name] = value
    return tuple(sorted(out.items()))


def context_env(name: str) -> dict[str, str]:
    """The variables that set context ``name`` up in a probe's process (a probe runs the exported script, which
    knows no context): its own variables, its BLAS threads as :data:`THREAD_VARS`, Chainer's debug mode as
    ``CHAINER_DEBUG``. A context a probe cannot set up is refused in one line."""
    context = get_context(name)  # an unknown one is refused here, in one line
    if not context.applies_to("cpu"):
        raise InvalidArgument(f"context={name!r}: applies only to {', '.join(context.devices)}; a probe runs on "
                              "the CPU")
    out = dict(context.env)
    if context.blas_threads is not None:
        out.update({v: str(context.blas_threads) for v in THREAD_VARS})
    for key, value in context.chainer_config:
        if key != "debug":
            raise InvalidArgument(f"context={name!r}: sets chainer.config.{key}, which a probe cannot set up")
        out["CHAINER_DEBUG"] = "1" if value else "0"
    return out


def _cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return sorted(line.split(":", 1)[1].split())
    except OSError:
        pass
    return []


def blas_words(blas: Sequence[Mapping[str, Any]]) -> str:
    """``OpenBLAS SkylakeX kernels, 2 threads`` for a :data:`REPORT`'s ``blas``."""
    if not blas:
        return "no BLAS that threadpoolctl knows"
    lib = blas[0]
    api = {"openblas": "OpenBLAS", "mkl": "MKL", "blis": "BLIS"}.get(str(lib.get("internal_api")),
                                                                     str(lib.get("internal_api")))
    arch = f" {lib['architecture']} kernels" if lib.get("architecture") else ""
    n = lib.get("num_threads")
    return f"{api}{arch}, {n} thread{'s' if n != 1 else ''}"


@dataclass(frozen=True)
class Conditions:
    """What a bisection holds fixed beside the packages."""

    cpu: str                              # the CPU's model name
    cpu_flags: str                        # a digest of its feature flags (sorted)
    env: tuple[tuple[str, str], ...]      # every variable pinned in each probe's environment
    blas: str                             # what the harness's own BLAS picked under them (:func:`blas_words`)
    user: tuple[tuple[str, str], ...] = ()  # the pins the user gave (said with the answer)

    def key(self) -> list[Any]:
        """What of the conditions a cached answer must share: the CPU and the pinned variables."""
        return [self.cpu, self.cpu_flags, [list(p) for p in self.env]]

    def words(self) -> str:
        """``on OpenBLAS SkylakeX kernels, 2 threads, AMD EPYC`` (and the user's other pins)."""
        said = {CORETYPE, *THREAD_VARS}
        extra = ", ".join(f"{n}={v}" for n, v in self.user if n not in said)
        return f"on {self.blas}, {self.cpu}" + (f", with {extra}" if extra else "")

    def probe_env(self) -> dict[str, str]:
        """A probe's environment: this process's without any variable that can change results, then the pins."""
        relevant = set(_fingerprint().result_env())  # (the fingerprint's own reading of which variables matter)
        return {**{k: v for k, v in os.environ.items() if k not in relevant}, **dict(self.env)}


def report_of(python: str, env: Mapping[str, str], dists: Sequence[str] = ()) -> dict[str, Any]:
    r = lifeline.run_guarded([python, "-I", "-c", REPORT, *dists], 300, env=env)
    try:
        out = json.loads((r.stdout.strip().splitlines() or [""])[-1])
    except json.JSONDecodeError:
        out = None
    if r.code != 0 or not isinstance(out, dict):
        raise envs.InstallFailed(envs.cause_line(r.stderr, f"the report of its packages exited {r.code}"))
    return out


def measure(context: str, user: Sequence[tuple[str, str]]) -> Conditions:
    """The conditions of this machine under ``context`` and the user's pins (module docstring)."""
    fingerprint = _fingerprint()
    pinned = {**fingerprint.result_env(), **context_env(context), **dict(user)}
    start = Conditions(fingerprint.cpu_model(), "", tuple(sorted(pinned.items())), "")
    try:
        got = report_of(sys.executable, start.probe_env(), ())
    except envs.InstallFailed as exc:
        raise SetupError(f"bisect: cannot read which BLAS kernels and threads NumPy picks here: {exc}") from None
    blas = got.get("blas") or []
    if got.get("problem"):
        raise SetupError(f"bisect: cannot read which BLAS kernels and threads NumPy picks here: {got['problem']}")
    if blas:
        if blas[0].get("architecture") and blas[0].get("internal_api") == "openblas":
            pinned.setdefault(CORETYPE, str(blas[0]["architecture"]))
        if blas[0].get("num_threads"):
            for v in THREAD_VARS:
                pinned.setdefault(v, str(blas[0]["num_threads"]))
    flags = hashlib.sha256(" ".join(_cpu_flags()).encode()).hexdigest()[:16]
    return Conditions(start.cpu, flags, tuple(sorted(pinned.items())), blas_words(blas), tuple(user))


def held(report: Mapping[str, Any], cond: Conditions) -> str | None:
    """Why a probe's own report (:data:`REPORT`) breaks the pinned conditions (other kernels, other threads), or
    None where it keeps them (or its BLAS says nothing of them)."""
    blas = report.get("blas") or []
    if not blas:
        return None
    pins, lib = dict(cond.env), blas[0]
    want = pins.get(CORETYPE)
    if want and lib.get("internal_api") == "openblas" and lib.get("architecture") \
            and str(lib["architecture"]).lower() != want.lower():
        return f"its OpenBLAS {lib.get('version')} picked {lib['architecture']} kernels, not {CORETYPE}={want}"
    threads = pins.get("OPENBLAS_NUM_THREADS")
    if threads and lib.get("num_threads") is not None and str(lib["num_threads"]) != threads:
        return f"its BLAS runs {lib['num_threads']} threads, not the {threads} pinned"
    return None
