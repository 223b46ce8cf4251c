"""Shrinking a model case: a training run gets fewer steps, a smaller batch and shorter sequences first, then the
model's sizes; its sizes read as a person reads them."""

from __future__ import annotations

from harness.execute.shrink import case_sizes, knobs, smaller
from harness.generate.model_cases import model_case


def test_a_model_case_lowers_its_steps_batch_and_longest_sequence_before_its_sizes():
    case = model_case("espnet_rnnlm", "ci", seed=1, steps=5)
    labels = [k.label for k in knobs(case)]
    assert labels[:3] == ["steps", "batch", "max_len"]
    assert set(labels) >= {"hidden", "width", "vocab", "n_layers"}
    steps = knobs(case)[0]
    fewer = steps.put(case, 2)
    assert steps.get(case) == 5 and fewer is not None and fewer.spec["steps"] == 2 and smaller(fewer, case)
    assert case_sizes(fewer)["steps"] == 2 and case_sizes(case)["batch"] == case.spec["batch"]


def test_a_candidate_below_the_shortest_sequence_is_not_a_case():
    case = model_case("espnet_rnnlm", "ci", seed=1)  # min_len 2
    max_len = next(k for k in knobs(case) if k.label == "max_len")
    assert max_len.put(case, 1) is None and max_len.put(case, 2) is not None
