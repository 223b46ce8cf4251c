"""Gate: LSTM determinism (links and functions) and gradient error against the oracle."""

from __future__ import annotations

import pytest
from hypothesis import given

from harness.pytest_plugin import assert_contract, contract_property, contract_violations, profile_bounds, subjects_of
from harness.generate.strategies import lstm_cases

pytestmark = pytest.mark.gate


@pytest.mark.parametrize("subject", subjects_of("lstm"))
@contract_property
@given(case=lstm_cases(**profile_bounds("lstm")))
def test_lstm_contract(subject, device, contracts, case):
    from harness.subjects.registry import get_subject

    if not get_subject(subject).applies_to(case):
        return  # n_step_lstm takes unidirectional cases, n_step_bilstm bidirectional ones
    assert_contract(contract_violations(contracts, subject, case, device))


@pytest.mark.parametrize("subject", subjects_of("lstm"))
@pytest.mark.parametrize("context", ["blas1", "blas2", "debug"])
def test_lstm_contexts(subject, context, device, contracts):
    """The anchor that OpenBLAS splits across threads, in each CPU context (fixed thread count each)."""
    from harness.generate.corpora import anchor_cases
    from harness.subjects.registry import get_subject

    if device.is_gpu and context.startswith("blas"):
        pytest.skip("BLAS thread contexts apply to the CPU only")
    for case in anchor_cases():
        if case.family == "lstm" and get_subject(subject).applies_to(case):
            assert_contract(contract_violations(contracts, subject, case, device, context=context, repeats=2))
