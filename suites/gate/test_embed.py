"""Gate: embedding determinism and gradient error against the oracle, per subject and device."""

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


@pytest.mark.parametrize("subject", subjects_of("embed"))
def test_embed_contract(subject, device, contracts):
    """Every example the subject takes (its own strategy: ESPnet gets float32 W only) must keep its contract;
    the test fails if fewer than half the profile's examples really ran."""
    assert check_every_example(contracts, subject, device) >= 1


@pytest.mark.parametrize("subject", subjects_of("embed"))
def test_embed_collision_heavy_anchor(subject, device, contracts):
    """Thousands of updates to three rows with a random upstream gradient: where atomics race."""
    from harness.core.cases import Case
    from harness.generate.edges import with_edge_tags

    # Tagged with the edges it reaches, as every generated case is: ignore label -1 with row V-1 used is the
    # edge of ESPnet's GPU known defect (contracts.toml), which the contracts must be able to name here too.
    case = with_edge_tags(Case("embed", 5, {"vocab": 3, "width": 8, "ids_shape": [64, 64], "id_kind": "collision",
                                            "distinct": 3, "ignore_label": -1, "ignore_frac": 0.1}))
    assert_contract(contract_violations(contracts, subject, case, device))


@pytest.mark.parametrize("subject", subjects_of("embed"))
def test_embed_real_scale(subject, device, contracts):
    """The real-scale cases every default gate runs keep the subject's contract: an ESPnet decoder
    batch (30 targets, odim 5,000: 22.6 million ids x vocab, the eos padding piled on one row) and a 65,000-word
    vocabulary."""
    assert check_real_scale(contracts, subject, device) >= 1
