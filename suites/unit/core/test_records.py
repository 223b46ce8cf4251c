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


#: A tensor of a ``tasks.jsonl`` line as campaigns before one comparison record wrote it.
_OLD_TENSOR = {"bitwise_identical": False, "digest": "xxh3_128:377111cf0a7ee1a2e5227fbd9ae9ed12", "dtype": "float32",
               "first_diff_index": [1, 0], "frac_diff": 0.1, "inf_count": 0, "max_ulp": 3, "max_ulp_index": [2, 1],
               "n_diff": 2, "n_total": 20, "n_unique": 2, "nan_count": 1, "repeats": 3, "shape": [5, 4],
               "shape_mismatch": False, "sketch": {"bits": ["3f800000"]}, "worst_values": ["1.0", "1.0000004"]}


def test_an_old_task_records_tensors_read_into_the_one_comparison_record_and_write_back_the_same() -> None:
    from harness.core.records import TaskRecord, TensorComparison
    from harness.judge.comparator import compare_repeats

    line = {"key": "c|s|cpu|default", "case_id": "c", "subject": "s", "device": "cpu", "context": "default",
            "status": "ok", "tensors": {"grad.W": _OLD_TENSOR}}
    rec = TaskRecord.from_dict(json.loads(json.dumps(line)))
    t = rec.tensors["grad.W"]
    assert type(t) is TensorComparison and type(compare_repeats("y", [1.0, 1.0])) is TensorComparison
    assert (t.name, t.digest, t.max_ulp_index, t.worst_values) == ("grad.W", _OLD_TENSOR["digest"], (2, 1),
                                                                   ("1.0", "1.0000004"))
    assert rec.to_dict()["tensors"]["grad.W"] == _OLD_TENSOR
    assert json.dumps(t.to_dict(), sort_keys=True) == json.dumps(_OLD_TENSOR, sort_keys=True)


def test_a_comparison_keeps_repetition_zeros_digest_when_stored_and_refuses_a_malformed_one() -> None:
    import numpy as np

    from harness.core.records import TensorComparison
    from harness.judge.comparator import compare_repeats

    a = np.arange(6, dtype=np.float32)
    b = a.copy()
    b[4] = 9
    c = compare_repeats("y", [a, b, a])
    back = TensorComparison.from_dict(c.to_dict(), name="y")
    assert c.digests[0] != c.digests[1] and back.digests == c.digests[:1] and back.digest == c.digest
    assert (back.n_unique, back.max_ulp_index, back.first_diff_index) == (2, (4,), (4,))
    with pytest.raises(RecordError, match="tensor 'y'.*sketch"):
        TensorComparison.from_dict({**c.to_dict(), "sketch": 3}, "tensor 'y'")
