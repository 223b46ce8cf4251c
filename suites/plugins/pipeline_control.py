"""Test plug-in subjects for the localizer (suites/unit/execute/test_hooks.py); not part of the harness.

``control.pipeline_shuffled`` (family ``embed``) runs a small pipeline of Chainer functions with
one nondeterministic node, by construction, in the middle::

    e = embed_id(x, W)                 EmbedIDFunction     deterministic
    h = tanh(linear(e, V) + gy)        LinearFunction, _ + _, Tanh (gy makes the rows of one id differ)
    s = ShuffledScatterAdd(x, h)       s[v] = sum of h[i] with x[i] == v, rows added in a fresh
                                       random order on every call (OS entropy), as unordered
                                       atomicAdds would; float addition is not associative
    z = tanh(s); loss = sum(z * ggW)   Tanh, _ * _, Sum

and back-propagates ``loss``. The localizer must name ``ShuffledScatterAdd`` (forward) as the
root cause, with the four nodes before it matched.

``control.blas_readout`` (family ``lstm``, float64 cases) is a one-unit linear readout of a long
feature vector: ``tanh(linear(tanh(xs.0), ws.0.0))`` with ``xs.0`` of shape ``(1, K)`` and
``ws.0.0`` of shape ``(1, K)``. NumPy computes that ``(1, K) @ (K, 1)`` product with OpenBLAS's
``ddot``, which splits the sum over threads for K above about 10 000, so ``blas1`` and ``blas2``
give different bits: the root must be the forward of ``LinearFunction``.
"""

from __future__ import annotations

import numpy as np

from harness.core.array_draws import array_rng
from harness.core.cases import Case, build_arrays
from harness.core.compat import import_chainer
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject
from harness.subjects.controls import scatter_add

chainer = import_chainer()
F = chainer.functions

__all__ = ["ShuffledScatterAdd", "SUBJECT", "BLAS_READOUT", "SUBJECTS"]


class ShuffledScatterAdd(chainer.FunctionNode):
    """``out[v] = sum(h[i] for x[i] == v)``, float32, summed in a random order on every call."""

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab

    def forward(self, inputs):
        ids, h = inputs
        self.retain_inputs((0,))
        out = scatter_add(ids, h, self.vocab, None, np.random.default_rng())
        return out.astype(h.dtype, copy=False),

    def backward(self, indexes, grad_outputs):
        ids, = self.get_retained_inputs()
        gout, = grad_outputs
        return None, F.embed_id(ids.array, gout)  # d out[x[i]] / d h[i] = 1: a gather, deterministic


def _run_shuffled(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    a = build_arrays(case)
    x = a["x"].reshape(-1).astype(np.int32)
    W = chainer.Variable(a["W"].astype(np.float32))
    width = W.shape[1]
    V = chainer.Variable((array_rng(case.seed, "V").standard_normal((width, width)) / np.sqrt(width))
                         .astype(np.float32))
    gy = a["gy"].reshape(x.size, width).astype(np.float32)
    ggW = a["ggW"].astype(np.float32)
    with rec.phase("forward"):
        e = F.embed_id(x, W)
        h = F.tanh(F.linear(e, V) + gy)
        s, = ShuffledScatterAdd(W.shape[0]).apply((x, h))
        z = F.tanh(s)
        loss = F.sum(z * ggW)
    rec.output("y", z)
    rec.output("loss", loss)
    with rec.phase("backward"):
        loss.backward()
    rec.output("grad.W", W.grad)
    rec.output("grad.V", V.grad)


def _run_readout(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    a = build_arrays(case)
    x = chainer.Variable(a["xs.0"][:1])
    w = chainer.Variable(a["ws.0.0"][:1])
    with rec.phase("forward"):
        h = F.tanh(x)
        p = F.linear(h, w)
        z = F.tanh(p)
        loss = F.sum(z * z)
    rec.output("y", z)
    with rec.phase("backward"):
        loss.backward()
    rec.output("grad.x", x.grad)
    rec.output("grad.w", w.grad)


SUBJECT = Subject(
    "control.pipeline_shuffled", "embed", _run_shuffled, devices=("cpu",),
    declared={"cpu": Declared(False, "ShuffledScatterAdd sums rows in a random order on every call")},
    accepts=lambda c: c.expect is None and c.spec.get("ignore_label") is None,
    description="test plug-in: embed_id -> linear -> add -> tanh -> ShuffledScatterAdd -> tanh -> sum",
    source="suites/plugins/pipeline_control.py")

BLAS_READOUT = Subject(
    "control.blas_readout", "lstm", _run_readout, devices=("cpu",),
    declared={"cpu": Declared(False, "a float64 (1, K) @ (K, 1) product: OpenBLAS ddot splits K over threads")},
    accepts=lambda c: c.expect is None and c.spec.get("dtype") == "float64",
    description="test plug-in: tanh -> linear (one output unit, K inputs) -> tanh -> sum, float64",
    source="suites/plugins/pipeline_control.py")

SUBJECTS = (SUBJECT, BLAS_READOUT)
