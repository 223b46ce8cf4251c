"""Workers run under an address-space limit: a subject that allocates beyond it is a row, not a swapping machine.

A worker's memory: the freed C heap goes back to the system between requests (glibc's malloc_trim), so that a
pooled worker waiting for its lane's next task holds what it uses, not what its last run allocated."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.core.cases import Case
from harness.core.errors import InvalidArgument
from harness.execute.memory_limits import MEMORY_ENV, default_memory_limit, parse_memory_limit
from harness.execute.worker import Worker

PLUGIN = "suites.plugins.misbehaving:SUBJECTS"
CASE = Case("embed", 0, {"vocab": 5, "width": 3, "ids_shape": [4]})
LIMIT = 3 << 30  # above what an idle worker with Chainer imported maps, far below the hog's ask


def _run(worker: Worker, subject: str):
    try:
        return worker.run(CASE.to_json(), subject, "cpu", "default", timeout=120, case_id=CASE.id)
    finally:
        worker.close()


@pytest.mark.parametrize("fork", [False, True], ids=["spawned", "forked"])
def test_worker_applies_the_limit_it_was_given(fork):
    w = Worker(plugins=(PLUGIN,), memory_limit=LIMIT, fork=fork).start()
    r = _run(w, "misbehaving.rlimit_probe")
    assert w.forked == (fork and hasattr(os, "pidfd_open"))  # forked from the zygote where Linux allows it
    assert r.status == "ok", r.error
    assert int(r.arrays["y"][0]) == LIMIT


@pytest.mark.parametrize("fork", [False, True], ids=["spawned", "forked"])
def test_subject_allocating_beyond_the_limit_is_an_error_row_not_a_hang(fork):
    # run with a 120 s timeout: a hang would be a "timeout" row, which fails here (no wall-clock assert needed)
    r = _run(Worker(plugins=(PLUGIN,), memory_limit=LIMIT, fork=fork).start(), "misbehaving.hog")
    assert r.status in ("error", "crashed"), r
    if r.status == "error":
        assert r.error.type == "MemoryError", r.error


def test_without_a_limit_the_hog_succeeds_so_the_test_above_can_fail():
    r = _run(Worker(plugins=(PLUGIN,), memory_limit=None).start(), "misbehaving.hog")
    assert r.status == "ok", r.error


def test_memory_limit_settings(monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "none")
    assert default_memory_limit() is None
    monkeypatch.setenv(MEMORY_ENV, str(1 << 30))
    assert default_memory_limit() == 1 << 30
    monkeypatch.delenv(MEMORY_ENV)
    assert default_memory_limit() == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    with pytest.raises(InvalidArgument, match=f"{MEMORY_ENV}='lots'"):
        parse_memory_limit("lots")
    with pytest.raises(InvalidArgument, match="memory_limit=-5"):
        Worker(memory_limit=-5)


CHILD = r"""
import ctypes, ctypes.util, sys
import numpy as np
from harness.execute.memory_limits import release_free_heap

def anon_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) // 1024 for l in f if l.startswith("RssAnon"))

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD: arrays of a few MiB come from the heap, as after a real run
libc.mallopt(-1, 1 << 30)   # M_TRIM_THRESHOLD: free() alone keeps what it frees
arrays = [np.ones(1 << 19) for _ in range(128)]  # 128 arrays of 4 MiB
held = anon_mib()
arrays.clear()
freed = anon_mib()
assert release_free_heap() is True
print(held, freed, anon_mib())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RssAnon and glibc's malloc_trim are Linux's")
def test_the_freed_heap_goes_back_to_the_system_only_when_released() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    held, freed, released = map(int, out.stdout.split())
    assert held >= 400 and freed >= 400  # freed into the heap, still the process's
    assert released < freed - 400  # given back
