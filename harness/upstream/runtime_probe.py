"""Print, as one JSON object, the runtime fields an issue text names: run as ``python -I runtime_probe.py``.

A program of its own (never imported by the harness): it imports Chainer, so it runs in a child of the interpreter
under report (:func:`harness.upstream.issue_text.runtime_fields`). The fields are those
``chainer.print_runtime_info()`` prints (Platform, Chainer, ChainerX, NumPy, CuPy, iDeep: "not available" where
absent), then Python, the CPU model, the BLAS library with OpenBLAS's core type (threadpoolctl's
``architecture`` where it is importable, else NumPy's build configuration) and its threads, ``OPENBLAS_CORETYPE``
and ESPnet's version where it is installed.

Chainer 7.8.1 does not import on NumPy 2 as shipped: :func:`harness.core.compat.apply` adds what it needs first
(the harness's source tree is put on ``sys.path`` for it: ``-I`` leaves it off). The probe reports whatever
Chainer release is installed (a bisection's environment holds others), so it imports Chainer itself after the
patches rather than through ``import_chainer``, which refuses any release but 7.8.1.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

ABSENT = "not available"
#: What print_runtime_info prints, in its order.
CHAINER_FIELDS = ("Platform", "Chainer", "ChainerX", "NumPy", "CuPy", "iDeep")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def chainer_fields() -> dict[str, str]:
    """``chainer.print_runtime_info()``'s lines as fields; where Chainer does not import, the same fields from
    the installed distributions, Chainer's saying why."""
    out = {"Platform": platform.platform()}
    try:
        # the harness's compatibility layer, loaded from its file: this child may run in an interpreter where the
        # harness is not installed (a throwaway environment), and it imports only NumPy and the standard library
        spec = importlib.util.spec_from_file_location(
            "harness_compat", Path(__file__).resolve().parents[1] / "core" / "compat.py")
        assert spec is not None and spec.loader is not None
        compat = sys.modules["harness_compat"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(compat)
        compat.apply()
        import chainer

        buf = io.StringIO()
        chainer.print_runtime_info(buf)
        for line in buf.getvalue().splitlines():
            key, sep, value = line.partition(":")
            if sep and not line.startswith(" "):
                value = value.strip()
                out[key.strip()] = ABSENT if value.lower() == "not available" else value
    except Exception as exc:  # noqa: BLE001 - a Chainer that does not import is a field's value, not the end
        out["Chainer"] = f"{_version('chainer') or ABSENT} (does not import: {type(exc).__name__}: {exc})"
    for key, dist in (("NumPy", "numpy"), ("CuPy", "cupy"), ("iDeep", "ideep4py")):
        if key not in out:
            out[key] = _version(dist) or (_version("cupy-cuda12x") if dist == "cupy" else "") or ABSENT
    out.setdefault("ChainerX", ABSENT)
    return {**{k: out[k] for k in CHAINER_FIELDS}, **{k: v for k, v in out.items() if k not in CHAINER_FIELDS}}


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or "unknown"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model"):
            return value.strip()
    return platform.processor() or "unknown"


def blas_fields() -> dict[str, str]:
    """The BLAS NumPy uses, OpenBLAS's core type and its threads: threadpoolctl's view of the loaded library
    where it is importable, else NumPy's build configuration (which names the build's target, not the kernels
    picked at run time: said so)."""
    import numpy

    out = {"OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)")}
    try:
        from threadpoolctl import threadpool_info

        blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    except Exception:  # noqa: BLE001 - no threadpoolctl: NumPy's configuration below
        blas = []
    if blas:
        b = blas[0]
        out["BLAS"] = f"{b.get('internal_api', '?')} {b.get('version') or ''}".strip()
        out["OpenBLAS core type"] = str(b.get("architecture") or "not reported")
        out["BLAS threads"] = str(b.get("num_threads"))
        return out
    info: Any = {}
    try:
        info = numpy.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    except Exception:  # noqa: BLE001 - NumPy 1.x prints its configuration only
        info = {}
    out["BLAS"] = f"{info.get('name', 'unknown')} {info.get('version', '')}".strip()
    config = str(info.get("openblas configuration", "")).split()
    cores = [w for w in config if w.isalpha() and w[0].isupper()]
    out["OpenBLAS core type"] = (f"{cores[-1]} (NumPy's build configuration; threadpoolctl is not installed, so "
                                 "the kernels picked at run time are not reported)" if cores else "not reported")
    threads = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    out["BLAS threads"] = threads or f"not reported (threadpoolctl is not installed; {os.cpu_count()} CPUs)"
    return out


def fields() -> dict[str, str]:
    out = chainer_fields()
    out["Python"] = sys.version.replace("\n", " ")
    out["CPU model"] = cpu_model()
    out.update(blas_fields())
    espnet = _version("espnet")
    if espnet:
        out["ESPnet"] = espnet
    return out


if __name__ == "__main__":
    print(json.dumps(fields()))
