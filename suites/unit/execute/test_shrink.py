"""The shrinker's integer passes (harness.execute.shrink): bisection over each dimension, counted in calls.

The passes run no subject: a predicate stands in for "the finding still reproduces", so these tests count exactly
how many runs a shrink of a threshold costs. The end-to-end shrinks (real subjects, in workers) are in
suites/unit/judge/test_findings.py.

Shrinking a model case: a training run gets fewer steps, a smaller batch and shorter sequences first, then the
model's sizes; its sizes read as a person reads them."""

from __future__ import annotations

import pytest

from harness.core.cases import Case
from harness.execute.shrink import case_sizes, knobs, lowest, smaller
from harness.generate.model_cases import model_case


def _counted(threshold: int):
    calls: list[int] = []

    def holds(v: int) -> bool:
        calls.append(v)
        return v >= threshold

    return holds, calls


@pytest.mark.parametrize("value,threshold", [(600, 589), (600, 1), (600, 600), (600, 599), (600, 2), (2, 2),
                                             (1000, 377), (16, 9)])
def test_lowest_finds_a_threshold_in_logarithmic_runs(value, threshold):
    holds, calls = _counted(threshold)
    assert lowest(value, 1, holds) == threshold
    # floor, value - 1, then a bisection of [1, value - 1]: never the linear walk down
    assert len(calls) <= 2 + (value - 1).bit_length()
    assert all(1 <= v < value for v in calls)


def test_lowest_of_a_dimension_at_its_floor_runs_nothing():
    holds, calls = _counted(1)
    assert lowest(1, 1, holds) == 1 and calls == []


def test_lowest_returns_a_value_that_holds_where_the_property_is_not_monotonic():
    ok = {600, 599, 7, 300}
    seen: list[int] = []

    def holds(v: int) -> bool:
        seen.append(v)
        return v in ok

    v = lowest(600, 1, holds)
    assert v in ok and v < 600 and seen


def test_knobs_cover_every_integer_dimension_and_put_one_at_a_time():
    lstm = Case("lstm", 3, {"n_layers": 2, "in_size": 8, "hidden": 4, "lengths": [3, 5, 1]})
    ks = {k.label: k for k in knobs(lstm)}
    assert set(ks) == {"sequence 0 of length", "sequence 1 of length", "sequence 2 of length", "n_layers",
                       "hidden", "in_size"}
    two = ks["sequence 1 of length"].put(lstm, 2)
    assert two is not None and list(two.spec["lengths"]) == [3, 2, 1] and two.spec["hidden"] == 4
    assert ks["in_size"].get(ks["in_size"].put(lstm, 5)) == 5


def test_lowering_the_vocabulary_keeps_the_ignore_label_inside_it():
    embed = Case("embed", 5, {"vocab": 10, "width": 3, "ids_shape": [6, 2], "ignore_label": 8, "ignore_frac": 0.3})
    k = {k.label: k for k in knobs(embed)}["vocab"]
    low = k.put(embed, 4)
    assert low is not None and low.spec["vocab"] == 4 and low.spec["ignore_label"] == 3
    assert {k.label for k in knobs(embed)} >= {"ids dimension 0 of", "ids dimension 1 of", "width", "vocab"}


def test_a_cases_findings_of_two_tensor_kinds_share_the_candidate_runs():
    """Shrinking the input-gradient finding after the outputs one, with the lane's memo, re-reads the checks the
    first made (real subjects, in workers); every answer it re-reads is the answer a new run gives."""
    from harness.core.devices import CPU
    from harness.execute.isolated import Runner
    from harness.execute.shrink import Target, reproduces, shrink
    from harness.judge.contracts import load_contracts

    case = Case("lstm", 706793088, {"n_layers": 1, "in_size": 8, "hidden": 4, "lengths": [1, 5, 1]})
    contracts = load_contracts(None)
    outputs = Target(kind="not invariant", subject="chainer.NStepLSTM", device=CPU, relation="alone",
                     tensor_kind="outputs")
    grads = Target(kind="not invariant", subject="chainer.NStepLSTM", device=CPU, relation="alone",
                   tensor_kind="input gradients")
    memo: dict = {}
    with Runner(timeout=120) as runner:
        first = shrink(runner, contracts, case, outputs, budget=120, memo=memo)
        assert first.shrunk and first.complete and first.runs > 0
        again = shrink(runner, contracts, first.case, grads, budget=120, memo=memo)
        assert again.complete and again.runs < first.runs  # most of its checks were made for the first
        checked = [(key[0], shown) for key, shown in memo.items()]
        assert len(checked) >= 5
        cases = {c.id: c for c in (case, first.case, again.case)}
        compared = 0
        for cid, shown in checked:
            if cid in cases:  # what the memo says is what a fresh check without it says, kind by kind
                for t in (outputs, grads):
                    assert reproduces(runner, contracts, cases[cid], t) == (t.tensor_kind in shown)
                    compared += 1
        assert compared >= 4


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
