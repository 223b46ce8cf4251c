"""A model case is a small JSON whose spec the schema and the model rules check, whose cost grows with its steps
and its snapshots, and whose parameter count is the models' own."""

from __future__ import annotations

import pytest

from harness.core.cases import Case, build_arrays
from harness.core.cost import estimate
from harness.core.errors import InvalidArgument
from harness.core.model_cases import param_count, snapshot_bound
from harness.subjects.model_calls import snapshot_steps

LM = {"recipe": "espnet_rnnlm", "steps": 4, "batch": 3, "max_len": 5, "vocab": 11, "width": 6, "hidden": 7,
      "n_layers": 2}
CTC = {"recipe": "espnet_blstmp_ctc", "steps": 4, "batch": 3, "max_len": 9, "vocab": 5, "width": 4, "hidden": 6,
       "eprojs": 3, "n_layers": 2, "subsample": [1, 2, 1]}


def test_a_model_case_is_valid_json_with_no_arrays_of_its_own():
    case = Case("model", 1, LM)
    assert Case.from_json(case.to_json()) == case
    assert build_arrays(case) == {}


@pytest.mark.parametrize("change, message", [
    ({"recipe": "transformer"}, r"\$.spec.recipe='transformer' must be 'espnet_blstmp_ctc', 'espnet_rnnlm' or"),
    ({"min_len": 6}, r"\$.spec.min_len=6 must be <= max_len=5"),
    ({"vocab": 1}, r"\$.spec.vocab=1 must be >= 2"),
    ({"optimizer": "sgd"}, r"\$.spec.optimizer='sgd'"),
    ({"perturb": {"param": "lo.W"}}, r"\$.spec.perturb is missing the field 'index'"),
    ({"ids_shape": [3]}, r"ids_shape"),
])
def test_a_bad_model_spec_is_one_line_naming_the_field(change, message):
    with pytest.raises(InvalidArgument, match=message):
        Case("model", 1, {**LM, **change})


def test_a_blstmp_case_needs_one_subsampling_factor_per_layer_and_one_more():
    with pytest.raises(InvalidArgument, match=r"subsample.*must give n_layers \+ 1 = 3"):
        Case("model", 1, {**CTC, "subsample": [1, 2]})


def test_the_parameter_count_is_the_sum_of_the_layers_shapes():
    # embedding 11x6; LSTM layer 0: 4*7*(6+7) + 8*7, layer 1: 4*7*(7+7) + 8*7; output 7x11 + 11
    assert param_count(LM) == 66 + (364 + 56) + (392 + 56) + 77 + 11
    # per layer: two directions of a one-layer LSTM (in 4, then eprojs 3) and a 12 -> 3 bottleneck; CTC head 3x5 + 5
    layer0 = 2 * (4 * 6 * (4 + 6) + 8 * 6) + 2 * 6 * 3 + 3
    layer1 = 2 * (4 * 6 * (3 + 6) + 8 * 6) + 2 * 6 * 3 + 3
    assert param_count(CTC) == layer0 + layer1 + 3 * 5 + 5


@pytest.mark.parametrize("steps", [1, 2, 3, 5, 8, 9, 100, 1000])
def test_the_snapshot_bound_holds_the_steps_a_run_snapshots(steps):
    snaps = snapshot_steps(steps)
    assert snaps[0] == 0 and snaps[-1] == steps - 1 and len(snaps) <= snapshot_bound(steps)
    assert all(s in snaps for s in (1, 2, 4, 8) if s < steps)


def test_the_cost_grows_with_the_steps_and_keeps_every_snapshot():
    few, many = (estimate(Case("model", 1, {**LM, "steps": k})) for k in (4, 400))
    assert many.flops == 100 * few.flops and many.loops > few.loops
    assert many.subject - few.subject == 4 * param_count(LM) * (snapshot_bound(400) - snapshot_bound(4))


def test_the_harness_and_the_calls_module_read_the_same_defaults():
    # the calls module imports no harness code, so it spells its defaults itself: they must be these
    from harness.core import model_cases
    from harness.core.schemas import MODEL_RECIPES
    from harness.subjects import model_calls

    assert model_calls.DEFAULTS == model_cases.DEFAULTS and model_calls.RECIPES == MODEL_RECIPES
