"""Independent NumPy work over several arrays, on threads where there is enough of it to pay for them.

NumPy's loops and reductions leave the interpreter's lock, so the comparisons and sketches of a task's
tensors (each its own, none writing another's) run side by side on a machine's cores. :func:`map_sized` is
the one rule for when: two or more items, two or more cores, and at least :data:`THREADED_ELEMENTS`
elements in all (below it a thread's start costs more than it saves). The results are those of one thread,
in the items' order.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

__all__ = ["THREADED_ELEMENTS", "map_sized"]

#: The least elements in all that are worth threads.
THREADED_ELEMENTS = 1 << 20

T = TypeVar("T")
R = TypeVar("R")


def map_sized(fn: Callable[[T], R], items: Sequence[T], sizes: Sequence[int]) -> list[R]:
    """``[fn(x) for x in items]``, in order; on threads (one per core, at most one per item, the largest items
    first so that no core waits on one started last) where :func:`map_sized`'s rule says so. ``sizes``: each
    item's element count."""
    cores = os.cpu_count() or 1
    if cores < 2 or len(items) < 2 or sum(sizes) < THREADED_ELEMENTS:
        return [fn(x) for x in items]
    order = sorted(range(len(items)), key=lambda i: -sizes[i])
    out: list[R] = [None] * len(items)  # type: ignore[list-item]  # every slot is filled below
    with ThreadPoolExecutor(min(cores, len(items))) as pool:
        for i, r in zip(order, pool.map(lambda i: fn(items[i]), order)):
            out[i] = r
    return out
