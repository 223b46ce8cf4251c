"""Gate: the anchor corpus in worker processes (across-process bits), and baseline mode."""

from __future__ import annotations

import os

import pytest

from harness.outputs.gate import assert_no_violations, check_baseline, gate_campaign

pytestmark = pytest.mark.gate


@pytest.fixture(scope="session")
def gate_run(tmp_path_factory, contracts, gate):
    """One campaign over the anchor cases and their relations' members: R=2 in a pooled worker, K=1 in a fresh
    one, per context (members in the default context)."""
    from harness.core.contexts import get_context
    from harness.execute.campaign import Campaign, CampaignOptions
    from harness.execute.plan import plan
    from harness.execute.relations import RELATIONS, members
    from harness.generate.corpora import anchor_cases
    from harness.subjects.registry import subjects_for

    d = str(tmp_path_factory.mktemp("gate") / "run")
    # the anchors, and the members of the relations the contracts claim (a claim that compared nothing is
    # "not judged", a failure: the gate runs them, so this campaign does too)
    claimed = sorted({r for c in contracts.contracts for r in c.invariant_under})
    cases = anchor_cases()
    cases = cases + [m.case for c in cases for m in members(c, [RELATIONS[r] for r in claimed])]
    contexts = [get_context(c) for c in ("default", "blas1", "blas2", "debug")]
    camp = Campaign(d, CampaignOptions(repeats=2, fresh=1, quiet=True))
    camp.write_inputs(cases, {"subjects": [], "devices": [dev.id for dev in gate.devices], "contexts": []})
    camp.run(plan(cases, subjects_for(None), list(gate.devices), contexts, contracts=contracts))
    return d


def test_campaign_contracts_hold(gate_run, contracts):
    """Every contract, checked on runs in separate worker processes (pool and fresh)."""
    assert_no_violations(gate_campaign(gate_run, contracts))


def test_positive_control_really_diverged(gate_run):
    """The campaign could have failed: the nondeterministic control did diverge in it."""
    from harness.execute.campaign import load_tasks

    recs = [r for r in load_tasks(gate_run).values()
            if r.subject == "control.nondeterministic" and r.device == "cpu"]
    assert recs, "the control did not run"
    assert any(not t.bitwise_identical for r in recs for t in r.tensors.values())


def test_against_baseline(gate_run, contracts, request):
    """With --baseline DIR: digests the contracts call stable must equal the stored report's."""
    baseline = request.config.getoption("baseline")
    if not baseline:
        pytest.skip("no --baseline DIR given")
    if not os.path.isdir(baseline):
        pytest.fail(f"--baseline={baseline!r} is not a directory")
    assert_no_violations(check_baseline(gate_run, baseline, contracts))
