"""A finding's dossier offers its export command beside its replay command (and neither where nothing
reproduces it)."""

from __future__ import annotations

from harness.core.records import Measure
from harness.judge import findings as F
from harness.judge.verdicts import Violation

M = Measure(kind="repeat", case_id="c1", subject="s", device="cpu", context="default", tensor="ys[0]",
            identical=False, verdict="broken", rule="reproducible: bit-identical run to run in one process")


def test_the_dossier_prints_the_export_command_after_the_replay_command():
    f = F.group([M], None, F.Origin("/run", env=(("OMP_NUM_THREADS", "1"),)))[0]
    lines = f.dossier().splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("Reproduce: "))
    assert lines[i + 1] == f"Export: {f.export()}"
    assert f.export().startswith("env OMP_NUM_THREADS=1 ") and f.to_dict()["export"] == f.export()


def test_a_violation_that_nothing_reproduces_offers_no_export_command():
    v = Violation(M, case_file="/run/cases/c1.json", no_replay="a subject from outside --subject-plugin")
    assert "Export: " not in v.dossier() and "No command reproduces it" in v.dossier()
    assert "Export: " in Violation(M, case_file="/run/cases/c1.json").dossier()
