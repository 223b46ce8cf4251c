"""Gate: ids with ignore-label padding through an embedding into NStepLSTM (ESPnet decoder style)."""

from __future__ import annotations

import pytest

from harness.pytest_plugin import check_every_example, check_real_scale, subjects_of

pytestmark = pytest.mark.gate


@pytest.mark.parametrize("subject", subjects_of("pipeline"))
def test_pipeline_contract(subject, device, contracts):
    assert check_every_example(contracts, subject, device) >= 1


@pytest.mark.parametrize("subject", subjects_of("pipeline"))
def test_pipeline_real_scale(subject, device, contracts):
    """The real-scale cases every default gate runs keep the subject's contract: an ESPnet decoder's
    shapes (odim 5,000, 256 units, eos padding)."""
    assert check_real_scale(contracts, subject, device) >= 1
