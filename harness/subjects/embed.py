"""Embedding subjects: Chainer's ``F.embed_id`` / ``L.EmbedID`` and ESPnet's deterministic ones.

The library calls themselves are :func:`harness.subjects.library_calls.embed_function` and
:func:`~harness.subjects.library_calls.embed_link`
(with ``target="espnet"`` for ESPnet's). Outputs (names shared with the
oracle): ``y``; ``grad.W``; and for the functions, which support double backpropagation, ``grad2.gy`` (and
``grad2.W`` where Chainer returns one): the gradient of ``sum(grad.W * ggW)`` with respect to the upstream
gradient ``gy`` and to ``W``.

Declared accumulation order: on CPU both Chainer's ``EmbedIDGrad`` and ESPnet's ``EmbedIDFunction`` backward
add ``gy``'s rows into ``grad.W`` one position at a time, in the C order of ``x``, in ``gy``'s dtype (``for ix,
igy in zip(x.ravel(), gy.reshape(x.size, -1)): gW[ix] += igy``). :func:`sequential_grad_W` computes exactly
that with NumPy, so ``grad.W`` is pinned bit for bit (the ``order`` measure). On GPU the order cannot be
pinned: Chainer's ``atomicAdd`` lands in whatever order the threads reach it, and ESPnet's one-hot product is a
cuBLAS GEMM whose summation order (blocking, split-K) the library chooses per shape and GPU.
"""

from __future__ import annotations

from typing import Any

from harness.core.cases import Case
from harness.core.env import ESPNET_MODULE  # one name for the module under test
from harness.subjects import library_calls as calls
from harness.subjects.base import Declared, Subject
from harness.subjects.call_runs import call_run, espnet_module

__all__ = ["espnet_module", "espnet_accepts", "SUBJECTS", "sequential_grad_W", "SEQUENTIAL"]

#: The value of ``Declared.order`` for a row-by-row accumulation in index order.
SEQUENTIAL = "sequential"


def espnet_accepts(case: Case) -> bool:
    """ESPnet's type check accepts only float32 W (an embedding case's ``w_dtype``, a pipeline's ``dtype``):
    other dtypes are exercised as bad inputs (tag ``bad:w_dtype_espnet``), not as valid cases that would all end
    in InvalidType."""
    key = "dtype" if case.family == "pipeline" else "w_dtype"
    return case.bad or case.spec.get(key, "float32") == "float32"


_CHAINER = {
    "cpu": Declared(True, "CPU backward accumulates rows in a sequential Python loop", order=SEQUENTIAL),
    "gpu": Declared(False, "GPU backward declares utils.nondeterministic('atomicAdd') (order not pinned: atomics "
                           "land in the order threads reach them)"),
}
_ESPNET = {
    "cpu": Declared(True, "CPU backward is the same sequential loop as Chainer's", order=SEQUENTIAL),
    "gpu": Declared(True, "GPU backward replaces atomicAdd with a one-hot matrix product (cuBLAS GEMM; order not "
                          "pinned: cuBLAS chooses the GEMM's summation order per shape and GPU)"),
}


def sequential_grad_W(spec: Any, arrays: Any) -> dict[str, Any]:
    """``grad.W`` summed as the declared CPU loop sums it: zeros in ``gy``'s dtype, then ``gW[ix] += gy[i]`` for
    each position ``i`` of ``x`` in C order, skipping the ignore label (NumPy indexing: a negative id wraps, as
    it does in the loop). No Chainer: this is the reference the ``order`` measure compares with bit for bit."""
    import numpy as np

    from harness.core.sparse_zeros import sparse_zeros

    x, gy, W = np.asarray(arrays["x"]), np.asarray(arrays["gy"]), np.asarray(arrays["W"])
    ignore = spec.get("ignore_label")
    gW = sparse_zeros(W.shape, gy.dtype)
    rows = gy.reshape(x.size, W.shape[-1]) if x.size else gy.reshape(0, W.shape[-1])
    for ix, row in zip(x.ravel().tolist(), rows):
        if ignore is not None and ix == ignore:
            continue
        gW[ix] += row
    return {"grad.W": gW}

SUBJECTS: tuple[Subject, ...] = (
    Subject("chainer.embed_id", "embed", call_run(calls.embed_function), declared=_CHAINER,
            description="chainer.functions.embed_id (with and without ignore_label)", double_backward=True,
            source="chainer/functions/connection/embed_id.py"),
    Subject("chainer.EmbedID", "embed", call_run(calls.embed_link), declared=_CHAINER,
            description="the link chainer.links.EmbedID", source="chainer/links/connection/embed_id.py"),
    Subject("espnet.embed_id", "embed", call_run(calls.embed_function, target="espnet"), declared=_ESPNET,
            accepts=espnet_accepts, description="ESPnet's deterministic embed_id / EmbedIDFunction",
            double_backward=True, source=ESPNET_MODULE.replace(".", "/") + ".py"),
    Subject("espnet.EmbedID", "embed", call_run(calls.embed_link, target="espnet"), declared=_ESPNET,
            accepts=espnet_accepts, description="ESPnet's deterministic EmbedID link",
            source=ESPNET_MODULE.replace(".", "/") + ".py"),
)
