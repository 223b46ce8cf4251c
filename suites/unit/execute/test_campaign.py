"""A report's records round-trip: the task records the campaign writes, and the measures the measure pass writes,
read back equal after the finished report packs them, sketches and per-repetition digests included."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from harness.core.cases import Case
from harness.core.record_files import RECORD_FILES, compress_jsonl, record_file
from harness.core.records import (
    Measure,
    TaskRecord,
    TensorComparison,
    jsonl_line,
    read_measures,
    read_runs,
    read_tasks,
    repair_jsonl,
)
from harness.execute.campaign import Campaign, CampaignOptions
from harness.execute.plan import Task
from harness.execute.task_runs import TaskOutcome
from harness.judge.sketch import tensor_sketch

CASE = Case("embed", 0, {"vocab": 5, "width": 3, "ids_shape": [4]})


def _stats(name: str, a: np.ndarray, digest: str, repeats: int) -> TensorComparison:
    return TensorComparison(name=name, dtype=str(a.dtype), shape=a.shape, repeats=repeats, bitwise_identical=False,
                            n_diff=1,
                       n_total=a.size, frac_diff=1 / a.size, max_ulp=3, max_ulp_index=(0, 1), first_diff_index=(0, 1),
                       n_unique=2, digests=(digest,), nan_count=0, inf_count=0, shape_mismatch=False,
                       worst_values=("1.0 (0x3f800000)", "1.0000004 (0x3f800003)"), sketch=tensor_sketch(a))


def _outcome(task: Task, rng: np.random.Generator) -> TaskOutcome:
    y = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((5, 3)).astype(np.float32)
    rep_digests = {"y": ("xxh3_128:" + "a" * 32,) * 3 + ("xxh3_128:" + "b" * 32,),
                   "grad.W": ("xxh3_128:" + "c" * 32, None, "xxh3_128:" + "c" * 32, "xxh3_128:" + "c" * 32)}
    rec = TaskRecord(key=task.key, case_id=task.case.id, family="embed", subject=task.subject, device=task.device,
                     context=task.context, status="ok", runs=4, ok_runs=4, statuses={"ok": 4},
                     errors=({"type": "X", "message": "m"},), declared_warnings=("w",), subject_seconds=0.25,
                     processes=("fresh:0", "pool"), rep_processes=("pool", "pool", "pool", "fresh:0"),
                     tensors={"y": _stats("y", y, rep_digests["y"][0], 4),
                              "grad.W": _stats("grad.W", w, rep_digests["grad.W"][0], 4)},
                     rep_digests=rep_digests)
    def entry(name: str, i: int) -> dict:
        a = {"y": y, "grad.W": w}[name]
        return {"digest": rep_digests[name][i], "dtype": "float32", "shape": list(a.shape), "nan": 0, "inf": 0}

    runs = [{"key": task.key, "rep": i, "status": "ok", "wall": 0.01 * i,
             "tensors": {n: entry(n, i) for n in ("grad.W", "y") if rep_digests[n][i] is not None}}
            for i in range(4)]
    return TaskOutcome(rec, runs, {"y": y, "grad.W": w}, {"subject": 0.25})


def _measure(task: Task, i: int) -> Measure:
    return Measure(kind="oracle", case_id=task.case.id, subject=task.subject, device=task.device,
                   context=task.context, tensor="y", other="oracle.embed", dtype="float32", shape=(4, 3),
                   identical=False, n_diff=i, n_total=12, max_ulp=i + 1, max_ulp_index=(1, 2), max_abs=1e-7 * i,
                   max_abs_index=(1, 2), max_rel=2e-7, error_ratio=0.01, allowed="up to 1e-4", within=True,
                   actual="1.0", expected="1.0", verdict="within tolerance", rule="r", contract="c")


@pytest.fixture
def written(tmp_path):
    """A campaign directory whose tasks were written by the campaign's writer (a task run twice: its later line
    wins), and its measures as the measure pass writes them; returns (directory, records, measures)."""
    d = str(tmp_path / "run")
    campaign = Campaign(d, CampaignOptions())
    rng = np.random.default_rng(0)
    records: dict[str, TaskRecord] = {}
    runs: list[dict] = []
    with open(os.path.join(d, "runs.jsonl"), "a") as runs_f, open(os.path.join(d, "tasks.jsonl"), "a") as tasks_f:
        for context in ("default", "blas1", "default"):
            task = Task(CASE, "chainer.embed_id", "cpu", context)
            outcome = _outcome(task, rng)
            records[task.key] = campaign.write_outcome(task, outcome, runs_f, tasks_f)
            runs += outcome.runs
    measures = [_measure(Task(CASE, "chainer.embed_id", "cpu", "default"), i) for i in range(3)]
    with open(os.path.join(d, "measures.jsonl"), "w") as f:
        f.write("".join(jsonl_line(m) for m in measures))
    return d, records, measures, runs


def test_a_finished_reports_packed_records_read_back_as_written(written) -> None:
    d, records, measures, runs = written
    for name in RECORD_FILES:
        assert compress_jsonl(os.path.join(d, name)) == os.path.join(d, name + ".xz")
    back = read_tasks(os.path.join(d, "tasks.jsonl"))
    assert back == records
    assert back[next(iter(back))].tensors["y"].sketch == records[next(iter(records))].tensors["y"].sketch
    assert read_measures(os.path.join(d, "measures.jsonl")) == measures
    assert read_runs(os.path.join(d, "runs.jsonl")) == runs


def test_a_resumed_report_appends_to_its_unpacked_records_and_reads_them_back(written) -> None:
    d, records, _, _ = written
    path = os.path.join(d, "tasks.jsonl")
    compress_jsonl(path)
    repair_jsonl(path)  # what a resume does first: the packed file comes back plain
    assert record_file(path) == path and not os.path.exists(path + ".xz")
    assert read_tasks(path) == records


def test_a_report_packed_with_gzip_before_xz_reads_the_same(written) -> None:
    d, records, measures, runs = written
    for name in RECORD_FILES:
        path = os.path.join(d, name)
        with open(path, "rb") as f:
            data = f.read()
        with open(path + ".gz", "wb") as f:
            f.write(gzip.compress(data))
        os.remove(path)
    assert read_tasks(os.path.join(d, "tasks.jsonl")) == records
    assert read_measures(os.path.join(d, "measures.jsonl")) == measures
    assert read_runs(os.path.join(d, "runs.jsonl")) == runs
