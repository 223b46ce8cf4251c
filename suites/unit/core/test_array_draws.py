"""The draws in pieces give the bits of one whole draw: a case's arrays never change with how they are drawn."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core import array_draws
from harness.core.array_draws import array_rng, draw_arrays


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("scale", [None, 0.37, 1e6])
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
