"""The draws in pieces give the bits of one whole draw: a case's arrays never change with how they are drawn."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core import array_draws
from harness.core.array_draws import array_rng, draw_arrays


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("scale", [None, 0.37, 1.0, 1e6])
def test_a_normal_drawn_in_chunks_has_the_bits_of_one_whole_draw(monkeypatch, dtype, scale):
    monkeypatch.setattr(array_draws, "_CHUNK", 1000)  # several chunks and a short last one
    g = array_rng(5, "W").standard_normal((37, 101))
    whole = (g if scale is None else g * scale).astype(dtype)
    got = array_draws._normal(array_rng(5, "W"), (37, 101), dtype, scale)
    assert got.dtype == whole.dtype and got.shape == whole.shape
    assert whole.tobytes() == got.tobytes()


@pytest.mark.parametrize("kind", ["random", "ones", "zeros", "large", "cancel"])
def test_upstream_gradients_in_chunks_have_the_bits_of_one_whole_draw(monkeypatch, kind):
    spec = {"vocab": 40, "width": 30, "ids_shape": [7, 9], "gy_kind": kind}
    whole = draw_arrays("embed", 11, spec)
    monkeypatch.setattr(array_draws, "_CHUNK", 500)
    pieces = draw_arrays("embed", 11, spec)
    assert whole.keys() == pieces.keys()
    for name in whole:
        assert whole[name].tobytes() == pieces[name].tobytes(), name
    if kind == "random":  # the exact zeros are there, as many as the draw made
        assert 0 < np.count_nonzero(pieces["gy"] == 0) < pieces["gy"].size


def test_a_random_gradient_has_the_bits_of_the_whole_draw_and_its_zeros(monkeypatch):
    monkeypatch.setattr(array_draws, "_CHUNK", 64)
    rng = array_rng(3, "gy")
    whole = rng.standard_normal((9, 31)).astype("float32")
    whole.ravel()[rng.random(whole.size) < 0.05] = 0
    got = array_draws._grad(array_rng(3, "gy"), (9, 31), "float32", "random")
    assert whole.tobytes() == got.tobytes() and np.count_nonzero(got == 0)


@pytest.mark.parametrize("family, spec", [
    ("lstm", {"n_layers": 2, "hidden": 3, "in_size": 2, "lengths": [3, 1], "bidirectional": True,
              "initial_state": "given"}),
    ("pipeline", {"vocab": 11, "width": 3, "hidden": 2, "n_layers": 1, "lengths": [3, 1]}),
])
def test_a_draw_of_some_names_gives_those_arrays_of_the_whole_draw(family, spec):
    whole = draw_arrays(family, 9, spec)
    names = frozenset(sorted(whole)[::3])
    part = draw_arrays(family, 9, spec, names)
    assert sorted(part) == sorted(names)
    for name in names:
        assert part[name].tobytes() == whole[name].tobytes(), name


def test_a_stored_draw_is_mapped_with_its_bits_and_a_write_stays_in_the_writer(tmp_path):
    a = array_draws._normal(array_rng(2, "W"), (300, 400), "float32")
    array_draws.store_shared(str(tmp_path), "case1", "W", a)
    path = tmp_path / "case1.W"
    assert path.stat().st_size == a.nbytes and not path.stat().st_mode & 0o222  # whole, read-only
    got = array_draws.load_shared(str(tmp_path), "case1", "W", a.shape, a.dtype)
    assert got is not None and got.flags.writeable and got.tobytes() == a.tobytes()
    got[...] = 0  # a subject writing into its input: copy-on-write, its own pages only
    assert path.read_bytes() == a.tobytes()
    again = array_draws.load_shared(str(tmp_path), "case1", "W", a.shape, a.dtype)
    assert again is not None and again.tobytes() == a.tobytes()
    assert array_draws.load_shared(str(tmp_path), "case1", "W", (300, 401), a.dtype) is None  # not whole
    assert array_draws.load_shared(str(tmp_path), "case2", "W", a.shape, a.dtype) is None  # not stored


def test_stored_draws_beyond_the_bound_go_least_recently_used_first(tmp_path, monkeypatch):
    import os

    a = np.arange(1000, dtype=np.float32)
    monkeypatch.setattr(array_draws, "SHARED_MAX_BYTES", 2 * a.nbytes)
    for i, name in enumerate(("a", "b", "c")):
        array_draws.store_shared(str(tmp_path), "case", name, a)
        os.utime(tmp_path / f"case.{name}", (i, i))  # (file times a second apart)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case.b", "case.c"]
    os.utime(tmp_path / "case.b", (10, 10))  # used last
    array_draws.store_shared(str(tmp_path), "case", "d", a)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case.b", "case.d"]
