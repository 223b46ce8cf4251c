"""Gate: LSTM determinism (links and functions) and gradient error against the oracle."""

from __future__ import annotations

import pytest

from harness.pytest_plugin import (
    assert_contract,
    check_every_example,
    check_real_scale,
    contract_violations,
    subjects_of,
)

pytestmark = pytest.mark.gate


@pytest.mark.parametrize("subject", subjects_of("lstm"))
def test_lstm_contract(subject, device, contracts):
    """Every example the subject takes (n_step_lstm unidirectional, n_step_bilstm bidirectional) must keep its
    contract; the test fails if fewer than half the profile's examples really ran."""
    assert check_every_example(contracts, subject, device) >= 1


@pytest.mark.parametrize("subject", subjects_of("lstm"))
@pytest.mark.parametrize("context", ["blas1", "blas2", "debug"])
def test_lstm_contexts(subject, context, device, contracts):
    """The LSTM anchors (the one OpenBLAS splits across threads among them), in each CPU context."""
    from harness.generate.corpora import anchor_cases
    from harness.subjects.registry import get_subject

    if device.is_gpu and context.startswith("blas"):
        pytest.skip("BLAS thread contexts apply to the CPU only")
    anchors = [c for c in anchor_cases() if c.family == "lstm" and get_subject(subject).applies_to(c)]
    assert anchors, f"no LSTM anchor applies to {subject}: the corpus lost its anchors"
    for case in anchors:
        assert_contract(contract_violations(contracts, subject, case, device, context=context, repeats=2))


# The links only: chainer.n_step_lstm / n_step_bilstm are the functions they call, and a real-scale run costs
# seconds per subject here; `harness gate` runs every subject on these cases.
@pytest.mark.parametrize("subject", [s for s in subjects_of("lstm") if not s.startswith("chainer.n_step_")])
def test_lstm_real_scale(subject, device, contracts):
    """The real-scale cases every default gate runs keep the subject's contract: bidirectional hidden 320 over
    100 steps, 83 features wide, and the corners (800 steps at hidden 4, hidden 1,024, 6 layers, 30 sequences,
    320 features)."""
    assert check_real_scale(contracts, subject, device) >= 1
