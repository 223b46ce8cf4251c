"""A Python interpreter that has the venv's packages (NumPy, Chainer, ESPnet) but cannot import the harness.

The venv holds the harness as an editable install: a ``.pth`` file in its site-packages puts the source tree on
the path of every interpreter that processes it. :func:`harness_free_python` builds a throwaway virtual
environment beside a test (its ``pyvenv.cfg`` names the base interpreter) whose own site-packages holds one
``.pth`` line: the venv's site-packages directory. A directory named by a ``.pth`` line is put on the path
without its own ``.pth`` files being processed, so the editable install's hook never runs there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

__all__ = ["harness_free_python"]


def harness_free_python(where: Path) -> str:
    """The path of the interpreter; asserts that it imports NumPy and Chainer and fails to import harness."""
    root = where / "harness-free-venv"
    bindir = root / "bin"
    site = root / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    bindir.mkdir(parents=True, exist_ok=True)
    site.mkdir(parents=True, exist_ok=True)
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    (root / "pyvenv.cfg").write_text(f"home = {base.parent}\ninclude-system-site-packages = false\n"
                                     f"version = {sys.version_info.major}.{sys.version_info.minor}."
                                     f"{sys.version_info.micro}\n")
    python = bindir / "python"
    if not python.exists():
        os.symlink(base, python)
    (site / "venv-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = subprocess.run([str(python), "-I", "-c", "import numpy, threadpoolctl\nimport harness"],
                           capture_output=True, text=True, cwd=where, timeout=120)
    assert probe.returncode == 1 and "No module named 'harness'" in probe.stderr, probe.stderr
    return str(python)
