"""Runs side by side, and a run alone: the gate a timed-out run's second try passes through.

Every run of a task (:mod:`harness.execute.task_runs`) holds :data:`SOLO` shared while its worker computes; a
run that timed out is tried again holding it alone (:meth:`Solo.alone`): it waits until the runs of the other
lanes now going have answered, and no lane starts another until it is done. What the second try then shows is
the subject's own time, not the machine's load. Thread-safe; one gate per process (the lanes of a campaign are
threads of one process).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["Solo", "SOLO"]


class Solo:
    """A readers-writer gate that lets a waiting writer in first: :meth:`shared` for the runs that go side by side,
    :meth:`alone` for one that must run with none beside it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._alone = False
        self._waiting = 0  # runs waiting to go alone: no new shared run starts meanwhile

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._alone or self._waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            try:
                while self._alone or self._shared:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._cond.notify_all()

    @property
    def busy(self) -> int:
        """How many runs hold the gate shared now."""
        with self._cond:
            return self._shared


#: The one gate of this process's runs.
SOLO = Solo()
