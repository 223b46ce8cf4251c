"""A worker's memory: the freed C heap goes back to the system between requests (glibc's malloc_trim), so that a
pooled worker waiting for its lane's next task holds what it uses, not what its last run allocated."""

from __future__ import annotations

import subprocess
import sys

import pytest

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

