"""harness/outputs/fleet.py: without a cluster one local target runs the campaign in this thread; the every spread
names each worker's outputs apart; a spread without a cluster is refused."""

from __future__ import annotations

import pytest

from harness.core.errors import InvalidArgument
from harness.outputs.fleet import ClusterOptions, Target, cluster_targets, out_for, run_on_cluster


def test_without_a_cluster_one_local_target_runs_here() -> None:
    with cluster_targets(ClusterOptions()) as targets:
        assert len(targets) == 1 and targets[0].executor is None and targets[0].suffix == ""
    assert run_on_cluster(ClusterOptions(), lambda t: (t.label, t.executor)) == [(None, None)]


@pytest.mark.parametrize("spread, needle", [("every", "needs --cluster"), ("round", "is not 'shard' or 'every'")])
def test_a_spread_without_a_cluster_or_unknown_is_refused(spread: str, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=needle):
        with cluster_targets(ClusterOptions(spread=spread)):
            pass


def test_each_workers_output_gets_its_suffix() -> None:
    w1 = Target(suffix="-worker1")
    assert out_for("reports/A.json", w1) == "reports/A-worker1.json"
    assert out_for("reports/run", w1) == "reports/run-worker1"
    assert out_for("reports/A.json", Target()) == "reports/A.json"
