"""Lanes (harness/execute/lanes.py): a campaign's tasks run in several lanes at once, each with its own
workers, and nothing a task's record says depends on how many lanes there were."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.core.errors import InvalidArgument
from harness.core.lifeline import pid_alive as _pid_alive
from harness.execute.campaign import Campaign, CampaignOptions, default_jobs
from harness.execute.lanes import LocalPool, _Lanes
from harness.execute.plan import plan
from harness.subjects.registry import get_subject
from suites.plugins.registered import registered

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PLUGIN = "suites.plugins.misbehaving:SUBJECTS"
CASES = [Case("embed", seed, {"vocab": 7, "width": 4, "ids_shape": [3, 5]}) for seed in range(4)]
DETERMINISTIC = ("control.deterministic", "chainer.embed_id", "chainer.EmbedID", "espnet.embed_id")


misbehaving_registered = registered(PLUGIN, "misbehaving_registered")
PAIRING = "suites.plugins.blocking:SUBJECTS"
pairing_registered = registered(PAIRING, "pairing_registered")


def tasks_of(*names: str):
    return plan(CASES, [get_subject(n) for n in names], [CPU], [get_context("default")])


def run(tmp: Path, jobs: int, names: tuple[str, ...]) -> tuple[list, dict, list[dict]]:
    from harness.core.records import read_records

    settings = CampaignOptions(repeats=2, fresh=1, timeout=60, plugins=(PLUGIN,), quiet=True, jobs=jobs)
    tasks = tasks_of(*names)
    records = Campaign(str(tmp), settings).run(tasks)
    runs = [obj for _, obj in read_records(str(tmp / "runs.jsonl"))]
    return tasks, records, runs


@pytest.fixture(scope="module")
def one_and_two(tmp_path_factory):
    return {jobs: run(tmp_path_factory.mktemp(f"jobs{jobs}"), jobs, DETERMINISTIC) for jobs in (1, 2)}


def test_two_lanes_give_the_records_of_one_in_the_plans_order(one_and_two):
    tasks, rec1, runs1 = one_and_two[1]
    _, rec2, runs2 = one_and_two[2]
    assert len(tasks) == len(CASES) * len(DETERMINISTIC) == len(rec2)
    assert list(rec2) == list(rec1) == [t.key for t in tasks]  # tasks.jsonl in the plan's order either way
    assert [r["key"] for r in runs2] == [r["key"] for r in runs1]
    for k in rec1:
        assert rec2[k].status == rec1[k].status == "ok", k
        assert rec2[k].rep_digests == rec1[k].rep_digests, k  # the same bits, repetition by repetition


def test_each_lane_has_its_own_pooled_worker_and_the_lanes_share_the_fresh_ones(one_and_two):
    _, _, runs2 = one_and_two[2]
    pool = {}
    for r in runs2:
        if r["process"] == "pool":
            pool.setdefault(r["key"], set()).add(r["pid"])
    assert all(len(p) == 1 for p in pool.values()), pool  # a task's R runs share one pooled worker
    pids = {p for ps in pool.values() for p in ps}
    assert len(pids) == 2, pids  # two lanes, two pooled workers (none died)
    fresh = {r["pid"] for r in runs2 if r["process"].startswith("fresh:")}
    assert len(fresh) == 1 and not fresh & pids  # K = 1 fresh interpreter for both lanes, not K per lane
    by_task: dict[str, list[int]] = {}
    for r in runs2:
        if r["process"].startswith("fresh:"):
            by_task.setdefault(r["key"], []).append(r["pid"])
    assert len(by_task) == len(runs2) // 3 and all(len(p) == 1 for p in by_task.values())  # every task, once
    _, _, runs1 = one_and_two[1]
    assert len({r["pid"] for r in runs1 if r["process"] == "pool"}) == 1


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_a_crash_in_one_lane_leaves_the_other_lanes_tasks_whole(tmp_path):
    names = ("misbehaving.segfault", "control.deterministic", "misbehaving.nan")
    tasks, records, _ = run(tmp_path, 2, names)
    assert list(records) == [t.key for t in tasks]
    for t in tasks:
        rec = records[t.key]
        if t.subject == "misbehaving.segfault":
            assert rec.status == "error" and rec.statuses == {"crashed": 3}, rec
        else:
            assert rec.status == "ok" and rec.statuses == {"ok": 3}, rec


def test_a_caller_that_stops_early_leaves_no_worker_running():
    settings = CampaignOptions(repeats=1, fresh=1, timeout=60, plugins=(PLUGIN,), quiet=True, jobs=2)
    tasks = tasks_of(*DETERMINISTIC)
    stream = LocalPool().run(tasks, settings)
    task, outcome = next(stream)
    assert task == tasks[0] and outcome.record.status == "ok"
    pids = {r["pid"] for r in outcome.runs}
    assert len(pids) == 2 and all(_pid_alive(p) for p in pids)
    stream.close()
    deadline = time.monotonic() + 30  # a bound on waiting, not an assertion on time: the check is below
    while any(_pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_pid_alive(p) for p in pids)


def test_workers_launched_ahead_are_the_ones_the_run_takes_and_none_is_left_running():
    settings = CampaignOptions(repeats=1, fresh=1, timeout=60, plugins=(PLUGIN,), quiet=True, jobs=2)
    tasks = tasks_of(*DETERMINISTIC)
    pool = LocalPool()
    pool.launch(tasks, settings)
    (launched,) = pool._ahead.values()
    assert len(launched) == 2 and launched[1].fresh is launched[0].fresh  # both lanes, one shared fresh worker
    fresh_pid = launched[0].fresh[0].proc.pid
    assert fresh_pid is not None and _pid_alive(fresh_pid)  # started already, before run()
    outcomes = list(pool.run(tasks, settings))
    assert [t for t, _ in outcomes] == list(tasks) and all(o.record.status == "ok" for _, o in outcomes)
    assert {r["pid"] for _, o in outcomes for r in o.runs if r["process"] == "fresh:0"} == {fresh_pid}
    assert pool.stats["restarts"] == 0 and not pool._ahead
    # launched, then never run: closed when the run ends at once
    other = LocalPool()
    other.launch(tasks, settings)
    pid = next(iter(other._ahead.values()))[0].fresh[0].proc.pid
    assert list(other.run([], settings)) == [] and not other._ahead
    deadline = time.monotonic() + 30  # a bound on waiting, not an assertion on time: the check is below
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _pid_alive(pid)


def test_work_beside_the_first_runs_that_raises_loses_no_record_and_leaves_no_worker_running(tmp_path):
    from harness.core.records import read_records
    from harness.execute.driver import run_campaign

    settings = CampaignOptions(repeats=1, fresh=1, timeout=60, plugins=(PLUGIN,), quiet=True, jobs=2)
    pool = LocalPool()
    threads = []

    def interrupted() -> None:
        import threading

        threads.append(threading.current_thread().name)  # beside the runs, not before them
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_campaign(str(tmp_path), CASES, [get_subject("control.deterministic")], [CPU], [get_context("default")],
                     settings, executor=pool, while_starting=interrupted)
    assert threads == ["harness-while-starting"] and not pool._ahead
    # the runs went on and were written; the error is raised once they are
    records = [obj for _, obj in read_records(str(tmp_path / "tasks.jsonl"))]
    assert [r["case_id"] for r in records] == [c.id for c in CASES] and all(r["status"] == "ok" for r in records)
    pids = {obj["pid"] for _, obj in read_records(str(tmp_path / "runs.jsonl"))}
    assert len(pids) >= 2 and None not in pids  # a pooled worker and the fresh one at least
    deadline = time.monotonic() + 30  # a bound on waiting, not an assertion on time: the check is below
    while any(_pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_pid_alive(p) for p in pids)


def test_only_the_first_lane_takes_gpu_tasks():
    tasks = tasks_of("control.deterministic")
    settings = CampaignOptions(repeats=1, fresh=0, quiet=True, jobs=2)
    lanes = _Lanes(tasks, [], False, settings, window=64)
    lanes.gpu = [True, False, True, False]  # as if tasks 0 and 2 were on a usable GPU
    with lanes.cond:
        assert lanes._take(1) == 1 and lanes._take(1) == 3 and lanes._take(1) is None
        assert lanes._take(0) == 0 and lanes._take(0) == 2 and lanes._take(0) is None


def test_a_lane_runs_ahead_of_a_long_task_until_the_waiting_outcomes_fill_the_window():
    import numpy as np

    from harness.execute.task_runs import TaskOutcome

    cases = [Case("embed", seed, {"vocab": 7, "width": 4, "ids_shape": [3, 5]}) for seed in range(100)]
    tasks = plan(cases, [get_subject("control.deterministic")], [CPU], [get_context("default")])
    lanes = _Lanes(tasks, [], False, CampaignOptions(repeats=1, fresh=0, quiet=True, jobs=2), window=1024,
                   window_bytes=3000)
    with lanes.cond:
        assert lanes._take(0) == 0  # the long task: it holds the order
        taken = []
        while lanes.waiting_bytes < 3000:  # the other lane's short tasks finish, each outcome holding 1000 bytes
            j = lanes._take(1)
            assert j is not None
            taken.append(j)
            lanes.done[j] = TaskOutcome(None, [], {"y": np.zeros(250, np.float32)}, {})  # type: ignore[arg-type]
            lanes.waiting_bytes += 1000
    assert taken == [1, 2, 3]
    blocked: list[int | None] = []
    t = threading.Thread(target=lambda: blocked.append(_take_locked(lanes, 1)))
    t.start()
    t.join(0.2)
    assert t.is_alive() and not blocked  # three outcomes of 1000 bytes wait: the window is full
    with lanes.cond:
        lanes.done[0] = TaskOutcome(None, [], {}, {})  # type: ignore[arg-type]
        lanes.head, lanes.waiting_bytes = 4, 0  # the long task ended and the caller took the four outcomes
        lanes.cond.notify_all()
    t.join(10)
    assert blocked == [4]


def _take_locked(lanes: _Lanes, lane: int) -> int | None:
    with lanes.cond:
        return lanes._take(lane)


def test_jobs_is_checked_and_zero_means_harness_jobs_or_one_per_cpu(monkeypatch):
    with pytest.raises(InvalidArgument, match=r"jobs=-1 must be >= 0"):
        CampaignOptions(jobs=-1)
    with pytest.raises(InvalidArgument, match=r"jobs=257 must be <= 256"):
        CampaignOptions(jobs=257)
    assert CampaignOptions(jobs=3).lanes() == 3
    monkeypatch.delenv("HARNESS_JOBS", raising=False)
    assert CampaignOptions().lanes() == default_jobs() == max(1, min(len(os.sched_getaffinity(0)), 4))
    monkeypatch.setenv("HARNESS_JOBS", "3")
    assert CampaignOptions().lanes() == 3 and CampaignOptions(jobs=2).lanes() == 2
    for bad, message in (("two", "HARNESS_JOBS='two' must be an integer >= 1"), ("0", "HARNESS_JOBS=0 must be >= 1"),
                         ("999", "HARNESS_JOBS=999 must be <= 256")):
        monkeypatch.setenv("HARNESS_JOBS", bad)
        with pytest.raises(InvalidArgument, match=message):
            CampaignOptions().lanes()


def test_an_xdist_worker_gives_its_campaigns_one_lane():
    from harness.pytest_plugin import one_lane_per_xdist_worker

    env = {"PYTEST_XDIST_WORKER": "gw1"}
    assert one_lane_per_xdist_worker(env) == "1" and env["HARNESS_JOBS"] == "1"
    env = {"PYTEST_XDIST_WORKER": "gw0", "HARNESS_JOBS": "2"}
    assert one_lane_per_xdist_worker(env) is None and env["HARNESS_JOBS"] == "2"  # the user's choice stands
    env = {}
    assert one_lane_per_xdist_worker(env) is None and env == {}


def test_a_lane_starts_on_its_pooled_worker_and_waits_for_a_fresh_one_only_when_a_run_takes_it():
    from harness.execute.task_runs import run_task
    from harness.execute.worker_sets import WorkerSet

    settings = CampaignOptions(repeats=2, fresh=1, timeout=60, plugins=(PLUGIN,), quiet=True, jobs=1)
    ws = WorkerSet(get_context("default"), settings)
    try:
        ws.start()
        # the pooled worker answered; the fresh interpreter was launched and is not waited for yet
        assert ws.pool.pid is not None and len(ws.fresh) == 1
        assert ws.fresh[0].proc is not None and ws.fresh[0].pid is None
        pool_only = ws.startup_seconds
        outcome = run_task(tasks_of("control.deterministic")[0], ws, settings)
        assert outcome.record.status == "ok" and outcome.record.statuses == {"ok": 3}
        fresh = [r for r in outcome.runs if r["process"] == "fresh:0"]
        assert len(fresh) == 1 and fresh[0]["pid"] == ws.fresh[0].pid is not None
        assert fresh[0]["pid"] != ws.pool.pid
        # its start-up is counted once, by the run that waited for it
        assert ws.startup_seconds == pool_only + ws.fresh[0].startup_seconds
        run_task(tasks_of("control.deterministic")[1], ws, settings)
        assert ws.startup_seconds == pool_only + ws.fresh[0].startup_seconds and ws.restarts == 0
    finally:
        ws.close()


def test_start_early_starts_the_first_groups_zygote_only_where_a_device_runs_here(monkeypatch):
    from harness.core.devices import parse_device
    from harness.execute import zygote
    from harness.execute.worker_sets import start_early

    started = []
    monkeypatch.setattr(zygote, "zygote_for", lambda env, wait=True: started.append(dict(env)))
    gpu = parse_device("gpu")
    monkeypatch.setattr(type(gpu), "availability", lambda self: (self.kind == "cpu", "no GPU here"))
    blas1, default = get_context("blas1"), get_context("default")
    start_early([blas1, default], [gpu])  # a GPU-only plan without a GPU: its rows are skips, no worker
    assert started == []
    start_early([blas1, default], [gpu, CPU])
    assert started == [zygote.worker_env(blas1.env)]  # the plan is context-major: blas1's group runs first


def test_the_runs_own_error_is_raised_when_the_work_beside_them_fails_too_and_no_launched_worker_is_left(tmp_path):
    from harness.execute.driver import run_campaign

    class Stopped(Exception):
        pass

    class Broken:  # launches as the local pool does, then its runs fail before they begin
        def __init__(self) -> None:
            self.pool = LocalPool()
            self.stats = self.pool.stats
            self.launched: list[int] = []

        def launch(self, tasks, settings):
            self.pool.launch(tasks, settings)
            self.launched = [ws.fresh[0].proc.pid for sets in self.pool._ahead.values() for ws in sets[:1]]

        def discard(self):
            self.pool.discard()

        def run(self, tasks, settings):
            raise Stopped("the runs failed")

    def beside() -> None:
        raise ValueError("the work beside the runs failed")

    settings = CampaignOptions(repeats=1, fresh=1, timeout=60, quiet=True, jobs=1)
    executor = Broken()
    with pytest.raises(Stopped, match="the runs failed"):
        run_campaign(str(tmp_path), CASES[:1], [get_subject("control.deterministic")], [CPU],
                     [get_context("default")], settings, executor=executor, while_starting=beside)
    assert len(executor.launched) == 1 and not executor.pool._ahead
    deadline = time.monotonic() + 30  # a bound on waiting, not an assertion on time: the check is below
    while _pid_alive(executor.launched[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _pid_alive(executor.launched[0])


def test_beside_other_programs_load_the_lowered_lanes_run_at_full_priority_and_the_campaign_counts_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Other programs' load as a meter the test sets: every lane but the first raises its worker before a task,
    the records are those of an idle machine, and the pool's stats (timings.json, the gate's note) count it.
    The tasks' runs wait for each other in pairs, so that the second lane takes a task however loaded the
    machine is (else the first lane could run them all before the second's worker started)."""
    from suites.plugins.blocking import PAIRS_ENV

    class Meter:
        def __init__(self, busy: bool) -> None:
            self.now = busy

        def busy(self) -> bool:
            return self.now

    settings = CampaignOptions(repeats=1, fresh=0, timeout=120, plugins=(PAIRING,), quiet=True, jobs=2)
    tasks = tasks_of("blocking.in_pairs")
    outcomes = {}
    for busy in (True, False):
        folder = tmp_path / f"busy{busy}"
        folder.mkdir()
        monkeypatch.setenv(PAIRS_ENV, str(folder))
        pool = LocalPool()
        pool._load = Meter(busy)  # type: ignore[assignment]
        outcomes[busy] = [o.record for _, o in pool.run(tasks, settings)]
        assert len(list(folder.iterdir())) == len(tasks)  # every run left its mark: they ran, in pairs
        assert (pool.stats["lanes_raised_for_load"] >= 1) == busy
    assert len(outcomes[True]) == len(tasks) and all(r.status == "ok" for r in outcomes[True])

    def digests(records: list) -> list[dict]:
        return [{k: t.digest for k, t in r.tensors.items()} for r in records]

    assert digests(outcomes[True]) == digests(outcomes[False])
