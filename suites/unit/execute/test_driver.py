"""harness/execute/driver.py: one campaign driver writes its inputs, its records and its measures, and a campaign
directory read back offline gives the same records and measures."""

from __future__ import annotations

import json

import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.execute.driver import load_run, run_campaign
from harness.execute.settings import CampaignOptions
from harness.subjects.registry import subjects_for

CASE = Case("embed", 3, {"vocab": 5, "width": 3, "ids_shape": [4]})


def test_a_campaign_writes_inputs_records_and_measures_and_reads_back_the_same(tmp_path) -> None:
    d = str(tmp_path / "run")
    run = run_campaign(d, [CASE], subjects_for(["control.deterministic"]), [CPU], [get_context("default")],
                       CampaignOptions(repeats=2, fresh=0, quiet=True, jobs=1), meta={"note": "unit"})
    assert [t.subject for t in run.tasks] == ["control.deterministic"]
    assert {r.status for r in run.records.values()} == {"ok"} and run.measures
    meta = json.loads((tmp_path / "run" / "campaign.json").read_text())
    assert meta["subjects"] == ["control.deterministic"] and meta["note"] == "unit"
    back = load_run(d)
    assert set(back.records) == set(run.records) and back.cases.keys() == {CASE.id}
    assert sorted(m.to_dict()["verdict"] for m in back.measures) == sorted(m.to_dict()["verdict"] for m in run.measures)


def test_what_the_work_beside_the_runs_raises_is_raised_after_they_are_written(tmp_path) -> None:
    def boom() -> None:
        raise RuntimeError("beside")

    d = tmp_path / "run"
    with pytest.raises(RuntimeError, match="beside"):
        run_campaign(str(d), [CASE], subjects_for(["control.deterministic"]), [CPU], [get_context("default")],
                     CampaignOptions(repeats=1, fresh=0, quiet=True, jobs=1), while_starting=boom)
    assert load_run(str(d)).records  # the runs were written before the error was raised
