"""Gate: embedding determinism and gradient error against the oracle, per subject and device."""

from __future__ import annotations

import pytest
from hypothesis import given

from harness.pytest_plugin import assert_contract, contract_property, contract_violations, profile_bounds, subjects_of
from harness.generate.strategies import embed_cases

pytestmark = pytest.mark.gate


@pytest.mark.parametrize("subject", subjects_of("embed"))
@contract_property
@given(case=embed_cases(**profile_bounds("embed")))
def test_embed_contract(subject, device, contracts, case):
    from harness.subjects.registry import get_subject

    if not get_subject(subject).applies_to(case):
        return  # e.g. ESPnet takes float32 W only: other dtypes are checked as bad inputs
    assert_contract(contract_violations(contracts, subject, case, device))


@pytest.mark.parametrize("subject", subjects_of("embed"))
def test_embed_collision_heavy_anchor(subject, device, contracts):
    """Thousands of updates to three rows with a random upstream gradient: where atomics race."""
    from harness.core.cases import Case

    case = Case("embed", 5, {"vocab": 3, "width": 8, "ids_shape": [64, 64], "id_kind": "collision", "distinct": 3,
                             "ignore_label": -1, "ignore_frac": 0.1})
    assert_contract(contract_violations(contracts, subject, case, device))
