"""What a model case (family ``model``: K optimizer steps of a model) holds and costs, from its spec alone.

A model case is a small JSON: the recipe (:data:`harness.core.schemas.MODEL_RECIPES`), the sizes, the optimizer,
the clip threshold and the number of steps; its initial parameters and every step's minibatch are drawn from
its seed inside the run (:mod:`harness.subjects.model_calls`), so it names no arrays. This module gives the
harness's side what it needs without Chainer: the parameter count per recipe, the size of a step's batch,
the bound on the parameter snapshots a run keeps, the spec's cross-field rules. NumPy-free integer arithmetic.
"""

from __future__ import annotations

from typing import Any, Mapping

from harness.core.errors import InvalidArgument
from harness.core.schema_check import problem

__all__ = ["DEFAULTS", "TRAJECTORY_CONTEXTS", "setting", "param_count", "snapshot_bound", "step_shape", "input_bytes",
           "check_model_spec"]

#: The spec's optional keys and the value a missing one means (the calls module reads the same defaults).
DEFAULTS: dict[str, Any] = {"min_len": 1, "optimizer": "adadelta", "clip": 5.0, "id_kind": "uniform"}


#: The two contexts a campaign trains each model case in, whose trajectories it compares step by step
#: (:mod:`harness.execute.trajectories`): the machine's defaults against one BLAS thread, where OpenBLAS splits
#: a model's GEMMs differently. Other contexts run a model case only where a contract asks for them
#: (``identical_across``): a trajectory costs K steps of a model per context.
TRAJECTORY_CONTEXTS: tuple[str, str] = ("default", "blas1")


def setting(spec: Mapping[str, Any], key: str) -> Any:
    """``spec[key]``, else its default (:data:`DEFAULTS`; ``eprojs``: the hidden width; ``subsample``: all 1)."""
    if key in spec:
        return spec[key]
    if key == "eprojs":
        return int(spec["hidden"])
    if key == "subsample":
        return [1] * (int(spec["n_layers"]) + 1)
    return DEFAULTS[key]


def _lstm_params(in_size: int, hidden: int) -> int:
    """One direction of one layer of Chainer's NStepLSTM: w0..w3 (H x in), w4..w7 (H x H), b0..b7."""
    return 4 * hidden * (in_size + hidden) + 8 * hidden


def param_count(spec: Mapping[str, Any]) -> int:
    """The number of trained parameters (every element of every parameter array) of a model case."""
    vocab, width, hidden, layers = (int(spec[k]) for k in ("vocab", "width", "hidden", "n_layers"))
    if spec["recipe"] == "espnet_blstmp_ctc":
        proj = int(setting(spec, "eprojs"))
        n = 0
        for i in range(layers):  # RNNP: a one-layer NStepBiLSTM, then a linear bottleneck, per layer
            n += 2 * _lstm_params(width if i == 0 else proj, hidden) + 2 * hidden * proj + proj
        return n + proj * vocab + vocab  # the CTC head's linear layer
    n = vocab * width  # the embedding
    n += sum(_lstm_params(width if i == 0 else hidden, hidden) for i in range(layers))
    return n + hidden * vocab + vocab  # the output layer


def snapshot_bound(steps: int) -> int:
    """At most how many full parameter snapshots a run of ``steps`` steps keeps: steps 0, 1, 2, 4, 8, ... below
    ``steps`` and the last one (the rule itself is :func:`harness.subjects.model_calls.snapshot_steps`)."""
    return max(int(steps) - 1, 0).bit_length() + 2


def step_shape(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(batch, longest sequence) of every step's minibatch."""
    return int(spec["batch"]), int(spec["max_len"])


def input_bytes(spec: Mapping[str, Any]) -> int:
    """Bytes of one step's drawn inputs: a CTC batch's features and labels, an LM batch's ids and targets."""
    batch, t_max = step_shape(spec)
    if spec["recipe"] == "espnet_blstmp_ctc":
        return batch * t_max * (int(spec["width"]) * 8 + 8)
    return batch * (t_max + 1) * 16


def check_model_spec(spec: Mapping[str, Any]) -> None:
    """The rules of a model spec that a schema does not say (one :class:`InvalidArgument` line)."""
    lo, hi = int(setting(spec, "min_len")), int(spec["max_len"])
    if lo > hi:
        raise InvalidArgument(problem(["spec", "min_len"], lo, f"must be <= max_len={hi}"))
    if int(spec["vocab"]) < 2:
        raise InvalidArgument(problem(["spec", "vocab"], spec["vocab"], "must be >= 2 (a model's labels: blank or "
                                      "eos, and one more)"))
    if spec["recipe"] == "espnet_blstmp_ctc":
        sub = list(setting(spec, "subsample"))
        if len(sub) != int(spec["n_layers"]) + 1:
            raise InvalidArgument(problem(["spec", "subsample"], sub, f"must give n_layers + 1 = "
                                          f"{int(spec['n_layers']) + 1} factors (ESPnet's 1_2_2_1_1 form)"))
