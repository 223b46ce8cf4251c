"""harness.core.sparse_zeros: zeros a scatter writes a few rows of, on pages of their own above a size."""

from __future__ import annotations

import mmap

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
