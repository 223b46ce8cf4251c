"""harness.judge.parallel: one rule for when independent work over arrays goes on threads; the results are one
thread's, in order."""

from __future__ import annotations

import os
import threading

import pytest

from harness.judge import parallel
from harness.judge.parallel import map_sized


def test_small_work_stays_on_the_calling_thread_in_order():
    seen = []
    out = map_sized(lambda x: (seen.append(threading.get_ident()), x * 2)[1], [3, 1, 2], [10, 10, 10])
    assert out == [6, 2, 4] and set(seen) == {threading.get_ident()}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the rule keeps the work on one thread")
def test_large_work_runs_side_by_side_and_keeps_the_items_order(monkeypatch):
    """Two items above the threshold run at once (each waits for the other at a barrier, which one thread could
    never pass), and the results come back in the items' order, not the largest-first order they started in."""
    monkeypatch.setattr(parallel, "THREADED_ELEMENTS", 100)
    meet = threading.Barrier(2, timeout=30)

    def work(x: int) -> int:
        meet.wait()
        return -x

    assert map_sized(work, [1, 2], [60, 90]) == [-1, -2]
    assert map_sized(lambda x: x + 1, [5, 6, 7], [1, 500, 2]) == [6, 7, 8]
