"""Gate: ids with ignore-label padding through an embedding into NStepLSTM (ESPnet decoder style)."""

from __future__ import annotations

import pytest

from harness.pytest_plugin import check_every_example, subjects_of

pytestmark = pytest.mark.gate


@pytest.mark.parametrize("subject", subjects_of("pipeline"))
def test_pipeline_contract(subject, device, contracts):
    assert check_every_example(contracts, subject, device) >= 1
