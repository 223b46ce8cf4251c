"""Gate: bad inputs raise what the contracts say (or behave as documented), and never crash the harness."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.generate.strategies import bad_inputs
from harness.pytest_plugin import ExampleCounter, assert_contract, bad_input_violations, min_examples, subjects_of

pytestmark = pytest.mark.gate


@pytest.mark.parametrize("family", ["embed", "lstm", "pipeline"])
@pytest.mark.parametrize("context", ["default", "debug"])
def test_bad_inputs(family, context, device, contracts):
    from harness.subjects.registry import get_subject

    counter = ExampleCounter()

    @given(data=st.data())
    def check(data):
        case = data.draw(bad_inputs(family=family), label="case")
        for subject in subjects_of(family):
            if get_subject(subject).applies_to(case):
                assert_contract(bad_input_violations(contracts, subject, case, device, context))
                counter.ran()

    check()
    counter.require(min_examples(), "subject x bad-input checks")


def test_every_bad_kind_has_a_rule(contracts):
    """Each bad-input kind the strategies make is covered by at least one contract rule."""
    from harness.generate.strategies import BAD_KINDS

    covered = {r.tag for r in contracts.bad_inputs}
    missing = [k for k in BAD_KINDS if f"bad:{k}" not in covered]
    assert not missing, f"bad-input kinds with no rule in {contracts.path}: {missing}"
