"""Throwaway environments for ``harness bisect``: make one, install pinned packages into it, run a command in
it, and list a package's released versions.

An environment is a virtual environment (``uv venv`` where uv is chosen, else ``python -m venv``) laid over the
packages of the interpreter running the harness: a ``.pth`` file adds that interpreter's site-packages after the
environment's own, so a probe installs only the packages it pins (``--no-deps``) and takes everything else from
the harness's environment. What a probe installs comes first on its path, so the pins decide (the probe reports
the versions it imported). Chainer's sdists are built as ``make venv`` builds them: with ``setuptools<70`` and
``wheel`` in the environment and ``--no-build-isolation``.

Every child (venv creation, pip, uv, the probe's own commands) runs under a guard (:data:`GUARD`): a small
Python process started through :func:`harness.core.lifeline.popen`, which the kernel signals when the harness
ends (whatever way, SIGKILL included) and which then kills the child's whole process group (pip's build
subprocesses with it). The command runs in its own session, so the guard and only the guard ends it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from harness.core import lifeline
from harness.core.errors import InvalidArgument

__all__ = ["Installer", "InstallFailed", "Ran", "installer", "run", "make_env", "install", "released_versions",
           "cause_line", "GUARD"]

#: The guard every child runs under (``python -I -c GUARD ARGV...``): it dies with the harness (SIGTERM from the
#: kernel's parent-death signal, set here first; SIGINT and SIGHUP too) and takes the command's process group
#: with it; on the command's own end it clears the group too, so nothing the command left runs on.
GUARD = r"""
import ctypes, os, signal, subprocess, sys
parent = os.environ.pop("HARNESS_PARENT_PID", "")
child = None
SIGS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
def stop(signum, frame):
    if child is not None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(128 + signum)
for s in SIGS:
    signal.signal(s, stop)
try:
    ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)
except Exception:
    pass
if parent.isdigit() and os.getppid() != int(parent):
    sys.exit(1)
signal.pthread_sigmask(signal.SIG_BLOCK, SIGS)
try:
    child = subprocess.Popen(sys.argv[1:], start_new_session=True,
                             preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGS))
except OSError as exc:
    print(f"cannot start {sys.argv[1]}: {exc}", file=sys.stderr)
    sys.exit(127)
finally:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGS)
code = child.wait()
try:
    os.killpg(child.pid, signal.SIGKILL)
except OSError:
    pass
sys.exit(code if code >= 0 else 128 - code)
"""


class InstallFailed(Exception):
    """An environment could not be made, or a pinned version could not be installed (the cause's own line)."""


@dataclass(frozen=True)
class Ran:
    """What a guarded command did: its exit code (None: killed past its timeout) and its output."""

    code: int | None
    stdout: str
    stderr: str


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


def run(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None, cwd: str | None = None) -> Ran:
    """``argv`` under the guard, its output captured; past ``timeout`` seconds the guard is told to end it (and
    its process group), and ``code`` is None. An interrupt ends the guard (and so the command) before it goes
    on up."""
    proc = lifeline.popen([sys.executable, "-I", "-c", GUARD, *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, errors="replace", env=dict(env or os.environ), cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate()
        return Ran(None, out, err)
    except BaseException:
        proc.send_signal(signal.SIGTERM)  # the guard takes the command's group with it
        proc.wait()
        raise
    return Ran(proc.returncode, out, err)


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


def _failed(r: Ran, what: str, timeout: float) -> InstallFailed:
    if r.code is None:
        return InstallFailed(f"{what} ran past {timeout:g} s")
    return InstallFailed(cause_line(r.stderr + "\n" + r.stdout, f"{what} exited {r.code}"))


def make_env(path: str, inst: Installer) -> str:
    """A fresh environment at ``path`` (absent) over this interpreter's packages; its Python."""
    argv = ["uv", "venv", "-q", "--python", sys.executable, path] if inst.tool == "uv" else \
        [sys.executable, "-m", "venv", "--without-pip", path]
    r = run(argv, inst.timeout)
    if r.code != 0:
        raise _failed(r, f"creating an environment in {path}", inst.timeout)
    python = os.path.join(path, "Scripts" if os.name == "nt" else "bin", "python")
    r = run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 120)
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
    if built and run([python, "-I", "-c", _BUILD_TOOLS_OK], 120).code != 0:
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
    r = run(argv, inst.timeout)
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
        r = run([sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check",
                 *inst.source_args()], inst.timeout)
        m = re.search(r"Available versions:\s*(.+)", r.stdout)
        for v in (m.group(1).split(",") if m else ()):
            try:
                found.add(Version(v.strip()))
            except InvalidVersion:
                continue
    return sorted(found)
