"""Embedding subjects: Chainer's ``F.embed_id`` / ``L.EmbedID`` and ESPnet's deterministic ones.

Outputs (names shared with the oracle): ``y``; ``grad.W``; and for the functions, which support
double backpropagation, ``grad2.gy`` (and ``grad2.W`` where Chainer returns one): the gradient of
``sum(grad.W * ggW)`` with respect to the upstream gradient ``gy`` and to ``W``.

Declared accumulation order: on CPU both Chainer's ``EmbedIDGrad`` and ESPnet's ``EmbedIDFunction`` backward
add ``gy``'s rows into ``grad.W`` one position at a time, in the C order of ``x``, in ``gy``'s dtype (``for ix,
igy in zip(x.ravel(), gy.reshape(x.size, -1)): gW[ix] += igy``). :func:`sequential_grad_W` computes exactly
that with NumPy, so ``grad.W`` is pinned bit for bit (the ``order`` measure). On GPU the order cannot be
pinned: Chainer's ``atomicAdd`` lands in whatever order the threads reach it, and ESPnet's one-hot product is a
cuBLAS GEMM whose summation order (blocking, split-K) the library chooses per shape and GPU.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable

from harness.core.cases import Case, build_arrays
from harness.core.compat import import_chainer
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.core.errors import SetupError
from harness.subjects.base import Declared, Recorder, Subject

from harness.core.env import ESPNET_MODULE  # one name for the module under test

__all__ = ["espnet_module", "espnet_accepts", "SUBJECTS", "sequential_grad_W", "SEQUENTIAL"]

#: The value of ``Declared.order`` for a row-by-row accumulation in index order.
SEQUENTIAL = "sequential"


def espnet_module() -> ModuleType:
    """The installed ESPnet module under test (imported after the compat layer)."""
    import_chainer()
    try:
        return importlib.import_module(ESPNET_MODULE)
    except ImportError as exc:
        raise SetupError(f"{ESPNET_MODULE} is not importable ({exc}); make installs espnet==202511 --no-deps") from exc


def _inputs(case: Case, device: Device) -> dict[str, Any]:
    return {k: device.put(v) for k, v in build_arrays(case).items()}


def _function_run(get_fn: Callable[[], Callable[..., Any]]) -> Callable[[Case, Device, Context, Recorder], None]:
    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        chainer = import_chainer()
        F = chainer.functions
        embed_id = get_fn()
        a = _inputs(case, device)
        W = chainer.Variable(a["W"])
        gy = chainer.Variable(a["gy"])
        with rec.phase("forward"):
            y = embed_id(a["x"], W, ignore_label=case.spec.get("ignore_label"))
        rec.output("y", y)
        with rec.phase("backward"):
            W.cleargrad()
            y.grad_var = gy
            y.backward(enable_double_backprop=True)
        gW = W.grad_var
        rec.output("grad.W", gW)
        with rec.phase("double-backward"):
            W.cleargrad()
            gy.cleargrad()
            s = F.sum(gW * a["ggW"])
            s.backward()
        rec.output("grad2.gy", gy.grad)
        rec.output("grad2.W", W.grad)

    return run


def _link_run(get_cls: Callable[[], Any]) -> Callable[[Case, Device, Context, Recorder], None]:
    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        import_chainer()
        cls = get_cls()
        a = _inputs(case, device)
        vocab, width = a["W"].shape[0], a["W"].shape[-1]
        link = cls(vocab, width, ignore_label=case.spec.get("ignore_label"))
        link.to_device(device.chainer_device())
        # Parameters come from the case, bit for bit and in the case's dtype (no initializer draws).
        link.W.array = a["W"]
        with rec.phase("forward"):
            y = link(a["x"])
        rec.output("y", y)
        with rec.phase("backward"):
            link.cleargrads()  # Chainer parameters start with NaN gradients on purpose
            y.grad = a["gy"]
            y.backward()
        rec.output("grad.W", link.W.grad)

    return run


def _chainer_embed_id() -> Callable[..., Any]:
    return import_chainer().functions.embed_id


def _chainer_EmbedID() -> Any:
    return import_chainer().links.EmbedID


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

    x, gy, W = np.asarray(arrays["x"]), np.asarray(arrays["gy"]), np.asarray(arrays["W"])
    ignore = spec.get("ignore_label")
    gW = np.zeros(W.shape, dtype=gy.dtype)
    rows = gy.reshape(x.size, W.shape[-1]) if x.size else gy.reshape(0, W.shape[-1])
    for ix, row in zip(x.ravel().tolist(), rows):
        if ignore is not None and ix == ignore:
            continue
        gW[ix] += row
    return {"grad.W": gW}

SUBJECTS: tuple[Subject, ...] = (
    Subject("chainer.embed_id", "embed", _function_run(_chainer_embed_id), declared=_CHAINER,
            description="chainer.functions.embed_id (with and without ignore_label)", double_backward=True,
            source="chainer/functions/connection/embed_id.py"),
    Subject("chainer.EmbedID", "embed", _link_run(_chainer_EmbedID), declared=_CHAINER,
            description="the link chainer.links.EmbedID", source="chainer/links/connection/embed_id.py"),
    Subject("espnet.embed_id", "embed", _function_run(lambda: espnet_module().embed_id), declared=_ESPNET, accepts=espnet_accepts,
            description="ESPnet's deterministic embed_id / EmbedIDFunction", double_backward=True,
            source=ESPNET_MODULE.replace(".", "/") + ".py"),
    Subject("espnet.EmbedID", "embed", _link_run(lambda: espnet_module().EmbedID), declared=_ESPNET, accepts=espnet_accepts,
            description="ESPnet's deterministic EmbedID link", source=ESPNET_MODULE.replace(".", "/") + ".py"),
)
