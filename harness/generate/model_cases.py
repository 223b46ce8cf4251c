"""Model cases (family ``model``) at the profiles' sizes: a training run's recipe, sizes and steps, as a small JSON.

A model case's arrays are drawn inside the run from its seed (:mod:`harness.subjects.model_calls`), so a case is
its spec alone. :func:`model_case` gives one per recipe and scale:

- ``ci``: a few units, a few steps: seconds a run, for the normal test tier;
- ``slice``: the ``realistic`` profile's recipe slice (:mod:`harness.generate.recipes`): the widths, hidden sizes
  and vocabularies of the published recipe the model stands for, a :data:`~harness.generate.recipes.SLICE_BATCH`
  sequence batch and one layer, and sequences short enough that a training step, the unit a trajectory counts,
  takes about a second of a CPU core (so 100 steps run in minutes on a 2-core machine). The LMs stand for ESPnet1's
  character decoder (``espnet1.asr.decoder.char``: dunits 300, 50 characters), the CTC model for the blstmp
  encoder (``espnet1.asr.encoder.blstmp``: 83 features, eunits and eprojs 320).

The default report and gate train :func:`trajectory_cases` (a few steps at ``ci`` sizes; the recipe slices'
100 steps in the ``realistic`` profile): the campaign judges their steps as tensors and compares their
trajectories between contexts (:mod:`harness.execute.trajectories`).
"""

from __future__ import annotations

from typing import Any

from harness.core.cases import Case
from harness.core.errors import InvalidArgument
from harness.core.schemas import MODEL_RECIPES
from harness.generate.recipes import SLICE_BATCH, SLICE_LAYERS

__all__ = ["MODEL_SCALES", "model_spec", "model_case", "trajectory_cases", "TRAJECTORY_STEPS"]

MODEL_SCALES = ("ci", "slice")

#: Per scale, the LMs' and the CTC model's sizes (steps: the scale's default trajectory length).
_SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "ci": {"lm": {"steps": 4, "batch": 3, "min_len": 2, "max_len": 6, "vocab": 12, "width": 8, "hidden": 8,
                  "n_layers": 1},
           "ctc": {"steps": 4, "batch": 3, "min_len": 4, "max_len": 10, "vocab": 6, "width": 5, "hidden": 6,
                   "eprojs": 4, "n_layers": 2, "subsample": [1, 2, 1]}},
    "slice": {"lm": {"steps": 100, "batch": SLICE_BATCH, "min_len": 10, "max_len": 24, "vocab": 50, "width": 300,
                     "hidden": 300, "n_layers": SLICE_LAYERS},
              "ctc": {"steps": 100, "batch": SLICE_BATCH, "min_len": 20, "max_len": 48, "vocab": 50, "width": 83,
                      "hidden": 320, "eprojs": 320, "n_layers": SLICE_LAYERS, "subsample": [1, 2]}},
}
#: The recipe tag of each model recipe's cases: the published recipe it stands for.
MODEL_TAGS = {"espnet_blstmp_ctc": "recipe:espnet1.asr.encoder.blstmp",
              "espnet_rnnlm": "recipe:espnet1.asr.decoder.char", "chainer_lm": "recipe:chainer.padded_decoder"}


def model_spec(recipe: str, scale: str = "ci", **overrides: Any) -> dict[str, Any]:
    """The spec of ``recipe`` at ``scale`` (:data:`MODEL_SCALES`), with ``overrides`` (e.g. ``steps``,
    ``optimizer``, ``id_kind``) on top."""
    if recipe not in MODEL_RECIPES:
        raise InvalidArgument(f"recipe={recipe!r} must be one of {', '.join(MODEL_RECIPES)}")
    if scale not in MODEL_SCALES:
        raise InvalidArgument(f"scale={scale!r} must be one of {', '.join(MODEL_SCALES)}")
    sizes = _SIZES[scale]["ctc" if recipe == "espnet_blstmp_ctc" else "lm"]
    return {"recipe": recipe, **sizes, **overrides}


def model_case(recipe: str, scale: str = "ci", seed: int = 0, **overrides: Any) -> Case:
    """A model case of ``recipe`` at ``scale`` (see :func:`model_spec`), tagged with the recipe it stands for."""
    return Case("model", seed, model_spec(recipe, scale, **overrides), tags=(MODEL_TAGS[recipe], f"scale:{scale}"))


#: The steps of the default corpus's short trajectories (``ci``, ``dev`` and ``audit`` profiles): the first
#: step (where a thread count or an atomic first shows) and two updates after it.
TRAJECTORY_STEPS = 3


def trajectory_cases(profile: str = "ci") -> list[Case]:
    """The model cases a default report and gate train: each recipe's ``slice`` (100 steps) in the ``realistic``
    profile; elsewhere each recipe at ``ci`` sizes for :data:`TRAJECTORY_STEPS` steps, the ESPnet RNN LM at its
    slice's widths (300 units, 50 labels) over a short batch: the smallest model measured here whose backward
    OpenBLAS splits differently at 1 and 2 threads (hidden 128 does not), so the trajectory between the
    ``default`` and ``blas1`` contexts has a first differing step to name."""
    if profile == "realistic":
        return [model_case(r, "slice", seed=7) for r in MODEL_RECIPES]
    wide = {"width": 300, "hidden": 300, "vocab": 50, "batch": 4, "min_len": 4, "max_len": 8}
    return [model_case(r, "ci", seed=7, steps=TRAJECTORY_STEPS, **(wide if r == "espnet_rnnlm" else {}))
            for r in MODEL_RECIPES]
