"""Run lines as ``runs.jsonl`` holds them: an entry that repeats an earlier run's of the same task is named, not
written again, and reads back whole; appended batches, torn lines and older files read as they should."""

from __future__ import annotations

import json

import pytest

from harness.core.errors import RecordError
from harness.core.records import read_runs, repair_jsonl, run_lines


def _runs(key: str, digests: list[str]) -> list[dict]:
    return [{"key": key, "rep": i, "status": "ok", "wall": 0.5 + i,
             "tensors": {"y": {"digest": d, "dtype": "float32", "shape": [2], "nan": 0, "inf": 0},
                         "gy": {"digest": "g", "dtype": "float32", "shape": [2], "nan": 1, "inf": 0}}}
            for i, d in enumerate(digests)]


def test_run_lines_name_the_entries_that_repeat_and_read_back_whole(tmp_path) -> None:
    a, b = _runs("a", ["d0", "d0", "d1", "d1"]), _runs("b", ["d0", "d0"])
    text = run_lines(a) + run_lines(b)
    lines = [json.loads(ln) for ln in text.splitlines()]
    assert lines[1]["same_tensors"] == ["gy", "y"] and lines[1]["tensors"] == {}
    assert lines[2]["same_tensors"] == ["gy"] and list(lines[2]["tensors"]) == ["y"]  # the run that disagrees
    assert "same_tensors" not in lines[4]  # each task's first line holds its entries in full
    (tmp_path / "runs.jsonl").write_text(text)
    assert read_runs(str(tmp_path / "runs.jsonl")) == a + b


def test_run_lines_without_named_entries_read_as_they_are(tmp_path) -> None:
    runs = _runs("a", ["d0", "d0"]) + [{"key": "a", "rep": 2, "status": "crashed", "tensors": {}}]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))  # as older campaigns wrote
    assert read_runs(str(tmp_path / "runs.jsonl")) == runs


def test_a_resumed_campaigns_runs_read_back_after_a_torn_batch_was_dropped(tmp_path) -> None:
    path = tmp_path / "runs.jsonl"
    done, torn = _runs("a", ["d0", "d0"]), _runs("b", ["x", "x", "x"])
    text = run_lines(torn)
    path.write_text(run_lines(done) + text[:len(text) - 20])  # killed while writing b's last line
    repair_jsonl(str(path), keep=lambda line: line.get("key") == "a")  # b did not finish: its runs go
    again = _runs("b", ["y", "y", "y"])
    with open(path, "a") as f:
        f.write(run_lines(again))
    assert read_runs(str(path)) == done + again


def test_a_run_line_naming_an_entry_no_earlier_line_holds_is_refused(tmp_path) -> None:
    lines = run_lines(_runs("a", ["d0", "d0"])).splitlines(keepends=True)
    (tmp_path / "runs.jsonl").write_text(lines[1])
    with pytest.raises(RecordError, match=r"runs.jsonl:1: tensor 'gy' is named as before"):
        read_runs(str(tmp_path / "runs.jsonl"))


def test_a_task_records_infrastructure_notes_round_trip_and_older_records_read_without_them() -> None:
    from harness.core.records import TaskRecord

    rec = TaskRecord("k", "c", "embed", "s", "cpu", "default", "ok", notes=("run 1 timed out beside others",))
    assert TaskRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    older = {k: v for k, v in rec.to_dict().items() if k != "notes"}
    assert TaskRecord.from_dict(older).notes == ()
