"""harness/execute/shrink_findings.py: what a finding's shrink must keep reproducing, and that findings nothing
can shrink come back as they went, with no worker started."""

from __future__ import annotations

from harness.core.devices import Device
from harness.execute.shrink_findings import shrink_findings, target_of
from harness.judge import findings as F
from harness.judge.contracts import load_contracts
from harness.judge.finding_groups import group
from suites.unit.judge.test_findings import _m


def _one(**kw) -> F.Finding:
    return group([_m(**kw)], None, F.Origin("/run"))[0]


def test_the_target_keeps_the_kind_subject_and_what_the_finding_compared_with() -> None:
    ctx = _one(kind="context", other="blas1", context="blas2")
    t = target_of(ctx)
    assert (t.kind, t.subject, t.context, t.other) == (ctx.kind, "s.a", "blas2", "blas1")
    dev = _one(kind="device", other="gpu:0", device="cpu")
    td = target_of(dev)
    assert td.others == (Device("gpu", 0),) and td.other == "gpu:0"
    rep = target_of(_one())
    assert rep.other == "" and rep.others == ()


def test_unshrinkable_findings_come_back_unchanged_without_a_run() -> None:
    found = [f for f in (_one(kind="baseline", other="baseline"), _one(kind="process")) if not f.kind.shrinkable]
    assert found, "the hand-made findings must include an unshrinkable kind"
    assert shrink_findings(found, load_contracts(), budget=0.0) == found
    assert shrink_findings([], load_contracts()) == []
