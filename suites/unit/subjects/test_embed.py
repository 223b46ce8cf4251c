"""ESPnet's GPU backward (the one-hot GEMM that replaces atomicAdd), run on the CPU: its own code, with NumPy standing
in for CuPy, so that the conditions the contracts' GPU known defects name are checked on every machine.

On an NVIDIA H200 (.ci/gpu-session.sh) that backward zeroed row V-1 of grad.W for ignore label -1, raised
IndexError for a label outside the rows, and spread a NaN of gy into every row. The edge kinds
``ignore:negative_row_used`` and ``ignore:outside_rows`` (harness/generate/edges.py) are meant to be exactly the
inputs where it differs from the CPU loop: these tests hold them to that, case by case."""

from __future__ import annotations

import types

import numpy as np
import pytest

from harness.core.cases import Case
from harness.core.compat import import_chainer
from harness.generate.edges import edge_kinds

import_chainer()
deterministic = pytest.importorskip("espnet.nets.chainer_backend.deterministic_embed_id")


class _StandIn(types.ModuleType):
    """Not ``numpy`` (so ESPnet takes its GPU branch), but every attribute is NumPy's."""

    def __getattr__(self, name: str):
        return getattr(np, name)


def _grad_w(monkeypatch, x: np.ndarray, gy: np.ndarray, vocab: int, ignore_label, gpu: bool) -> np.ndarray:
    """grad.W from ESPnet's own EmbedIDGrad.forward, on its GPU branch where ``gpu``, else its CPU loop."""
    with monkeypatch.context() as m:
        if gpu:
            m.setattr(deterministic.cuda, "get_array_module", lambda *a: _StandIn("cupy_stand_in"))
        (gw,) = deterministic.EmbedIDGrad((vocab, gy.shape[-1]), ignore_label).forward((x, gy))
    return np.asarray(gw)


# Small integer upstream gradients: every sum is exact in float32 in any order, so the GEMM and the loop must
# agree bit for bit wherever the GPU branch is right.
LABELS = [None, -9, -5, -4, -2, -1, 0, 2, 4, 5, 7, -(2 ** 20)]


@pytest.mark.parametrize("ignore_label", LABELS)
@pytest.mark.parametrize("seed", range(4))
def test_the_gpu_branch_differs_from_the_loop_exactly_where_the_edge_kinds_say(monkeypatch, ignore_label, seed):
    vocab, width = 5, 3
    rng = np.random.default_rng(seed)
    x = rng.integers(0, vocab, size=12).astype(np.int32)
    if ignore_label is not None and seed % 2:
        x[rng.random(12) < 0.3] = ignore_label  # the label present among the ids in half the cases
    gy = rng.integers(-3, 4, size=(12, width)).astype(np.float32)
    case = Case("embed", seed, {"vocab": vocab, "width": width, "ids_shape": [12], "id_kind": "explicit",
                                "ignore_label": ignore_label},
                arrays={"x": {"dtype": "int32", "shape": [12], "data": x.tolist()}})
    kinds = edge_kinds(case)
    loop = _grad_w(monkeypatch, x, gy, vocab, ignore_label, gpu=False)
    if "ignore:outside_rows" in kinds:
        with pytest.raises(IndexError):
            _grad_w(monkeypatch, x, gy, vocab, ignore_label, gpu=True)
        return
    gemm = _grad_w(monkeypatch, x, gy, vocab, ignore_label, gpu=True)
    if "ignore:negative_row_used" in kinds:
        row = vocab + ignore_label
        assert (gemm[row] == 0).all() and (loop[row] != 0).any(), (ignore_label, x)
        others = np.arange(vocab) != row
        assert np.array_equal(gemm[others], loop[others])
    else:
        assert np.array_equal(gemm.view(np.uint32), loop.view(np.uint32)), (ignore_label, x)


def test_both_index_kinds_and_neither_occur_among_those_cases():
    """The test above can fail both ways only if each branch is taken: count them."""
    seen = {"outside": 0, "negative": 0, "neither": 0}
    for il in LABELS:
        for seed in range(4):
            x = np.random.default_rng(seed).integers(0, 5, size=12)
            spec = {"vocab": 5, "width": 3, "ids_shape": [12], "id_kind": "explicit", "ignore_label": il}
            kinds = edge_kinds(Case("embed", seed, spec,
                                    arrays={"x": {"dtype": "int32", "shape": [12], "data": x.tolist()}}))
            key = ("outside" if "ignore:outside_rows" in kinds else
                   "negative" if "ignore:negative_row_used" in kinds else "neither")
            seen[key] += 1
    assert all(n >= 4 for n in seen.values()), seen


def test_a_nan_in_gy_reaches_every_row_on_the_gpu_branch_and_one_row_in_the_loop(monkeypatch):
    x = np.array([0, 1, 2, 1], dtype=np.int32)
    gy = np.ones((4, 2), dtype=np.float32)
    gy[3, 0] = np.nan  # added into row 1 only
    loop = _grad_w(monkeypatch, x, gy, 4, None, gpu=False)
    gemm = _grad_w(monkeypatch, x, gy, 4, None, gpu=True)
    assert np.isnan(loop[:, 0]).tolist() == [False, True, False, False]
    assert np.isnan(gemm[:, 0]).all()  # 0 x NaN in every other row's dot product
