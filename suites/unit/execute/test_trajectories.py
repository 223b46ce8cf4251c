"""A campaign's trajectories: a trajectory finding takes its cause from the node its trajectory localized (the
report does not localize it again), and a pair whose side did not run says why instead of comparing nothing."""

from __future__ import annotations

from harness.core.records import Measure, TaskRecord
from harness.execute.trajectories import _why_not, with_trajectory_causes
from harness.judge.finding_groups import group
from harness.judge.findings import Origin


def _trajectory(node: str) -> Measure:
    return Measure(kind="trajectory", case_id="c1", subject="model.x", device="cpu", context="blas1", other="default",
                   tensor="", identical=False, verdict="diverged as allowed", actual=node, detail="the line",
                   rule="identical_across: the trajectory bit-identical to context default at every step")


def test_a_trajectory_finding_is_caused_by_the_node_its_trajectory_localized(tmp_path):
    [found] = group([_trajectory("backward of LinearFunction #111")], None, Origin(str(tmp_path)))
    assert found.kind == "trajectory divergence" and found.cause == ""
    [caused] = with_trajectory_causes([found])
    assert caused.cause.startswith("backward of LinearFunction #111: at the trajectory's first differing step")
    assert "contexts default and blas1 on cpu" in caused.cause
    # no node localized: the report's own localization is left to name one
    [plain] = group([_trajectory("")], None, Origin(str(tmp_path)))
    assert with_trajectory_causes([plain])[0].cause == ""


def test_a_side_of_the_pair_that_did_not_run_says_why():
    assert _why_not(None, "blas1") == "context blas1 did not run this case"
    skipped = TaskRecord(key="c1|model.x|cpu|blas1", case_id="c1", subject="model.x", device="cpu", context="blas1",
                         family="model",
                         status="skipped", skip_reason="no GPU")
    assert _why_not(skipped, "blas1") == "context blas1 skipped: no GPU"
