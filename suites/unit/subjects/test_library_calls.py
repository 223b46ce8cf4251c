"""harness/subjects/library_calls.py: the shipped calls compute what Chainer's documentation says: the embedding
forward is a row gather (zero rows at the ignore label), its backward the rows' sums."""

from __future__ import annotations

import numpy as np

from harness.core.cases import Case, build_arrays
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.subjects.base import execute
from harness.subjects.registry import get_subject

CASE = Case("embed", 7, {"vocab": 6, "width": 3, "ids_shape": [2, 5], "ignore_label": -1})


def test_the_function_and_the_link_gather_rows_and_zero_the_ignore_label() -> None:
    a = build_arrays(CASE)
    x, W = a["x"], a["W"]
    want = np.where((x == -1)[..., None], 0, W[np.where(x == -1, 0, x)])
    for name in ("chainer.embed_id", "chainer.EmbedID"):
        r = execute(get_subject(name), CASE, CPU, get_context("default"))
        assert r.status == "ok", r.error
        assert np.array_equal(r.arrays["y"], want.astype(r.arrays["y"].dtype))


def test_the_backward_puts_each_gradient_row_on_its_id() -> None:
    a = build_arrays(CASE)
    r = execute(get_subject("chainer.embed_id"), CASE, CPU, get_context("default"))
    gW = np.zeros_like(a["W"], dtype=np.float64)
    for i, row in enumerate(a["x"].reshape(-1)):
        if row != -1:
            gW[row] += a["gy"].reshape(-1, 3)[i]
    assert np.allclose(r.arrays["grad.W"], gW, rtol=1e-5, atol=1e-6)
