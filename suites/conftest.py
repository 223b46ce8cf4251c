"""Fixtures shared by the suites: ``harness``, the one way a test runs ``python -m harness ...`` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pytest

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class HarnessRun:
    """What one ``python -m harness ...`` subprocess did."""

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str

    @property
    def returncode(self) -> int:  # the name subprocess.CompletedProcess uses
        return self.rc


def run_harness(*args: str, env: Mapping[str, str | None] | None = None, pythonpath: str | None = None,
                cwd: str | os.PathLike[str] = ROOT, timeout: float = 300) -> HarnessRun:
    """Run ``python -m harness *args`` with this interpreter. ``env`` sets variables on top of this process's
    environment (a value of None removes one); ``pythonpath`` is put first on PYTHONPATH."""
    full = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    if pythonpath:
        full["PYTHONPATH"] = pythonpath + (os.pathsep + full["PYTHONPATH"] if full.get("PYTHONPATH") else "")
    argv = (sys.executable, "-m", "harness", *map(str, args))
    p = subprocess.run(argv, cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)
    return HarnessRun(argv, p.returncode, p.stdout, p.stderr)


@pytest.fixture(scope="session")
def harness():
    """``harness(*args, env=..., pythonpath=..., cwd=..., timeout=...)`` -> :class:`HarnessRun` (rc, stdout, stderr)."""
    return run_harness


# suites/plugins/ holds plug-in subjects, some of which register themselves on import (a planted regression
# replaces a real subject): never import them into the test process, not even to look for doctests.
collect_ignore = ["plugins"]
