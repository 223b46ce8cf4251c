"""A report's records round-trip: the task records the campaign writes, and the measures the measure pass writes,
read back equal after the finished report packs them, sketches and per-repetition digests included."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.corpus_files import write_corpus
from harness.core.devices import CPU, Device
from harness.core.errors import InvalidArgument
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
from harness.execute.campaign import Campaign, CampaignOptions, load_arrays, load_tasks
from harness.execute.plan import Task, plan, shard, task_key
from harness.execute.task_runs import TaskOutcome
from harness.judge.sketch import tensor_sketch
from harness.subjects.registry import SUBJECTS, get_subject
from suites.plugins.registered import registered

TINY_CASE = Case("embed", 0, {"vocab": 5, "width": 3, "ids_shape": [4]})


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
            task = Task(TINY_CASE, "chainer.embed_id", "cpu", context)
            outcome = _outcome(task, rng)
            records[task.key] = campaign.write_outcome(task, outcome, runs_f, tasks_f)
            runs += outcome.runs
    measures = [_measure(Task(TINY_CASE, "chainer.embed_id", "cpu", "default"), i) for i in range(3)]
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


# The campaign runner (harness/runner.py, harness/worker.py): isolation, resume, processes, contexts.
#
# The misbehaving subjects come from ``suites/plugins/misbehaving.py``; the workers import it as
# ``suites.plugins.misbehaving`` (they get the project root on PYTHONPATH) and this process
# registers them too (removed again when the module's tests end).

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PLUGIN = "suites.plugins.misbehaving:SUBJECTS"
CASE = Case("embed", 5, {"vocab": 6, "width": 3, "ids_shape": [10]})
TIMEOUT = 180


misbehaving_registered = registered(PLUGIN, "misbehaving_registered")


def read_jsonl(path: Path) -> list[dict]:
    """Every line of a campaign's JSONL file (a finished report keeps it as ``NAME.gz``)."""
    from harness.core.records import read_records

    return [obj for _, obj in read_records(str(path))]


def subjects(*names: str):
    return [get_subject(n) for n in names]


# ---- a campaign with a segfault, a hang and NaNs ------------------------------------------------------
CRASH_SUBJECTS = ("misbehaving.segfault", "misbehaving.hang", "misbehaving.nan", "control.deterministic",
                  "misbehaving.env_probe")


@pytest.fixture(scope="module")
def crash_campaign(tmp_path_factory, misbehaving_registered):
    """repeats=1, fresh=1, timeout=0.5 s of CPU: every task runs once in the pool worker and once in a fresh one
    (the limit counts from the request, after the worker is ready; the other subjects' runs take milliseconds of
    CPU; the hang sleeps, so the wall limit, 3 x the CPU limit, ends it, and its second try alone: 4.5 s waited
    out in all)."""
    d = tmp_path_factory.mktemp("crash")
    tasks = plan([CASE], subjects(*CRASH_SUBJECTS), [CPU], [get_context("default")])
    tasks += plan([CASE], subjects("misbehaving.env_probe"), [CPU], [get_context("hashseed")])
    # One lane: these tests follow one pooled worker from task to task (suites/unit/execute/test_lanes.py runs several).
    settings = CampaignOptions(repeats=1, fresh=1, timeout=0.5, plugins=(PLUGIN,), quiet=True, jobs=1)
    old = os.environ.pop("PYTHONHASHSEED", None)  # the default context must not inherit one
    try:
        campaign = Campaign(str(d), settings)
        t0 = time.perf_counter()
        records = campaign.run(tasks)
        wall = time.perf_counter() - t0
    finally:
        if old is not None:
            os.environ["PYTHONHASHSEED"] = old
    # The typed records as their JSON form (what tasks.jsonl holds), so the tests read the file's fields.
    return {"dir": d, "tasks": tasks, "records": {k: r.to_dict() for k, r in records.items()}, "campaign": campaign,
            "wall": wall,
            "runs": read_runs(str(d / "runs.jsonl"))}


def key(subject: str, context: str = "default") -> str:
    return task_key(CASE.id, subject, "cpu", context)


def runs_of(c, subject: str, context: str = "default") -> list[dict]:
    return [r for r in c["runs"] if r["key"] == key(subject, context)]


def test_every_task_has_its_row(crash_campaign):
    recs = crash_campaign["records"]
    assert set(recs) == {t.key for t in crash_campaign["tasks"]}
    on_disk = load_tasks(str(crash_campaign["dir"]))
    assert set(on_disk) == set(recs)


def test_segfault_is_a_crashed_row(crash_campaign):
    rec = crash_campaign["records"][key("misbehaving.segfault")]
    assert rec["statuses"] == {"crashed": 2} and rec["status"] == "error" and rec["ok_runs"] == 0
    assert rec["errors"][0]["type"] == "WorkerCrash" and "SIGSEGV" in rec["errors"][0]["message"]
    runs = runs_of(crash_campaign, "misbehaving.segfault")
    assert [r["status"] for r in runs] == ["crashed", "crashed"]
    assert [r["process"] for r in runs] == ["pool", "fresh:0"]


def test_hang_is_a_timeout_row_after_a_second_try_alone(crash_campaign):
    rec = crash_campaign["records"][key("misbehaving.hang")]
    assert rec["statuses"] == {"timeout": 2} and rec["status"] == "error"
    assert rec["errors"][0]["type"] == "Timeout" and "0.5 s of CPU time" in rec["errors"][0]["message"]
    runs = runs_of(crash_campaign, "misbehaving.hang")
    # the pooled run timed out, then again alone in its slot with twice the limit; the hang ends the task's runs
    assert [r["process"] for r in runs] == ["pool", "pool"] and runs[1].get("alone") is True
    assert [r["cpu"]["limit"] for r in runs] == [0.5, 1.0]
    for r in runs:
        # asleep to the wall limit (3 x the CPU limit), not starved: a lower bound only (a busy machine may
        # make it late), and the CPU it got well under its limit
        assert r["status"] == "timeout" and r["cpu"]["expired"] == "wall" and not r["cpu"]["starved"], r["cpu"]
        assert r["wall"] >= 3 * r["cpu"]["limit"] * 0.8 and r["cpu"]["cpu"] < r["cpu"]["limit"], r


def test_nan_is_an_ok_row_with_nan_counts(crash_campaign):
    rec = crash_campaign["records"][key("misbehaving.nan")]
    assert rec["status"] == "ok" and rec["statuses"] == {"ok": 2}
    assert rec["tensors"]["grad.W"]["nan_count"] == 6 * 3
    assert rec["tensors"]["y"]["nan_count"] == 10 * 3
    assert rec["tensors"]["grad.W"]["bitwise_identical"] is True  # NaN bits repeat
    for r in runs_of(crash_campaign, "misbehaving.nan"):
        assert r["tensors"]["grad.W"]["nan"] == 18 and r["tensors"]["grad.W"]["inf"] == 0
    arrays = load_arrays(str(crash_campaign["dir"]), rec["array_file"])
    assert np.isnan(arrays["grad.W"]).all()


def test_rest_of_the_campaign_completes_after_crashes(crash_campaign):
    rec = crash_campaign["records"][key("control.deterministic")]
    assert rec["status"] == "ok" and rec["statuses"] == {"ok": 2}
    assert all(t["bitwise_identical"] and t["nan_count"] == 0 for t in rec["tensors"].values())
    assert crash_campaign["campaign"].stats["restarts"] >= 4  # 2 crashes + 2 timeouts each cost a worker


def test_a_dead_worker_is_replaced_by_a_fresh_one(crash_campaign):
    pool_pids = [(r["key"].split("|")[1], r["pid"]) for r in crash_campaign["runs"]
                 if r["process"] == "pool" and r["key"].endswith("|default")]
    pids = dict(pool_pids)
    # Each death or timeout costs the pool worker: the next task runs in a new process.
    assert pids["misbehaving.segfault"] != pids["misbehaving.hang"] != pids["misbehaving.nan"]
    # Workers that survive are reused.
    assert pids["misbehaving.nan"] == pids["control.deterministic"] == pids["misbehaving.env_probe"]
    assert all(isinstance(p, int) and p != os.getpid() for _, p in pool_pids)


def test_fresh_repetitions_run_in_other_processes(crash_campaign):
    runs = runs_of(crash_campaign, "misbehaving.env_probe")
    by = {r["process"]: r for r in runs}
    assert set(by) == {"pool", "fresh:0"}
    assert by["pool"]["pid"] != by["fresh:0"]["pid"]
    rec = crash_campaign["records"][key("misbehaving.env_probe")]
    assert rec["rep_processes"] == ["pool", "fresh:0"]
    # The subject's own view agrees with the runner's bookkeeping.
    pid_digests = rec["rep_digests"]["pid"]
    assert pid_digests[0] != pid_digests[1]
    assert rec["tensors"]["y"]["bitwise_identical"] and not rec["tensors"]["pid"]["bitwise_identical"]


def test_env_contexts_reach_the_worker(crash_campaign):
    d = str(crash_campaign["dir"])
    hashed = crash_campaign["records"][key("misbehaving.env_probe", "hashseed")]
    plain = crash_campaign["records"][key("misbehaving.env_probe", "default")]
    assert hashed["status"] == plain["status"] == "ok"
    assert load_arrays(d, hashed["array_file"])["y"].tolist() == [12345, 12345]
    assert load_arrays(d, plain["array_file"])["y"].tolist() == [0, 0]  # negative control
    assert hashed["rep_digests"]["y"][0] == hashed["rep_digests"]["y"][1]  # fresh workers get it too
    assert get_context("hashseed").needs_fresh_process and not get_context("default").needs_fresh_process


# ---- resume -------------------------------------------------------------------------------------
RESUME_SUBJECTS = ("misbehaving.slow", "control.deterministic")


def _comparable(records: dict) -> dict[str, dict]:
    return {k: {f: v for f, v in r.to_dict().items() if f != "subject_seconds"} for k, r in records.items()}


@pytest.fixture(scope="module")
def resume_corpus(tmp_path_factory) -> tuple[Path, list[Case]]:
    d = tmp_path_factory.mktemp("corpus")
    cases = [Case("embed", s, {"vocab": 6, "width": 3, "ids_shape": [10], "id_kind": "collision",
                               "distinct": 3}) for s in range(4)]
    path = d / "C.jsonl"
    write_corpus(cases, str(path))
    return path, cases


@pytest.mark.slow  # two campaigns and two report processes; test_resume_after_a_torn_last_line stays in make test
def test_interrupted_report_resumes_to_the_same_records(tmp_path, resume_corpus):
    corpus_path, cases = resume_corpus
    settings = CampaignOptions(repeats=2, fresh=1, timeout=60, plugins=(PLUGIN,), quiet=True)
    tasks = plan(cases, subjects(*RESUME_SUBJECTS), [CPU], [get_context("default")])
    assert len(tasks) == 8
    a_dir = tmp_path / "A"
    complete = Campaign(str(a_dir), settings).run(tasks)
    assert len(complete) == 8 and all(r.status == "ok" for r in complete.values())

    b_dir = tmp_path / "B"
    cmd = [sys.executable, "-m", "harness", "report", "--corpus", str(corpus_path), "--subjects",
           ",".join(RESUME_SUBJECTS), "--devices", "cpu", "--contexts", "default", "--repeats", "2",
           "--fresh", "1", "--out", str(b_dir), "--quiet", "--no-localize",
           "--subject-plugin", PLUGIN]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    tasks_file = b_dir / "tasks.jsonl"
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if tasks_file.exists() and len(tasks_file.read_text().splitlines()) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the report ended before it could be interrupted: {proc.stderr.read()}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the report and its workers: one session we started
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    before = load_tasks(str(b_dir))
    assert 2 <= len(before) < 8, len(before)
    runs_before = len(read_jsonl(b_dir / "runs.jsonl"))

    p = subprocess.run([sys.executable, "-m", "harness", "report", "--resume", str(b_dir), "--quiet",
                        "--no-localize"], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    lines = read_jsonl(tasks_file)
    counts = Counter(r["key"] for r in lines)
    assert set(counts) == set(complete) and max(counts.values()) == 1, counts  # no task ran twice
    assert _comparable(load_tasks(str(b_dir))) == _comparable(complete)
    # Nothing finished before the interruption ran again after it.
    later = read_jsonl(b_dir / "runs.jsonl")[runs_before:]
    assert later and not {r["key"] for r in later} & set(before)
    # A second resume has nothing left to do.
    p2 = subprocess.run([sys.executable, "-m", "harness", "report", "--resume", str(b_dir), "--quiet",
                         "--no-localize"], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    assert p2.returncode == 0, p2.stderr
    assert len(read_jsonl(tasks_file)) == 8


def test_pool_repetitions_share_a_process_and_fresh_ones_do_not(tmp_path, resume_corpus):
    _, cases = resume_corpus
    tasks = plan(cases[:2], subjects("control.deterministic"), [CPU], [get_context("default")])
    Campaign(str(tmp_path), CampaignOptions(repeats=3, fresh=2, quiet=True)).run(tasks)
    runs = read_jsonl(tmp_path / "runs.jsonl")
    assert len(runs) == 2 * 5
    pool = {r["pid"] for r in runs if r["process"] == "pool"}
    fresh = {r["process"]: r["pid"] for r in runs if r["process"].startswith("fresh:")}
    assert len(pool) == 1 and set(fresh) == {"fresh:0", "fresh:1"}
    assert len({*pool, *fresh.values()}) == 3
    assert [r["rep"] for r in runs[:5]] == [0, 1, 2, 3, 4]
    assert [r["process"] for r in runs[:5]] == ["pool", "pool", "pool", "fresh:0", "fresh:1"]


def test_resume_after_a_torn_last_line(tmp_path, resume_corpus):
    _, cases = resume_corpus
    settings = CampaignOptions(repeats=1, fresh=0, quiet=True)
    tasks = plan(cases[:3], subjects("control.deterministic"), [CPU], [get_context("default")])
    Campaign(str(tmp_path), settings).run(tasks[:2])
    with open(tmp_path / "tasks.jsonl", "a") as f:
        f.write('{"key": "' + tasks[2].key[:10])  # the write the interruption cut short
    done = Campaign(str(tmp_path), settings).run(tasks)
    assert set(done) == {t.key for t in tasks}
    assert set(load_tasks(str(tmp_path))) == {t.key for t in tasks}, "the record after the torn line was lost"


def test_resume_reruns_the_tasks_whose_arrays_were_pruned_or_cut_down(tmp_path, resume_corpus):
    # A finished report prunes repetition 0's arrays to its findings' worst tensors; measured again without
    # them, a resumed report's verdicts would be "not judged": those tasks run again, the others do not.
    from harness.core.fileio import atomic_npz

    _, cases = resume_corpus
    settings = CampaignOptions(repeats=2, fresh=0, quiet=True)
    tasks = plan(cases[:3], subjects("control.deterministic"), [CPU], [get_context("default")])
    first = Campaign(str(tmp_path), settings).run(tasks)
    gone, cut, kept = (first[t.key] for t in tasks)
    assert all(r.array_file and len(r.rep_digests) >= 2 for r in (gone, cut, kept))
    os.remove(tmp_path / "arrays" / gone.array_file)
    whole = load_arrays(str(tmp_path), cut.array_file)
    atomic_npz(str(tmp_path / "arrays" / cut.array_file), dict(list(whole.items())[:1]))
    runs_before = Counter(line["key"] for line in read_jsonl(tmp_path / "runs.jsonl"))
    done = Campaign(str(tmp_path), settings).repair()
    assert set(done) == {kept.key}
    assert {json.loads(line)["key"] for line in (tmp_path / "tasks.jsonl").read_text().splitlines()} == {kept.key}
    again = Campaign(str(tmp_path), settings).run(tasks)
    assert set(again) == {t.key for t in tasks}
    assert load_arrays(str(tmp_path), cut.array_file).keys() == whole.keys()
    assert (tmp_path / "arrays" / gone.array_file).exists()
    runs_after = Counter(line["key"] for line in read_jsonl(tmp_path / "runs.jsonl"))
    assert runs_after == runs_before == {t.key: 2 for t in tasks}  # the two ran again; their old lines are gone


# ---- planning -----------------------------------------------------------------------------------------
def test_shard_partitions_a_corpus():
    cases = [Case("embed", s, {"vocab": 4, "width": 2, "ids_shape": [3]}) for s in range(40)]
    ids = [c.id for c in cases]
    for n in (1, 2, 3, 5):
        parts = [shard(cases, i, n) for i in range(1, n + 1)]
        got = [c.id for p in parts for c in p]
        assert sorted(got) == sorted(ids) and len(got) == len(set(got)), n
        if n > 1:
            assert sum(1 for p in parts if p) >= 2  # not everything in one shard
        assert shard(list(reversed(cases)), 1, n) == list(reversed(shard(cases, 1, n)))  # by id, not position


def test_plan_gives_gpu_tasks_that_end_as_skipped_rows(tmp_path):
    gpu = Device("gpu", 0)
    if gpu.available:
        pytest.skip("a GPU is present: the GPU tasks would run")
    cases = [CASE, Case("lstm", 1, {"n_layers": 1, "in_size": 2, "hidden": 3, "lengths": [2, 1]})]
    subs = subjects("chainer.embed_id", "oracle.embed", "control.deterministic", "chainer.NStepLSTM")
    ctxs = [get_context("default"), get_context("cudnn_deterministic"), get_context("omp1")]
    tasks = plan(cases, subs, [CPU, gpu], ctxs)
    keys = {t.key for t in tasks}
    gpu_tasks = [t for t in tasks if t.device == "gpu:0"]
    # Every non-oracle subject gets its GPU task in each context that applies to GPUs.
    for s in ("chainer.embed_id", "control.deterministic"):
        for c in ("default", "cudnn_deterministic"):
            assert task_key(CASE.id, s, "gpu:0", c) in keys
    assert task_key(cases[1].id, "chainer.NStepLSTM", "gpu:0", "default") in keys
    assert not any(t.subject == "oracle.embed" and t.device == "gpu:0" for t in tasks)
    assert not any(t.context == "cudnn_deterministic" and t.device == "cpu" for t in tasks)
    assert not any(t.context == "omp1" and t.device == "gpu:0" for t in tasks)
    assert not any(SUBJECTS[t.subject].role == "oracle" and t.context != "default" for t in tasks)
    assert not any(t.subject == "chainer.NStepLSTM" and t.case.family == "embed" for t in tasks)
    assert len(keys) == len(tasks)
    campaign = Campaign(str(tmp_path), CampaignOptions(repeats=3, fresh=1, quiet=True))
    recs = campaign.run(gpu_tasks)
    assert campaign.stats["worker_startup"] == 0 and campaign.stats["restarts"] == 0  # no worker was started
    assert set(recs) == {t.key for t in gpu_tasks}
    for r in recs.values():
        assert r.status == "skipped" and r.skip_reason.startswith("no GPU") and r.runs == 1, r
    runs = read_jsonl(tmp_path / "runs.jsonl")
    assert len(runs) == len(gpu_tasks) and all(r["status"] == "skipped" and r["pid"] is None for r in runs)


@pytest.mark.parametrize("kwargs,name", [({"repeats": 0}, "repeats"), ({"fresh": -1}, "fresh"),
                                         ({"timeout": 0}, "timeout"), ({"timeout": -3.0}, "timeout")])
def test_bad_settings_name_the_argument(kwargs, name):
    with pytest.raises(InvalidArgument) as info:
        CampaignOptions(**kwargs)
    msg = str(info.value)
    assert msg.startswith(f"{name}=") and str(list(kwargs.values())[0]) in msg, msg
    CampaignOptions(repeats=1, fresh=0, timeout=0.5)  # the limits themselves are allowed
