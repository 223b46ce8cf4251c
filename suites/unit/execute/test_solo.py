"""Timeouts in real worker processes: a worker the machine starves (simulated deterministically: the subject
stops its own worker with SIGSTOP, and nothing continues it) is tried again alone and is never a finding; a
subject that spins is caught by its CPU-time limit and stays a finding after its second try. (A subject that
sleeps: suites/unit/execute/test_campaign.py.)"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.cost import TIMED_OUT_TWICE
from harness.core.devices import CPU
from harness.execute.campaign import Campaign, CampaignOptions
from harness.execute.plan import plan
from harness.subjects.registry import get_subject
from suites.plugins.registered import registered

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PLUGIN = "suites.plugins.stalls:SUBJECTS"


stalls_registered = registered(PLUGIN, "stalls_registered")


def campaign(tmp_path: Path, subject: str, case: Case, timeout: float) -> tuple[Campaign, dict]:
    tasks = plan([case], [get_subject(subject)], [CPU], [get_context("default")])
    c = Campaign(str(tmp_path), CampaignOptions(repeats=1, fresh=0, timeout=timeout, plugins=(PLUGIN,),
                                                 quiet=True, jobs=1))
    recs = c.run(tasks)
    assert len(recs) == 1
    return c, next(iter(recs.values()))


def fresh_case() -> Case:
    # a case no earlier run of this test marked (the mark file is named by the case)
    return Case("embed", uuid.uuid4().int % 10**9, {"vocab": 5, "width": 2, "ids_shape": [4]})


def runs(tmp_path: Path) -> list[dict]:
    from harness.core.records import read_runs

    return read_runs(str(tmp_path / "runs.jsonl"))


def test_a_worker_starved_once_is_run_again_alone_and_is_a_note_not_a_finding(tmp_path: Path) -> None:
    from suites.plugins.stalls import mark_of

    case = fresh_case()
    try:
        c, rec = campaign(tmp_path, "stalls.stopped_once", case, timeout=0.25)
        assert os.path.exists(mark_of(case))  # the first run did stop its worker
    finally:
        if os.path.exists(mark_of(case)):
            os.remove(mark_of(case))
    assert rec.status == "ok" and rec.statuses == {"ok": 1}
    [line] = runs(tmp_path)
    assert line["status"] == "ok" and line["retried"]["status"] == "timeout"
    first = line["retried"]["cpu"]
    assert first["expired"] == "wall" and first["starved"] is True and first["cpu"] < first["limit"], first
    assert len(c.notes) == 1 and "not a finding" in c.notes[0] and c.stats["timeouts_not_reproduced"] == 1
    from harness.execute.campaign import load_tasks

    # the note stays with the task: a resumed run and the report's page read it from tasks.jsonl
    assert rec.notes == tuple(c.notes) and [r.notes for r in load_tasks(str(tmp_path)).values()] == [rec.notes]


def test_a_worker_starved_twice_is_not_judged_with_its_reason(tmp_path: Path) -> None:
    _, rec = campaign(tmp_path, "stalls.stopped_always", fresh_case(), timeout=0.25)
    assert rec.status == "skipped" and rec.skip_reason.startswith(TIMED_OUT_TWICE), rec.skip_reason
    assert "CPU share 0%" in rec.skip_reason and "timeout" not in rec.statuses


@pytest.mark.slow  # a spinning worker takes a core for 3 x its limit: CI runs it, `make test` leaves it out
def test_a_spinning_subject_is_never_green_and_is_the_finding_whenever_it_got_its_cpu(tmp_path: Path) -> None:
    _, rec = campaign(tmp_path, "stalls.spins", fresh_case(), timeout=2)
    lines = runs(tmp_path)
    second = lines[-1]
    assert second["cpu"]["limit"] == 4.0 and (second.get("alone") or second.get("retried"))  # tried alone, 2x
    if second["cpu"]["expired"] == "cpu":  # it got the CPU it asked for: spinning, the timeout finding
        assert rec.status == "error" and rec.statuses == {"timeout": 2}
        assert [line["cpu"]["expired"] for line in lines] == ["cpu", "cpu"] and second["cpu"]["cpu"] >= 4.0
    else:  # a machine too busy to give it a third of a core, alone too: not judged, and it says why
        assert rec.status == "skipped" and rec.skip_reason.startswith(TIMED_OUT_TWICE), rec.skip_reason
        assert second["cpu"]["starved"] is True
