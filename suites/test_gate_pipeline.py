"""Gate: ids with ignore-label padding through an embedding into NStepLSTM (ESPnet decoder style)."""

from __future__ import annotations

import pytest
from hypothesis import given

from harness.pytest_plugin import assert_contract, contract_property, contract_violations, profile_bounds, subjects_of
from harness.generate.strategies import pipeline_cases

pytestmark = pytest.mark.gate


@pytest.mark.parametrize("subject", subjects_of("pipeline"))
@contract_property
@given(case=pipeline_cases(**profile_bounds("pipeline")))
def test_pipeline_contract(subject, device, contracts, case):
    assert_contract(contract_violations(contracts, subject, case, device))
