"""Gate: a short training trajectory of each model subject keeps its contract.

A model case's run records every step's loss, gradient norm and parameter digest (and the parameters at
log-spaced steps), so the contract's ``reproducible`` judges the whole trajectory: every step bit-identical run
to run. The ``ci`` scale (4 steps of a small model) keeps it cheap; ``python -m harness trajectory`` runs the
``slice`` scale's 100 steps.
"""

from __future__ import annotations

import pytest

from harness.generate.model_cases import model_case
from harness.pytest_plugin import assert_contract, contract_violations, subjects_of

pytestmark = pytest.mark.gate


@pytest.mark.parametrize("subject", subjects_of("model"))
def test_model_trajectory_contract(subject, device, contracts):
    """Every step of a 4-step trajectory of the subject's recipe is judged against the subject's contract."""
    from harness.subjects.registry import get_subject

    recipe = subject.split(".", 1)[1]
    case = model_case(recipe, "ci", seed=11)
    assert get_subject(subject).applies_to(case)
    assert_contract(contract_violations(contracts, subject, case, device, repeats=2))
