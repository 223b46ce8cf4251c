"""The model's draws from the case's seed: every step's minibatch ragged and sorted longest first, ids in the
recipe's range and of the edge kind, an LM's batch padded as its convention pads; the initial parameters drawn
per name, and the one-ULP perturbation of one element."""

from __future__ import annotations

import numpy as np
import pytest

from harness.subjects.model_calls import draw_batch, init_params, param_name

LM = {"recipe": "espnet_rnnlm", "steps": 4, "batch": 5, "min_len": 2, "max_len": 7, "vocab": 9, "width": 4,
      "hidden": 4, "n_layers": 1}


def test_a_step_batch_is_sorted_longest_first_and_drawn_again_the_same():
    b = draw_batch(LM, 3, 2)
    assert b["lengths"] == sorted(b["lengths"], reverse=True) and len(b["lengths"]) == 5
    again = draw_batch(LM, 3, 2)
    assert np.array_equal(b["x"], again["x"]) and np.array_equal(b["t"], again["t"])
    assert not np.array_equal(b["x"], draw_batch(LM, 3, 3)["x"])  # each step its own batch


@pytest.mark.parametrize("recipe, pad", [("espnet_rnnlm", 8), ("chainer_lm", -1)])
def test_an_lm_batch_starts_with_eos_ends_targets_with_eos_and_pads_by_its_convention(recipe, pad):
    b = draw_batch({**LM, "recipe": recipe}, 5, 0)
    eos = LM["vocab"] - 1
    assert (b["x"][:, 0] == eos).all()
    for i, n in enumerate(b["lengths"]):
        assert (b["x"][i, n:] == pad).all() and (b["x"][i, 1:n] < eos).all()
    assert b["t"].size == sum(b["lengths"]) and (b["t"] >= 0).all()


def test_a_ctc_batch_has_labels_without_blank_that_fit_the_subsampled_frames():
    spec = {"recipe": "espnet_blstmp_ctc", "batch": 4, "min_len": 3, "max_len": 20, "vocab": 6, "width": 5,
            "subsample": [1, 2, 2]}
    for k in range(5):
        b = draw_batch(spec, 1, k)
        frames = [x.shape[0] for x in b["xs"]]
        assert frames == sorted(frames, reverse=True)
        for x, y in zip(b["xs"], b["ys"]):
            assert x.shape[1] == 5 and x.dtype == np.float32
            assert 1 <= y.min() and y.max() < 6 and 1 <= y.size <= max(1, -(-x.shape[0] // 4) // 2)


@pytest.mark.parametrize("kind, check", [("all_equal", lambda t: np.unique(t).size == 1),
                                         ("collision", lambda t: np.unique(t).size <= 3),
                                         ("sorted", lambda t: (np.diff(t) >= 0).all())])
def test_the_edge_kinds_shape_the_tokens(kind, check):
    b = draw_batch({**LM, "id_kind": kind}, 2, 1)
    for i, n in enumerate(b["lengths"]):
        assert check(b["x"][i, 1:n])


class _P:
    def __init__(self, shape):
        self.array = np.full(shape, np.nan, dtype=np.float32)


def test_the_initial_draw_is_per_name_and_the_perturbation_moves_one_element_one_ulp():
    def params():
        return [("a.W", _P((3, 4))), ("a.b", _P((3,))), ("z.W", _P((2, 2)))]

    p0, p1 = params(), params()
    init_params(p0, 7, None, np)
    init_params(p1, 7, {"index": 5}, np)
    assert (p0[1][1].array == 0).all() and np.isfinite(p0[0][1].array).all()
    d = p1[0][1].array.view(np.int32).astype(np.int64) - p0[0][1].array.view(np.int32).astype(np.int64)
    assert np.count_nonzero(d) == 1 and abs(int(d.reshape(-1)[5])) == 1  # the first matrix, element 5
    assert np.array_equal(p0[2][1].array, p1[2][1].array)
    p2 = params()
    init_params(p2, 7, {"param": "z.W", "index": 0}, np)
    assert not np.array_equal(p2[2][1].array, p0[2][1].array) and np.array_equal(p2[0][1].array, p0[0][1].array)
    with pytest.raises(ValueError, match="names no parameter 'q'"):
        init_params(params(), 7, {"param": "q", "index": 0}, np)


def test_a_chainer_parameter_path_is_a_dotted_name():
    assert param_name("/enc/enc/0/birnn0/0/w0") == "enc.enc.0.birnn0.0.w0"


def test_the_calls_module_imports_only_the_standard_library_and_numpy():
    import ast
    import inspect
    import sys

    from harness.subjects import model_calls

    roots = set()
    for node in ast.walk(ast.parse(inspect.getsource(model_calls))):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])
    assert roots and roots <= set(sys.stdlib_module_names) | {"numpy"}, roots
