"""Throwaway environments for ``harness bisect``: make one, install pinned packages into it, run a probe in it,
and list a package's released versions.

An environment is a virtual environment (``uv venv`` where uv is installed, else ``python -m venv``) laid over
the packages of the interpreter running the harness: a ``.pth`` file adds that interpreter's site-packages after
the environment's own, so a probe installs only the packages it pins (``--no-deps``) and takes everything else
(Chainer, NumPy where not pinned, the harness's own dependencies) from the harness's environment. What a probe
installs comes first on its path, so the pins decide; the probe reports the versions it imported, and a pin that
did not take effect is said.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

__all__ = ["Installer", "InstallFailed", "installer", "make_env", "install", "run_probe", "released_versions",
           "CHECKOUT"]

#: The checkout the probes import the harness from (first on their ``PYTHONPATH``).
CHECKOUT = str(Path(__file__).resolve().parents[2])


class InstallFailed(Exception):
    """A pinned version could not be installed (its last lines of output say why)."""


@dataclass(frozen=True)
class Installer:
    """How environments are made and filled: ``uv`` or ``pip`` (with ``python -m venv``), and where packages
    come from (``find_links`` directories, ``no_index``: those only)."""

    tool: str
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    timeout: float = 900.0

    def source_args(self) -> list[str]:
        args = [a for d in self.find_links for a in ("--find-links", d)]
        return args + (["--no-index"] if self.no_index else [])


def installer(prefer: str, find_links: Sequence[str] = (), no_index: bool = False) -> Installer:
    """``uv`` where it is installed and ``prefer`` allows it (``auto`` or ``uv``), else ``pip``."""
    tool = "uv" if prefer in ("auto", "uv") and shutil.which("uv") else "pip"
    return Installer(tool, tuple(os.path.abspath(d) for d in find_links), no_index)


def _run(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env)


def _tail(r: subprocess.CompletedProcess, n: int = 3) -> str:
    lines = [ln for ln in (r.stderr + r.stdout).splitlines() if ln.strip() and not ln.startswith("WARNING")]
    return " | ".join(lines[-n:]) or f"exit {r.returncode}"


def make_env(path: str, inst: Installer) -> str:
    """A fresh environment at ``path`` over this interpreter's packages; its Python."""
    shutil.rmtree(path, ignore_errors=True)
    argv = ["uv", "venv", "-q", "--python", sys.executable, path] if inst.tool == "uv" else \
        [sys.executable, "-m", "venv", "--without-pip", path]
    r = _run(argv, inst.timeout)
    if r.returncode != 0:
        raise InstallFailed(f"cannot create an environment in {path}: {_tail(r)}")
    python = os.path.join(path, "Scripts" if os.name == "nt" else "bin", "python")
    r = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 60)
    site = r.stdout.strip()
    base = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    # executed by the probe's site module: the harness environment's packages (and its own .pth files), after
    # the probe's own
    Path(site, "_harness_bisect_base.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in sorted(base)))
    return python


def install(python: str, pins: Mapping[str, str], inst: Installer) -> None:
    """Install ``name==version`` for each pin into the environment of ``python``, without dependencies (the
    rest comes from the harness's environment); :class:`InstallFailed` with the installer's reason."""
    reqs = [f"{n}=={v}" for n, v in sorted(pins.items())]
    if not reqs:
        return
    if inst.tool == "uv":
        argv = ["uv", "pip", "install", "-q", "--python", python, "--no-deps", *inst.source_args(), *reqs]
    else:
        argv = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--ignore-installed",
                "--disable-pip-version-check", "--no-warn-script-location", *inst.source_args(), *reqs]
    r = _run(argv, inst.timeout)
    if r.returncode != 0:
        raise InstallFailed(_tail(r))


def run_probe(python: str, request: Mapping[str, Any], timeout: float, env: Mapping[str, str] | None = None
              ) -> dict[str, Any]:
    """Run :mod:`harness.verbs.bisect_probe` in the environment of ``python``: its JSON answer. ``env``: the
    variables the context sets at start-up (``PYTHONHASHSEED``, ``OMP_NUM_THREADS``)."""
    path = os.pathsep.join([CHECKOUT, os.getcwd()] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                      if p])
    full = {**os.environ, **(env or {}), "PYTHONPATH": path, "PYTHONNOUSERSITE": "1"}
    try:
        r = _run([python, "-m", "harness.verbs.bisect_probe", json.dumps(dict(request))], timeout, full)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"the probe ran past {timeout:g} s"}
    last = (r.stdout.strip().splitlines() or [""])[-1]
    try:
        return json.loads(last)
    except json.JSONDecodeError:
        return {"status": "crashed", "error": f"the probe exited {r.returncode}: {_tail(r)}"}


def _local_versions(name: str, dirs: Sequence[str]) -> set[Version]:
    out: set[Version] = set()
    want = canonicalize_name(name)
    for d in dirs:
        for f in os.listdir(d):
            try:
                if f.endswith(".whl"):
                    n, v = parse_wheel_filename(f)[:2]
                elif f.endswith((".tar.gz", ".zip")):
                    n, v = parse_sdist_filename(f)
                else:
                    continue
            except Exception:  # noqa: BLE001 - a file that is not a distribution is no version
                continue
            if n == want:
                out.add(v)
    return out


def released_versions(name: str, inst: Installer) -> list[Version]:
    """The versions of ``name`` there are to install, oldest first: the wheels and sdists in the find-links
    directories, and unless ``no_index`` the index's (``pip index versions``)."""
    found = _local_versions(name, inst.find_links)
    if not inst.no_index:
        r = _run([sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check",
                  *inst.source_args()], inst.timeout)
        m = re.search(r"Available versions:\s*(.+)", r.stdout)
        for v in (m.group(1).split(",") if m else ()):
            try:
                found.add(Version(v.strip()))
            except InvalidVersion:
                continue
    return sorted(found)
