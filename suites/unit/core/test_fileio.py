"""harness/core/fileio.py: the npz writer gives back, through plain ``np.load(allow_pickle=False)``, what
``np.savez`` would: every array's dtype, shape and bits, under its npz key."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness.core.fileio import atomic_npz, npz_key, npz_members

DTYPES = ["bool", "int8", "uint16", "int32", "int64", "float16", "float32", ">f4", "float64", "complex64"]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_the_npz_loads_as_what_savez_writes(tmp_path):
    ran = []

    @settings(max_examples=80, deadline=None, derandomize=True, database=None)
    @given(st.lists(st.tuples(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
                              st.booleans()), min_size=0, max_size=6),
           st.integers(0, 2 ** 32 - 1))
    def run(specs, seed):
        rng = np.random.default_rng(seed)
        arrays = {}
        for k, (dtype, shape, fortran) in enumerate(specs):
            raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8)
            a = np.frombuffer(raw.tobytes(), dtype=dtype).reshape(shape)  # any bits: NaN payloads, -0.0
            arrays[f"t/{k}" if k % 2 else f"t{k}"] = np.asfortranarray(a) if fortran else a
        path = tmp_path / "a.npz"
        atomic_npz(str(path), arrays)
        ref = io.BytesIO()
        np.savez(ref, **{npz_key(k): v for k, v in arrays.items()})
        ref.seek(0)
        with np.load(path, allow_pickle=False) as mine, np.load(ref, allow_pickle=False) as theirs:
            assert sorted(mine.files) == sorted(theirs.files) == sorted(npz_key(k) for k in arrays)
            for name in theirs.files:
                assert _same(mine[name], theirs[name]), name
        assert npz_members(str(path)) == {npz_key(k) for k in arrays}
        ran.append(len(arrays))

    run()
    assert len(ran) >= 60 and max(ran) >= 4, ran


def test_an_array_past_the_join_bound_is_streamed_and_loads_the_same(tmp_path):
    """Beyond fileio._JOIN_BYTES an array is written from its own memory: the same bits come back, for a
    C-order, a Fortran-order and a 0-d array beside it."""
    from harness.core import fileio

    rng = np.random.default_rng(7)
    big = rng.standard_normal(fileio._JOIN_BYTES // 4 + 3).astype(np.float32)
    arrays = {"big": big, "fortran": np.asfortranarray(rng.integers(0, 9, (700, 300))),
              "flags": rng.random(fileio._JOIN_BYTES + 5) > 0.5, "scalar": np.float64(2.5).reshape(())}
    assert all(a.nbytes > fileio._JOIN_BYTES for k, a in arrays.items() if k != "scalar")  # the streamed path ran
    atomic_npz(str(tmp_path / "b.npz"), arrays)
    with np.load(tmp_path / "b.npz", allow_pickle=False) as z:
        for k, a in arrays.items():
            assert _same(z[k], np.ascontiguousarray(a) if a.ndim else a), k
