"""What ``nvidia-smi`` says about this machine's GPUs, without CuPy: driver, CUDA version, names, UUIDs,
ECC and MIG mode. Parsing is pure (tested on captured text); :func:`query_gpus` runs the tool once."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from typing import Any

__all__ = ["QUERY_FIELDS", "parse_query_csv", "parse_header", "query_gpus"]

#: The ``--query-gpu`` fields recorded, in order (all present in every driver since R450).
QUERY_FIELDS = ("index", "name", "uuid", "driver_version", "pci.bus_id", "memory.total",
                "ecc.mode.current", "mig.mode.current")
_KEYS = ("index", "name", "uuid", "driver_version", "pci_bus_id", "memory_total_mib", "ecc_mode", "mig_mode")


def parse_query_csv(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits`` output as one dict per GPU.
    ``[N/A]``/``N/A`` become None; index and memory become ints."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(_KEYS):
            raise ValueError(f"nvidia-smi line has {len(parts)} fields, not {len(_KEYS)}: {line.strip()!r}")
        g: dict[str, Any] = {}
        for k, v in zip(_KEYS, parts):
            g[k] = None if v in ("[N/A]", "N/A", "[Not Supported]", "") else v
        for k in ("index", "memory_total_mib"):
            if g[k] is not None and str(g[k]).isdigit():
                g[k] = int(g[k])
        gpus.append(g)
    return gpus


def parse_header(text: str) -> dict[str, str | None]:
    """The driver and CUDA versions in plain ``nvidia-smi``'s banner (``Driver Version: 580.65.06
    CUDA Version: 13.0``); None for one not there."""
    drv = re.search(r"Driver Version:\s*([0-9][0-9.]*)", text)
    cuda = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", text)
    return {"driver_version": drv.group(1) if drv else None, "cuda_version": cuda.group(1) if cuda else None}


def _run(args: list[str], timeout: float) -> tuple[int, str]:
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, (p.stdout if p.returncode == 0 else (p.stdout + p.stderr))


@functools.lru_cache(maxsize=None)
def query_gpus(timeout: float = 15.0) -> dict[str, Any]:
    """``{"found": bool, "ok": bool, "reason", "driver_version", "cuda_version", "gpus": [...]}``.

    ``found``: an ``nvidia-smi`` is on PATH; ``ok``: it answered. Nothing raises: a failure is the reason.
    """
    exe = shutil.which("nvidia-smi")
    out: dict[str, Any] = {"found": exe is not None, "ok": False, "reason": "", "driver_version": None,
                           "cuda_version": None, "gpus": []}
    if exe is None:
        out["reason"] = "nvidia-smi not found"
        return out
    try:
        code, text = _run([exe, "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"], timeout)
        if code != 0:
            first = next((ln.strip() for ln in text.splitlines() if ln.strip()), f"exit code {code}")
            out["reason"] = f"nvidia-smi failed: {first[:200]}"
            return out
        out["gpus"] = parse_query_csv(text)
        code, banner = _run([exe], timeout)
        out.update(parse_header(banner if code == 0 else ""))
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        out["reason"] = f"nvidia-smi failed: {' '.join(str(exc).split())[:200]}"
        return out
    if out["driver_version"] is None and out["gpus"]:
        out["driver_version"] = out["gpus"][0]["driver_version"]
    out["ok"] = True
    names = sorted({str(g["name"]) for g in out["gpus"]})
    out["reason"] = (f"nvidia-smi sees {len(out['gpus'])} GPU(s) ({', '.join(names)}), driver "
                     f"{out['driver_version']}, CUDA {out['cuda_version'] or '?'}" if out["gpus"]
                     else "nvidia-smi sees no GPU")
    return out
