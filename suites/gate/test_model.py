"""Gate: a short training trajectory of each model subject keeps its contract.

A model case's run records every step's loss, gradient norm and parameter digest (and the parameters at
log-spaced steps), so the contract's ``reproducible`` judges the whole trajectory: every step bit-identical run
to run. Between the contexts of the trajectory pair (``default`` and ``blas1``) the two trainings are compared
step by step and judged by the contract's ``identical_across``, as ``harness gate`` judges them. The cases are
the campaign's own (:func:`harness.generate.model_cases.trajectory_cases`: a few steps at ``ci`` sizes);
``python -m harness trajectory`` and the ``realistic`` profile run the ``slice`` scale's 100 steps.
"""

from __future__ import annotations

import pytest

from harness.generate.model_cases import trajectory_cases
from harness.pytest_plugin import assert_contract, contract_violations, subjects_of

pytestmark = pytest.mark.gate


def _case(subject: str):
    from harness.subjects.registry import get_subject

    [case] = [c for c in trajectory_cases("ci") if get_subject(subject).applies_to(c)]
    return case


@pytest.mark.parametrize("subject", subjects_of("model"))
def test_model_trajectory_contract(subject, device, contracts):
    """Every step of a short trajectory of the subject's recipe is judged against the subject's contract."""
    assert_contract(contract_violations(contracts, subject, _case(subject), device, repeats=2))


@pytest.mark.parametrize("subject", subjects_of("model"))
def test_model_trajectory_between_the_pairs_contexts_keeps_identical_across(subject, device, contracts):
    """The subject trained in both contexts of the trajectory pair, compared step by step: bit-identical at
    every step where the contract's ``identical_across`` requires it, and every step compared either way."""
    from harness.core.model_cases import TRAJECTORY_CONTEXTS
    from harness.execute.isolated import Runner
    from harness.judge.trajectory import compare_runs, judge_trajectory, read_run

    if device.kind != "cpu":
        pytest.skip(f"the trajectory pair's {TRAJECTORY_CONTEXTS[1]} context applies to the CPU only")
    case = _case(subject)
    with Runner() as runner:
        outcomes = [runner.run(case, subject, device, ctx) for ctx in TRAJECTORY_CONTEXTS]
    assert all(o.record.status == "ok" for o in outcomes), [o.record.errors for o in outcomes]
    pair = compare_runs(*(read_run(o.arrays) for o in outcomes))
    m = judge_trajectory(contracts.find(subject, device.kind, TRAJECTORY_CONTEXTS[1]),
                         {"case_id": case.id, "subject": subject, "device": device.id}, TRAJECTORY_CONTEXTS, pair)
    assert m.n_total == case.spec["steps"] == pair.steps
    assert m.verdict in ("bit-identical", "diverged as allowed"), f"{m.verdict}: {m.rule} ({m.contract})"
