"""Zeros for a scatter that writes a few rows of a large table (an embedding gradient, its oracle, its bound).

``np.zeros`` of a large array asks the kernel for transparent huge pages (NumPy ``madvise``\\s them), and the
first row written into each 2 MiB then stalls on zeroing, and on this kind of machine compacting, the whole 2 MiB:
a word LM's table (vocab 65,000 x 1,000) is written at 12,000 rows spread over all of it, so all of it is zeroed
at once while the scatter waits. :func:`sparse_zeros` maps such an array on 4 KiB pages of its own instead, which
the kernel zeroes one at a time as rows are written; a page never written reads as zeros without ever being
zeroed on its own. The mapping is private: a read of a page never written then maps the kernel's one zero page.
A shared anonymous mapping (:class:`mmap.mmap`'s default) is backed by shared memory, which allocates and zeroes
a page of its own at every first read: reading a word LM's float64 table whole then cost four times as much.
"""

from __future__ import annotations

import math
import mmap

import numpy as np
from numpy.typing import DTypeLike

__all__ = ["SPARSE_BYTES", "sparse_zeros"]

#: Size from which :func:`sparse_zeros` maps its own pages (below it, ``np.zeros``).
SPARSE_BYTES = 1 << 24


def sparse_zeros(shape: tuple[int, ...], dtype: DTypeLike = np.float64) -> np.ndarray:
    """A writable C-ordered array of zeros of ``shape`` and ``dtype``: from :data:`SPARSE_BYTES` on, on an
    anonymous mapping of its own (the array keeps it alive), else ``np.zeros``."""
    dt = np.dtype(dtype)
    nbytes = math.prod(int(n) for n in shape) * dt.itemsize
    if nbytes < SPARSE_BYTES:
        return np.zeros(shape, dtype=dt)
    pages = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(pages, dtype=dt).reshape(shape)
