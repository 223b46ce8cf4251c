"""Gate: bad inputs raise what the contracts say (or behave as documented), and never crash the harness."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.generate.strategies import bad_inputs
from harness.pytest_plugin import ExampleCounter, assert_contract, bad_input_violations, min_examples, subjects_of

pytestmark = pytest.mark.gate


@pytest.mark.parametrize("family", ["embed", "lstm", "pipeline"])
@pytest.mark.parametrize("context", ["default", "debug"])
def test_bad_inputs(family, context, device, contracts):
    from harness.subjects.registry import get_subject

    counter = ExampleCounter()

    @given(data=st.data())
    def check(data):
        case = data.draw(bad_inputs(family=family), label="case")
        for subject in subjects_of(family):
            if get_subject(subject).applies_to(case):
                assert_contract(bad_input_violations(contracts, subject, case, device, context))
                counter.ran()

    check()
    counter.require(min_examples(), "subject x bad-input checks")


def test_every_bad_kind_has_a_rule(contracts):
    """Each bad-input kind the strategies make is covered by at least one contract rule."""
    from harness.generate.bad_kinds import BAD_KINDS

    covered = {r.tag for r in contracts.bad_inputs}
    missing = [k for k in BAD_KINDS if f"bad:{k}" not in covered]
    assert not missing, f"bad-input kinds with no rule in {contracts.path}: {missing}"


def _one(kind: str, seed: int = 3):
    from harness.generate.sampler import bad_corpus

    return next(c for c in bad_corpus(examples=40, seed=seed, family="embed") if f"bad:{kind}" in c.tags
                and c.spec.get("w_dtype", "float32") == "float32")


@pytest.mark.parametrize("subject", ["chainer.embed_id", "chainer.EmbedID", "espnet.embed_id", "espnet.EmbedID"])
def test_empty_batch_backward_crash_is_a_known_defect_never_expected(subject, contracts):
    from harness.core.devices import CPU
    from harness.execute.inprocess import measure_here
    from harness.generate.sampler import corpus

    empty = [c for c in corpus("embed", examples=120, seed=3) if "ids:empty" in c.tags
             and c.spec.get("w_dtype", "float32") == "float32"]
    assert empty, "the corpus drew no empty id batch"
    for case in empty[:2]:
        here = measure_here(contracts, subject, case, CPU, "default", repeats=1)
        [task] = [m for m in here.measures if m.kind == "task"]
        assert task.verdict == "known defect", task
        assert "ValueError in backward" in task.actual and "cannot reshape array of size 0" in task.actual
        assert "numpy/numpy/issues/18519" in task.detail


@pytest.mark.parametrize("subject", ["chainer.embed_id", "espnet.EmbedID"])
def test_accepted_negative_ids_are_compared_with_the_oracle(subject, contracts):
    from harness.core.devices import CPU
    from harness.execute.inprocess import measure_here

    case = _one("id_out_of_range_negative")
    here = measure_here(contracts, subject, case, CPU, "default", repeats=1)
    oracle = {m.tensor: m.verdict for m in here.measures if m.kind == "oracle"}
    assert {"y", "grad.W"} <= set(oracle) and set(oracle.values()) == {"within tolerance"}, here.measures
    debug = measure_here(contracts, subject, case, CPU, "debug", repeats=1)
    [task] = [m for m in debug.measures if m.kind == "task"]
    assert task.verdict == "expected error" and task.actual.startswith("ValueError in forward")
    assert not [m for m in debug.measures if m.kind == "oracle"]


def test_every_raises_rule_names_a_phase(contracts):
    missing = [r.line for r in contracts.bad_inputs if r.outcome == "raises" and not r.phase]
    assert not missing, f"raises rules without a phase at lines {missing} of {contracts.path}"
