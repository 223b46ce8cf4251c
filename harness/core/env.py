"""The environment fingerprint: everything a driver audit needs to say *what* differed between runs.

:func:`fingerprint` takes it; :func:`environment_diff` says which fields of two fingerprints differ (the
likeliest causes of changed bits first: the audit's ``compare`` and the gate's baseline dossier both read it);
:func:`machine_label` names a fingerprint's machine in a few words.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import sys
from typing import Any, Mapping, NamedTuple

from harness.core import compat
from harness.core.worker_defaults import WORKER_ENV_DEFAULTS

#: The ESPnet module under test (the subjects import it; the fingerprint records whether it imports).
ESPNET_MODULE = "espnet.nets.chainer_backend.deterministic_embed_id"

__all__ = ["WORKER_ENV_DEFAULTS", "cpu_model", "result_env", "fingerprint", "setup_problems", "flatten_fingerprint",
           "check_exit",
           "RESULT_ENV_PATTERNS", "EnvDifference", "environment_diff", "env_kind", "ENV_KIND_ORDER", "machine_label"]

#: Environment variables that can change numerical results (exact names or prefixes ending in '*').
RESULT_ENV_PATTERNS: tuple[str, ...] = (
    "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE", "CUPY_*", "CUDA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING", "OPENBLAS_*", "OMP_NUM_THREADS", "OMP_*", "MKL_*", "CHAINER_*",
    "PYTHONHASHSEED", "GOTO_NUM_THREADS", "BLIS_NUM_THREADS",
)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def result_env() -> dict[str, str]:
    """The result-relevant variables a worker starts with: this process's, and the worker defaults."""
    env = {**WORKER_ENV_DEFAULTS, **os.environ}
    out = {}
    for key in sorted(env):
        for pat in RESULT_ENV_PATTERNS:
            if (pat.endswith("*") and key.startswith(pat[:-1])) or key == pat:
                out[key] = env[key]
                break
    return out


def _chainer_part() -> dict[str, Any]:
    from harness.core.errors import SetupError

    try:
        chainer = compat.import_chainer()
    except SetupError as exc:
        return {"version": _version("chainer"), "usable": False, "problem": str(exc)}
    cfg = chainer.config
    keys = ("cudnn_deterministic", "use_cudnn", "debug", "dtype", "use_ideep", "warn_nondeterministic",
            "type_check", "enable_backprop")
    from chainer.backends import cuda

    return {
        "version": chainer.__version__,
        "usable": True,
        "config": {k: str(getattr(cfg, k, None)) for k in keys},
        "cuda_available": bool(cuda.available),
        "cudnn_enabled": bool(cuda.cudnn_enabled),
    }


def _gpu_part() -> dict[str, Any]:
    from harness.core.devices import cupy_status, gpu_presence, gpu_problem
    from harness.core.nvsmi import query_gpus

    cp, reason = cupy_status()
    smi = query_gpus()
    # What the driver says, with or without CuPy: a driver audit needs it most when CuPy is what broke.
    nvsmi = {k: smi[k] for k in ("ok", "reason", "driver_version", "cuda_version", "gpus")}
    presence, presence_reason = gpu_presence()
    problem = gpu_problem()
    if cp is None:
        return {"available": False, "reason": reason, "devices": [], "presence": presence,
                "presence_reason": presence_reason, "problem": problem, "driver_version": smi["driver_version"],
                "cuda_version": smi["cuda_version"], "nvidia_smi": nvsmi}
    rt = cp.cuda.runtime
    devices = []
    for i in range(rt.getDeviceCount()):
        props = rt.getDeviceProperties(i)
        name = props.get("name", b"")
        devices.append({
            "index": i,
            "name": name.decode() if isinstance(name, bytes) else str(name),
            "compute_capability": f"{props.get('major')}.{props.get('minor')}",
            "total_memory": int(props.get("totalGlobalMem", 0)),
            "multiprocessors": int(props.get("multiProcessorCount", 0)),
        })
    try:
        import cupy.cuda.cudnn  # noqa: F401  (gone in CuPy 14)
        cudnn = True
    except Exception:  # noqa: BLE001
        cudnn = False
    return {
        "available": True,
        "reason": reason,
        "presence": presence,
        "presence_reason": presence_reason,
        "problem": problem,
        "cuda_version": smi["cuda_version"],
        "nvidia_smi": nvsmi,
        "cupy": cp.__version__,
        "cuda_runtime": rt.runtimeGetVersion(),
        "cuda_driver_api": rt.driverGetVersion(),
        "driver_version": smi["driver_version"],
        "cudnn_in_cupy": cudnn,
        "devices": devices,
    }


def fingerprint() -> dict[str, Any]:
    """The fingerprint as a JSON-able dict. Nothing here raises: a missing part says why in one field."""
    from harness.core.contexts import blas_info

    compat.apply()
    fp: dict[str, Any] = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "packages": {d: _version(d) for d in ("numpy", "chainer", "cupy", "cupy-cuda13x", "cupy-cuda12x",
                                               "espnet", "pandas", "hypothesis", "threadpoolctl", "pytest")},
        "cpu": {"model": cpu_model(), "cores": os.cpu_count()},
        "blas": blas_info(),
        "env": result_env(),
    }
    fp["chainer"] = _chainer_part()
    fp["compat_patches"] = list(compat.applied())
    try:
        # The module the ESPnet subjects run (core may not import subjects: it is imported by name here).
        import importlib

        compat.import_chainer()
        fp["espnet_module"] = importlib.import_module(ESPNET_MODULE).__name__
    except Exception as exc:  # noqa: BLE001
        fp["espnet_module"] = None
        fp.setdefault("problems", []).append(str(exc).splitlines()[0])
    fp["gpu"] = _gpu_part()
    fp["problems"] = fp.get("problems", []) + setup_problems(fp)
    return fp


def setup_problems(fp: dict[str, Any] | None = None) -> list[str]:
    """One readable line per set-up problem (missing/wrong Chainer, ESPnet, blind CuPy)."""
    fp = fp if fp is not None else {"chainer": _chainer_part(), "gpu": _gpu_part(),
                                    "packages": {"espnet": _version("espnet")}}
    out = []
    ch = fp["chainer"]
    if not ch.get("usable"):
        out.append(ch.get("problem") or "chainer is not usable")
    if fp["packages"].get("espnet") is None:
        out.append("espnet is not installed (make installs espnet==202511 with --no-deps)")
    gpu = fp["gpu"]
    if gpu.get("problem"):
        out.append(gpu["problem"])
    elif not gpu["available"] and re.search(r"cannot see a CUDA driver|failed to import", gpu["reason"]):
        out.append(gpu["reason"])
    return out


def check_exit(fp: dict[str, Any]) -> int:
    """The exit code of ``harness env --check``: 2 when Chainer or ESPnet is unusable, or a GPU is
    present but unusable (:func:`harness.core.devices.gpu_problem`, recorded as ``fp["gpu"]["problem"]``); else 0."""
    if fp["gpu"].get("problem"):
        return 2
    return 2 if any("chainer" in p or "espnet" in p for p in fp["problems"]) else 0


def flatten_fingerprint(d: Any, prefix: str = "") -> dict[str, Any]:
    """A nested fingerprint as ``{"blas.0.num_threads": 2, "env.OMP_NUM_THREADS": "1", ...}``."""
    out: dict[str, Any] = {}
    if isinstance(d, dict) and d:
        for k, v in d.items():
            out.update(flatten_fingerprint(v, f"{prefix}{k}."))
    elif isinstance(d, (list, tuple)) and d and all(isinstance(x, dict) for x in d):
        for i, v in enumerate(d):
            out.update(flatten_fingerprint(v, f"{prefix}{i}."))
    else:
        out[prefix.rstrip(".")] = d
    return out


# ---- two fingerprints: what differs ------------------------------------------------------------
class EnvDifference(NamedTuple):
    """One fingerprint field that differs: its flat name, its kind (:func:`env_kind`) and both values, shortened."""

    field: str
    kind: str
    A: str
    B: str


#: The kinds of :func:`env_kind`, the likeliest causes of changed bits first.
ENV_KIND_ORDER = ("GPU driver", "CUDA", "CuPy", "GPU", "BLAS threads", "BLAS", "environment variable", "package",
                  "CPU", "Chainer config", "Python/OS", "other")


def env_kind(key: str) -> str:
    """What a flat fingerprint field is about (one of :data:`ENV_KIND_ORDER`)."""
    k = key.lower()
    if k.startswith("env."):
        return "environment variable"
    if "driver" in k:
        return "GPU driver"
    if "cuda" in k and not k.startswith("packages."):
        return "CUDA"
    if k.startswith("gpu.devices") and k.endswith(".name"):
        return "GPU"
    if k.startswith("gpu.cupy") or k.startswith("packages.cupy"):
        return "CuPy"
    if k.startswith("gpu."):
        return "GPU"
    if k.startswith("blas."):
        return "BLAS threads" if k.endswith("num_threads") else "BLAS"
    if k.startswith("packages.") or k.startswith("chainer.version"):
        return "package"
    if k.startswith("cpu."):
        return "CPU"
    if k.startswith("chainer."):
        return "Chainer config"
    if k in ("python", "implementation", "platform"):
        return "Python/OS"
    return "other"


def _short(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def environment_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[EnvDifference]:
    """The fingerprint fields that differ between two environments, the likeliest causes of changed bits first.

    >>> [tuple(d) for d in environment_diff({"blas": [{"num_threads": 2}]}, {"blas": [{"num_threads": 1}]})]
    [('blas.0.num_threads', 'BLAS threads', '2', '1')]
    """
    fa, fb = flatten_fingerprint(dict(a)), flatten_fingerprint(dict(b))
    rows = []
    for key in sorted(set(fa) | set(fb)):
        va, vb = fa.get(key, "(absent)"), fb.get(key, "(absent)")
        if json.dumps(va, sort_keys=True, default=str) != json.dumps(vb, sort_keys=True, default=str):
            rows.append(EnvDifference(key, env_kind(key), _short(va), _short(vb)))
    rows.sort(key=lambda r: (ENV_KIND_ORDER.index(r.kind), r.field))
    return rows


def machine_label(env: Mapping[str, Any]) -> str:
    """A short, hostname-free label: GPU name and driver where a GPU is visible, else the CPU
    model with the BLAS library and its thread count (``AMD EPYC, openblas x2``)."""
    gpu = env.get("gpu") or {}
    devs = gpu.get("devices") or []
    if gpu.get("available") and devs:
        name = str(devs[0].get("name") or "GPU")
        more = f" x{len(devs)}" if len(devs) > 1 else ""
        drv = gpu.get("driver_version") or gpu.get("cuda_driver_api") or "?"
        return f"{name}{more}, driver {drv}"
    cpu = (env.get("cpu") or {}).get("model") or "CPU"
    blas = env.get("blas") or []
    if blas:
        b = blas[0]
        return f"{cpu}, {b.get('internal_api') or 'blas'} x{b.get('num_threads')}"
    return f"{cpu}, no BLAS"
