"""Throwaway environments for ``harness bisect``: make one, install pinned packages into it, run a command in
it, and list a package's released versions.

An environment is a virtual environment (``uv venv`` where uv is chosen, else ``python -m venv``) laid over the
packages of the interpreter running the harness: a ``.pth`` file adds that interpreter's site-packages after the
environment's own, so a probe installs only the packages it pins (``--no-deps``) and takes everything else from
the harness's environment. What a probe installs comes first on its path, so the pins decide (the probe reports
the versions it imported). Chainer's sdists are built as ``make venv`` builds them: with ``setuptools<70`` and
``wheel`` in the environment and ``--no-build-isolation``.

Every child (venv creation, pip, uv, the probe's own commands) runs under the lifeline's guard
(:func:`harness.core.lifeline.run_guarded`): it dies with the harness, and takes the child's whole process group
(pip's build subprocesses) with it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from harness.core import lifeline
from harness.core.errors import InvalidArgument

__all__ = ["Installer", "InstallFailed", "installer", "make_env", "install", "released_versions", "cause_line"]

class InstallFailed(Exception):
    """An environment could not be made, or a pinned version could not be installed (the cause's own line)."""


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
    """``uv`` where asked for (refused in one line where it is not on the PATH) or where ``auto`` finds it,
    else ``pip``."""
    if prefer not in ("auto", "uv", "pip"):
        raise InvalidArgument(f"installer={prefer!r} must be one of auto, uv, pip")
    if prefer == "uv" and not shutil.which("uv"):
        raise InvalidArgument("installer='uv': uv is not on the PATH (install it, or use --installer pip or auto)")
    for d in find_links:
        if not os.path.isdir(d):
            raise InvalidArgument(f"find-links={d!r} is not a directory")
    tool = "uv" if prefer in ("auto", "uv") and shutil.which("uv") else "pip"
    return Installer(tool, tuple(os.path.abspath(d) for d in find_links), no_index)


#: pip's lines that say where to look, not what went wrong.
_BOILERPLATE = re.compile(r"^(note:|hint:|WARNING|\[end of output\]|error: (subprocess-exited-with-error|"
                          r"metadata-generation-failed)|[×╰│|]|See above|This error originates|ERROR: Failed to build"
                          r"|ERROR: Failed building|ERROR: Could not build wheels|exit code:)", re.I)
_EXCEPTION = re.compile(r"^(\w+\.)*\w*(Error|Exception|Exit)\b:?")


def cause_line(text: str, fallback: str) -> str:
    """The line of a failed command's output that says why: its last exception line (``ModuleNotFoundError:
    No module named 'pkg_resources'``), else its last ``ERROR:`` line, else its last line; pip's pointers to
    other lines left out."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    useful = [ln for ln in lines if not _BOILERPLATE.match(ln)]
    for pick in ([ln for ln in useful if _EXCEPTION.match(ln)], [ln for ln in useful if ln.startswith("ERROR:")],
                 useful, lines):
        if pick:
            return pick[-1][:400]
    return fallback


def _failed(r: lifeline.Ran, what: str, timeout: float) -> InstallFailed:
    if r.code is None:
        return InstallFailed(f"{what} ran past {timeout:g} s")
    return InstallFailed(cause_line(r.stderr + "\n" + r.stdout, f"{what} exited {r.code}"))


def make_env(path: str, inst: Installer) -> str:
    """A fresh environment at ``path`` (absent) over this interpreter's packages; its Python."""
    argv = ["uv", "venv", "-q", "--python", sys.executable, path] if inst.tool == "uv" else \
        [sys.executable, "-m", "venv", "--without-pip", path]
    r = lifeline.run_guarded(argv, inst.timeout)
    if r.code != 0:
        raise _failed(r, f"creating an environment in {path}", inst.timeout)
    python = os.path.join(path, "Scripts" if os.name == "nt" else "bin", "python")
    r = lifeline.run_guarded([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 120)
    if r.code != 0 or not r.stdout.strip():
        raise _failed(r, "the new environment's Python", 120)
    base = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    # read by the probe's site module (``-I`` keeps it): the harness environment's packages (and its own .pth
    # files), after the probe's own
    Path(r.stdout.strip(), "_harness_bisect_base.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in sorted(base)))
    return python


_BUILD_TOOLS_OK = ("import setuptools, wheel, sys; from packaging.version import Version; "
                   "sys.exit(0 if Version(setuptools.__version__) < Version('70') else 1)")


def install(python: str, pins: Mapping[str, str], inst: Installer) -> None:
    """Install ``name==version`` for each pin into the environment of ``python``, without dependencies (the
    rest comes from the harness's environment); Chainer without build isolation, over ``setuptools<70`` and
    ``wheel`` (installed first where the environment does not already see them). :class:`InstallFailed` with
    the cause's line."""
    reqs = [f"{n}=={v}" for n, v in sorted(pins.items())]
    if not reqs:
        return
    built = [r for r in reqs if r.startswith("chainer==")]
    if built and lifeline.run_guarded([python, "-I", "-c", _BUILD_TOOLS_OK], 120).code != 0:
        _install(python, ["setuptools<70", "wheel"], inst, isolated=True)
    plain = [r for r in reqs if r not in built]
    if plain:
        _install(python, plain, inst, isolated=True)
    if built:
        _install(python, built, inst, isolated=False)


def _install(python: str, reqs: list[str], inst: Installer, *, isolated: bool) -> None:
    no_iso = [] if isolated else ["--no-build-isolation"]
    if inst.tool == "uv":
        argv = ["uv", "pip", "install", "-q", "--python", python, "--no-deps", "--reinstall", *no_iso,
                *inst.source_args(), *reqs]
    else:  # the harness environment's pip, run by the environment's Python: it installs there
        argv = [python, "-I", "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", *no_iso,
                "--disable-pip-version-check", "--no-warn-script-location", *inst.source_args(), *reqs]
    r = lifeline.run_guarded(argv, inst.timeout)
    if r.code != 0:
        raise _failed(r, f"installing {' '.join(reqs)}", inst.timeout)


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
        r = lifeline.run_guarded([sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check",
                 *inst.source_args()], inst.timeout)
        m = re.search(r"Available versions:\s*(.+)", r.stdout)
        for v in (m.group(1).split(",") if m else ()):
            try:
                found.add(Version(v.strip()))
            except InvalidVersion:
                continue
    return sorted(found)
