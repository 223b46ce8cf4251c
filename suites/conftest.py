"""Fixtures shared by the suites: ``harness``, the one way a test runs ``python -m harness ...`` in a subprocess;
``work``, ``small`` and ``whole``, the files and in-process audits that suites/unit/verbs/test_audit.py and the
tests in suites/unit/outputs/audit/ share. And the session's garbage collector, set once collection ends."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The youngest generation's threshold for the rest of a session (Python's default is 700 allocations).
GC_GEN0_THRESHOLD = 20_000


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (thousands of test items, the imported modules) lives for the whole session: it is
    frozen out of the cyclic collector's reach, and the collector runs after more allocations than by default.
    The in-process subjects' autograd graphs start that collector thousands of times a session, and each full
    pass walked everything collection had built. The collector only decides when unreachable cycles are freed,
    never a value: no result depends on this, only the CPU the workers spend."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


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


# ---- the audit tests' files (suites/unit/verbs/test_audit.py and suites/unit/outputs/audit/) ---------------------
# Session-scoped: every audit test writes its files under one directory by names that do not clash, and the two
# in-process audits of the small corpus (``whole``) are made once, not once per test module.
@pytest.fixture(scope="session")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("audit")


@pytest.fixture(scope="session")
def small(work) -> Path:
    """blas-split LSTM + two embed anchors; by id, shard 1/2 and shard 2/2 are both non-empty."""
    from harness.core.corpus_files import write_corpus
    from suites.audit_files import BLAS_SPLIT, _anchor

    cases = [_anchor("ignore:-1"), _anchor("ignore:V-1"), BLAS_SPLIT]
    path = work / "small.jsonl"
    write_corpus(cases, str(path))
    return path


@pytest.fixture(scope="session")
def whole(work, small):
    """Two in-process audits of the small corpus with the same settings, on this machine."""
    from harness.outputs import audit as A
    from suites.audit_files import _run

    return [A.load_audit(_run(small, work / f"whole{i}.json")) for i in (1, 2)]
