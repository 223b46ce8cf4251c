"""Gate: ids with ignore-label padding through an embedding into NStepLSTM (ESPnet decoder style)."""

from __future__ import annotations

import pytest
from hypothesis import given

from harness.pytest_plugin import (ExampleCounter, assert_contract, cases_for, contract_property, contract_violations,
                                   min_examples, subjects_of)

pytestmark = pytest.mark.gate


@pytest.mark.parametrize("subject", subjects_of("pipeline"))
def test_pipeline_contract(subject, device, contracts):
    counter = ExampleCounter()

    @contract_property
    @given(case=cases_for(subject))
    def check(case):
        assert_contract(contract_violations(contracts, subject, case, device))
        counter.ran()

    check()
    counter.require(min_examples())
