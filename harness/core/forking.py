"""Parent-side work split over children forked from this process: one rule for when that is safe.

The campaign's own bookkeeping after the runs (the measure pass) and the report's figures are pure functions of
what this process holds in memory; a forked child sees it without a copy, so the work of a few seconds runs on
every core instead of one. A child that fails (or a process where forking is not safe: another thread is
running, as a Dask client's are, or there is no ``os.fork``) leaves the work to this process, in order: the
results are the same either way, only the time differs. Nothing of a subject runs here: these children run the
harness's own code on data it already holds.
"""

from __future__ import annotations

import functools
import os
import pickle
import threading
from typing import Callable, Generic, Sequence, TypeVar, cast

from harness.core import lifeline

__all__ = ["fork_safe", "Forked", "map_forked", "BEHIND", "lower_priority"]

#: How far below this process a child that is not on its critical path runs (``os.nice``): the figures, the
#: environment's fingerprint. The runs, or the report's tables, come first; such a child takes the cores they
#: leave.
BEHIND = 10


def lower_priority(nice: int) -> None:
    """Run this (child) process ``nice`` steps below where it runs now; where the system refuses, it stays."""
    if nice:
        try:
            os.nice(nice)
        except OSError:
            pass


T = TypeVar("T")
R = TypeVar("R")


def fork_safe() -> bool:
    """Whether this process may fork a child that runs Python: it has ``os.fork`` and no other thread (a fork
    copies only the calling thread; a lock another thread holds would stay locked in the child)."""
    return hasattr(os, "fork") and threading.active_count() - lifeline.helper_threads() == 1


class Forked(Generic[R]):
    """``fn()`` started in a forked child; :meth:`result` is its pickled return value, or ``fn()`` run here
    where the child could not start or failed. ``nice``: the child runs that much below this process (run
    here, ``fn`` keeps this process's priority)."""

    def __init__(self, fn: Callable[[], R], nice: int = 0) -> None:
        self.fn = fn
        self.nice = int(nice)
        self.pid: int | None = None
        self.fd = -1

    def start(self) -> "Forked[R]":
        if not fork_safe():
            return self
        r, w = os.pipe()
        try:
            pid = lifeline.fork()  # the child dies with this process
        except OSError:
            os.close(r)
            os.close(w)
            return self
        if pid == 0:  # the child: compute, write, and leave without running anything of the parent's
            code = 1
            try:
                os.close(r)
                lower_priority(self.nice)
                data = pickle.dumps(self.fn(), protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(w, "wb") as f:
                    f.write(data)
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        self.pid, self.fd = pid, r
        return self

    def result(self) -> R:
        if self.pid is None:
            return self.fn()
        chunks = []
        try:
            with os.fdopen(self.fd, "rb") as f:
                while True:
                    b = f.read(1 << 20)
                    if not b:
                        break
                    chunks.append(b)
        except OSError:
            chunks = []
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if os.waitstatus_to_exitcode(status) == 0 and chunks:
            try:
                return cast(R, pickle.loads(b"".join(chunks)))
            except Exception:  # noqa: BLE001 - a torn answer: computed again here
                pass
        return self.fn()


def map_forked(fn: Callable[[T], R], parts: Sequence[T]) -> list[R]:
    """``[fn(p) for p in parts]``, the parts after the first each in a forked child, the first here meanwhile
    (all of them here where forking is not safe)."""
    if len(parts) <= 1 or not fork_safe():
        return [fn(p) for p in parts]
    children = [Forked(functools.partial(fn, p)).start() for p in parts[1:]]
    first = fn(parts[0])
    return [first, *(c.result() for c in children)]
