"""harness.core.sparse_zeros: zeros a scatter writes a few rows of, on pages of their own above a size."""

from __future__ import annotations

import mmap
import sys

import numpy as np
import pytest

from harness.core.sparse_zeros import SPARSE_BYTES, sparse_zeros


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_a_large_table_is_zeros_on_a_mapping_of_its_own_and_takes_rows(dtype):
    width = 1000
    rows = SPARSE_BYTES // (width * np.dtype(dtype).itemsize) + 3
    z = sparse_zeros((rows, width), dtype)
    assert z.shape == (rows, width) and z.dtype == np.dtype(dtype) and z.flags.c_contiguous and z.flags.writeable
    root = z
    while isinstance(root, np.ndarray) and root.base is not None:
        root = root.base
    if isinstance(root, memoryview):
        root = root.obj
    assert isinstance(root, mmap.mmap)  # not NumPy's allocation (huge pages)
    assert not z.any()
    z[[5, rows - 1]] = 2.5
    assert np.array_equal(np.flatnonzero(z.any(axis=1)), [5, rows - 1]) and (z[5] == 2.5).all()


def test_a_small_or_empty_table_is_plain_numpy_zeros():
    for shape in [(3, 4), (0, 7), (SPARSE_BYTES // 8 - 1,)]:
        z = sparse_zeros(shape)
        assert z.shape == shape and z.dtype == np.float64 and z.base is None and not z.any()


def _resident_kib() -> int:
    """This process's resident anonymous and shared memory, in KiB."""
    with open("/proc/self/status") as f:
        return sum(int(line.split()[1]) for line in f if line.startswith(("RssAnon:", "RssShmem:")))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status (Linux only)")
def test_reading_a_large_table_never_written_takes_no_memory():
    # a private mapping reads an unwritten page as the kernel's one zero page; a shared one (shared memory)
    # would allocate and zero a page of its own at each first read: a word LM's whole table read four times slower
    z = sparse_zeros((SPARSE_BYTES * 4 // 8,), np.float64)  # 64 MiB
    before = _resident_kib()
    assert float(z.sum()) == 0.0
    grown = _resident_kib() - before
    assert grown < 8 * 1024, f"reading 64 MiB of zeros made {grown} KiB resident"
