"""The throwaway environments' pieces that need no install: the installer's choice, the cause's line of a failed
command, and the guard every child runs under (a child and its own children end with it)."""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.core import lifeline
from harness.core.errors import InvalidArgument
from harness.upstream import bisect_envs as E


def test_uv_asked_for_where_it_is_not_installed_is_refused_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(InvalidArgument, match="installer='uv': uv is not on the PATH"):
        E.installer("uv")
    assert E.installer("auto").tool == "pip"
    with pytest.raises(InvalidArgument, match="find-links="):
        E.installer("pip", [str(tmp_path / "absent")])


def test_the_cause_line_is_the_error_not_pips_pointer_to_it():
    build = """Processing ./chainer-7.0.0.tar.gz
  error: subprocess-exited-with-error
  × Getting requirements to build wheel did not run successfully.
  │ exit code: 1
  ╰─> [3 lines of output]
      File "setup.py", line 5, in <module>
      ModuleNotFoundError: No module named 'pkg_resources'
      [end of output]
  note: This error originates from a subprocess, and is likely not a problem with pip.
error: subprocess-exited-with-error
× Getting requirements to build wheel did not run successfully.
note: This error originates from a subprocess, and is likely not a problem with pip.
"""
    assert E.cause_line(build, "x") == "ModuleNotFoundError: No module named 'pkg_resources'"
    pip = "ERROR: Could not find a version that satisfies the requirement numpy==9.9 (from versions: 1.0)\n" \
          "ERROR: No matching distribution found for numpy==9.9\n"
    assert E.cause_line(pip, "x") == "ERROR: No matching distribution found for numpy==9.9"
    assert E.cause_line("\n\n", "exited 3") == "exited 3"
    assert E.cause_line("cannot run here: fewer than 2 cores\n", "x") == "cannot run here: fewer than 2 cores"


def _with(marker: str) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                out.append(int(pid))
        except OSError:
            continue
    return out


def test_a_command_past_its_timeout_ends_with_its_own_children():
    marker = f"bisect-guard-{uuid.uuid4().hex}"
    sleeper = f"{sys.executable} -c 'import time; time.sleep(300)' {marker}"
    r = lifeline.run_guarded(["sh", "-c", f"{sleeper} & {sleeper}; wait"], timeout=1)
    assert r.code is None
    for _ in range(100):  # the guard's kill reaches the group at once; wait for the kernel to reap
        if not _with(marker):
            break
        time.sleep(0.1)
    assert _with(marker) == []


def test_a_command_runs_with_the_environment_and_folder_given(tmp_path):
    r = lifeline.run_guarded([sys.executable, "-c", "import os; print(os.environ['PROBE_PIN'], os.getcwd(), "
               "os.environ.get('HARNESS_PARENT_PID'))"], 60, env={**os.environ, "PROBE_PIN": "7"}, cwd=str(tmp_path))
    assert r.code == 0 and r.stdout.split() == ["7", str(tmp_path), "None"], r
    assert lifeline.run_guarded([sys.executable, "-c", "raise SystemExit(3)"], 60).code == 3
