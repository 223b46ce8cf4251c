"""A process's cache of arrays it would otherwise build again, bounded by the arrays' bytes: :class:`ArrayCache`.

Three kinds of arrays are kept this way: a case's drawn inputs (:func:`harness.core.cases.build_arrays`), an
embedding's summation bounds (:mod:`harness.judge.tolerance`) and, in the suites' in-process runs, an oracle's
outputs (:mod:`harness.execute.inprocess`). A bound on how many entries are kept does not bound memory: a word
LM's summation bound is one 520 MB table, and a harness process that had judged a dozen such cases held every one
of their tables. Here an entry's cost is its arrays' ``nbytes`` (an array on a sparse mapping counts whole, so the
bound holds for what is mapped as well as what is resident), and the newest entry is always kept, so the tasks
of one case, which a campaign measures one after the other, build its arrays once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Hashable, Mapping, TypeVar

import numpy as np

__all__ = ["ArrayCache", "entry_bytes"]

K = TypeVar("K", bound=Hashable)


def entry_bytes(arrays: Mapping[str, np.ndarray]) -> int:
    """What an entry costs: the bytes of its arrays."""
    return sum(int(a.nbytes) for a in arrays.values())


class ArrayCache(OrderedDict[K, "dict[str, np.ndarray]"]):
    """Dicts of arrays by key, most recently used last, their bytes summed as entries come and go (``held``; a
    sum over every entry at each addition would grow with the square of a corpus). Its methods take one
    reentrant lock (``_lock``, for a subclass's methods too): the measures of one task judge its tensors on
    threads."""

    def __init__(self) -> None:
        super().__init__()
        self.held = 0
        self._lock = threading.RLock()

    def recent(self, key: K) -> dict[str, np.ndarray] | None:
        """The entry of ``key``, now the most recently used; None where there is none."""
        with self._lock:
            got = self.get(key)
            if got is not None:
                self.move_to_end(key)
            return got

    def add(self, key: K, arrays: dict[str, np.ndarray], limit: int) -> None:
        """Keep ``arrays`` as the newest entry (replacing one of the same key); drop the oldest while more than
        ``limit`` bytes are held, the newest always kept."""
        with self._lock:
            if key in self:
                self.held -= entry_bytes(self.pop(key))
                self._gone(key)
            self[key] = arrays
            self.held += entry_bytes(arrays)
            while len(self) > 1 and self.held > limit:
                old, gone = self.popitem(last=False)
                self.held -= entry_bytes(gone)
                self._gone(old)

    def _gone(self, key: K) -> None:
        """Called, under the lock, for each key an addition drops (a subclass forgets what it kept beside it)."""
