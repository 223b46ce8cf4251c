"""Model subjects (family ``model``): K optimizer steps of a model, as ESPnet1's chainer backend trains it.

One subject per recipe (:data:`harness.core.schemas.MODEL_RECIPES`); each takes the model cases of its recipe.
The call is :func:`harness.subjects.model_calls.train`: what a run records (per step its loss, gradient norm
and parameter digest; full parameters at log-spaced steps) is described there, and the trajectories of two runs
are compared by :mod:`harness.judge.trajectory`.
"""

from __future__ import annotations

from typing import Callable

from harness.core.cases import Case
from harness.subjects import model_calls
from harness.subjects.base import Declared, Subject
from harness.subjects.call_runs import call_run

__all__ = ["SUBJECTS", "subject_for_recipe"]


def _takes(recipe: str) -> Callable[[Case], bool]:
    def accepts(case: Case) -> bool:
        return case.spec.get("recipe") == recipe

    return accepts


_CPU = Declared(True, "BLAS GEMMs at a fixed thread count, a sequential CPU embedding backward, no atomics")
_DECLARED = {
    "espnet_blstmp_ctc": {"cpu": _CPU, "gpu": Declared(None, "CTC's GPU kernels declare nothing")},
    "espnet_rnnlm": {"cpu": _CPU, "gpu": Declared(True, "one-hot GEMM embedding backward; NStepLSTM without "
                                                        "cuDNN")},
    "chainer_lm": {"cpu": _CPU, "gpu": Declared(False, "L.EmbedID's GPU backward declares atomicAdd")},
}
_WHAT = {
    "espnet_blstmp_ctc": ("ESPnet's Encoder('blstmp') (L.NStepBiLSTM + bottlenecks) and CTC head, trained K steps",
                          "espnet/nets/chainer_backend/rnn/encoders.py + espnet/nets/chainer_backend/ctc.py"),
    "espnet_rnnlm": ("ESPnet's deterministic EmbedID (eos padding) + L.NStepLSTM + linear + softmax CE, trained K "
                     "steps", "espnet/nets/chainer_backend/deterministic_embed_id.py + chainer/links/rnn"),
    "chainer_lm": ("L.EmbedID(ignore_label=-1) + L.NStepLSTM + linear + softmax CE, trained K steps",
                   "chainer/links/connection/embed_id.py + chainer/links/rnn/n_step_lstm.py"),
}

SUBJECTS: tuple[Subject, ...] = tuple(
    Subject(f"model.{r}", "model", call_run(model_calls.train, recipe=r), declared=_DECLARED[r],
            accepts=_takes(r), description=_WHAT[r][0], source=_WHAT[r][1])
    for r in model_calls.RECIPES)


def subject_for_recipe(recipe: str) -> str:
    """The shipped model subject that trains ``recipe``."""
    return f"model.{recipe}"
