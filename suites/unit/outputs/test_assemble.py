"""harness/outputs/assemble.py: a campaign's measures become its findings, most severe first, each case a finding
names written once as ``cases/<id>.json``."""

from __future__ import annotations

import json

from harness.core.cases import Case
from harness.core.records import Measure, TaskRecord
from harness.judge import findings as F
from harness.outputs.assemble import campaign_findings, case_sizes, records_by_task, roles_of

CASE = Case("embed", 9, {"vocab": 5, "width": 3, "ids_shape": [4]})
KEY = dict(case_id=CASE.id, subject="chainer.embed_id", device="cpu", context="default")
REC = TaskRecord(key="k", family="embed", status="ok", runs=2, ok_runs=2, **KEY)


def test_roles_come_from_the_registry_and_an_unknown_name_is_a_subject() -> None:
    assert roles_of(["oracle.embed", "control.deterministic", "chainer.embed_id", "not.registered"]) == {
        "oracle.embed": "oracle", "control.deterministic": "control", "chainer.embed_id": "subject",
        "not.registered": "subject"}


def test_records_are_found_by_task_and_sizes_by_case() -> None:
    assert records_by_task({"k": REC}) == records_by_task([REC]) == {tuple(KEY.values()): REC}
    assert case_sizes({CASE.id: CASE}) == {CASE.id: CASE.size()}


def test_a_broken_measure_is_a_finding_whose_case_file_is_written(tmp_path) -> None:
    broken = Measure(kind="repeat", tensor="y", identical=False, verdict="broken", max_ulp=3, n_diff=1, n_total=12,
                     rule="reproducible: bit-identical run to run in one process", **KEY)
    held = Measure(kind="repeat", tensor="gW", identical=True, verdict="bit-identical", **KEY)
    found = campaign_findings(str(tmp_path), [broken, held], {"k": REC}, {CASE.id: CASE}, F.Origin(str(tmp_path)))
    assert len(found) == 1 and found[0].fails and found[0].case_id == CASE.id
    written = tmp_path / "cases" / f"{CASE.id}.json"
    assert json.loads(written.read_text())["seed"] == 9
