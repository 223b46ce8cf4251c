"""Planted model subjects for the trajectory tests (``--subject-plugin suites.plugins.planted_model:SUBJECTS``).

- ``planted.model_noisy_loss``: the ``espnet_rnnlm`` recipe whose loss (and its gradient) is scaled by
  ``1 + u * 2**-18`` in one function node, ``u`` drawn from the operating system's entropy on every step of every
  run (as a racing reduction would move it): its trajectory differs run to run from step 0 on, at that node;
- ``planted.model_adadelta_eps``: the same recipe whose optimizer is AdaDelta with eps 1e-6 instead of ESPnet's
  1e-8 (a changed default): the forward and backward of every step it shares with the shipped subject are the
  same bits, and only the update differs. No one-call subject sees it; a trajectory ``--against`` the shipped
  ``model.espnet_rnnlm`` does.

Both take the shipped subject's cases (recipe ``espnet_rnnlm``). Not part of the harness.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from harness.subjects.base import Declared, Subject
from harness.subjects.call_runs import call_run
from harness.subjects.model_calls import run_training

__all__ = ["SUBJECTS"]


def noisy_loss(env: Any, a: dict, spec: Any, emit: Any) -> None:
    """The shipped LM training with the loss (and so its gradients) scaled by a factor drawn from the OS's
    entropy at every step, inside one function node (``NoisyScale``: the same inputs, other outputs, as a racing
    kernel gives)."""
    chainer = env.chainer

    class NoisyScale(chainer.function_node.FunctionNode):
        def forward(self, inputs: Any) -> Any:
            (x,) = inputs
            # 1 + k * 2**-22 for k in 1..2**16: two draws that differ are at least 2 float32 ULPs of the loss
            # apart, so every step's forward differs but where both draws give the same k (1 in 65,536)
            k = 1 + int.from_bytes(os.urandom(2), "little")
            self.scale = 1.0 + k * 2.0 ** -22
            return (np.asarray(x * self.scale, dtype=x.dtype),)

        def backward(self, indexes: Any, grad_outputs: Any) -> Any:
            return (grad_outputs[0] * self.scale,)

    run_training(env, spec, emit, "espnet_rnnlm", loss_hook=lambda loss: NoisyScale().apply((loss,))[0])


def adadelta_eps(env: Any, a: dict, spec: Any, emit: Any) -> None:
    """The shipped LM training with AdaDelta's eps at 1e-6 (ESPnet's is 1e-8)."""
    run_training(env, spec, emit, "espnet_rnnlm", optimizer=env.chainer.optimizers.AdaDelta(eps=1e-6))


def _lm(case: Any) -> bool:
    return case.spec.get("recipe") == "espnet_rnnlm"


_CLAIM = {"cpu": Declared(True, "claims the shipped subject's determinism (planted)")}

SUBJECTS = (
    Subject("planted.model_noisy_loss", "model", call_run(noisy_loss), devices=("cpu",), declared=_CLAIM,
            accepts=_lm, description="planted: the LM's loss moved by OS entropy at every step"),
    Subject("planted.model_adadelta_eps", "model", call_run(adadelta_eps), devices=("cpu",), declared=_CLAIM,
            accepts=_lm, description="planted: AdaDelta eps 1e-6 instead of 1e-8 (only the update changes)"),
)
