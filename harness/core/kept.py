"""What a process keeps of what it would otherwise compute again, within a budget: :class:`Kept`, and on it
:class:`ArrayCache`, whose budget is bytes.

Entries are kept by key, most recently used last; each has a cost, the costs are summed as entries come and go,
and beyond a limit the oldest go first, the newest always kept. :class:`ArrayCache` costs an entry (a dict of
arrays) its arrays' ``nbytes``: a case's drawn inputs (:func:`harness.core.cases.build_arrays`), an embedding's
summation bounds (:mod:`harness.judge.tolerance`) and, in the suites' in-process runs, an oracle's outputs
(:mod:`harness.execute.inprocess`). A bound on how many entries are kept does not bound memory: a word LM's
summation bound is one 520 MB table, and a harness process that had judged a dozen such cases held every one of
their tables. An array on a sparse mapping counts whole, so the bound holds for what is mapped as well as what is
resident; and as the newest entry always stays, the tasks of one case, which a campaign measures one after the
other, build its arrays once. Small values (a schema's verdict on a case) are kept by count:
:class:`harness.core.cases.ContentMemo`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, Mapping, TypeVar

import numpy as np

__all__ = ["Kept", "ArrayCache", "entry_bytes"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Kept(OrderedDict[K, V]):
    """Values by key, most recently used last, their costs (``cost(value)``) summed as entries come and go
    (``held``; a sum over every entry at each addition would grow with the square of a corpus). Its methods take
    one reentrant lock (``_lock``, for a subclass's methods too): the measures of one task judge its tensors on
    threads."""

    def __init__(self, cost: Callable[[V], int]) -> None:
        super().__init__()
        self.cost = cost
        self.held = 0
        self._lock = threading.RLock()

    def recent(self, key: K, default: Any = None) -> Any:
        """The value of ``key``, now the most recently used; ``default`` where there is none."""
        with self._lock:
            if key not in self:
                return default
            self.move_to_end(key)
            return self[key]

    def add(self, key: K, value: V, limit: int) -> None:
        """Keep ``value`` as the newest entry (replacing one of the same key); drop the oldest while the held
        costs exceed ``limit``, the newest always kept."""
        with self._lock:
            if key in self:
                self.held -= self.cost(self.pop(key))
                self._gone(key)
            self[key] = value
            self.held += self.cost(value)
            while len(self) > 1 and self.held > limit:
                old, gone = self.popitem(last=False)
                self.held -= self.cost(gone)
                self._gone(old)

    def _gone(self, key: K) -> None:
        """Called, under the lock, for each key an addition drops (a subclass forgets what it kept beside it)."""


def entry_bytes(arrays: Mapping[str, np.ndarray]) -> int:
    """What an :class:`ArrayCache` entry costs: the bytes of its arrays."""
    return sum(int(a.nbytes) for a in arrays.values())


class ArrayCache(Kept[K, "dict[str, np.ndarray]"]):
    """Dicts of arrays by key (:class:`Kept`), each costing its arrays' bytes."""

    def __init__(self) -> None:
        super().__init__(entry_bytes)

    def recent(self, key: K, default: Any = None) -> dict[str, np.ndarray] | None:
        """The arrays of ``key``, now the most recently used; None where there are none."""
        return super().recent(key, default)  # type: ignore[no-any-return]
