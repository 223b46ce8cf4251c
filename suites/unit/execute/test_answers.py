"""The worker protocol: answers are framed JSON plus a spool file, never pickles, so whatever a subject writes
into the answer pipe is a row (``crashed``, ``MalformedAnswer``), never an exception in the harness; pooled
workers are forked from a zygote, fresh ones are new interpreters."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.execute.campaign import Campaign, CampaignOptions, load_arrays
from harness.execute.plan import plan, task_key
from harness.execute.worker import Worker
from harness.subjects.registry import SUBJECTS, get_subject, load_plugin

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PLUGINS = ("suites.plugins.bad_answers:SUBJECTS", "suites.plugins.misbehaving:SUBJECTS")
CASE = Case("embed", 5, {"vocab": 6, "width": 3, "ids_shape": [10]})
BAD = ("badanswer.garbage", "badanswer.huge_frame", "badanswer.truncated", "badanswer.not_an_answer",
       "badanswer.unpicklable")


@pytest.fixture(scope="module", autouse=True)
def registered():
    subjects = [s for p in PLUGINS for s in load_plugin(p)]
    yield subjects
    for s in subjects:
        SUBJECTS.pop(s.name, None)


@pytest.fixture(scope="module")
def bad_campaign(tmp_path_factory, registered):
    """Every bad-answer subject, then a well-behaved one: R=2 in the pool + 1 fresh."""
    d = tmp_path_factory.mktemp("badanswers")
    tasks = plan([CASE], [get_subject(n) for n in (*BAD, "control.deterministic", "misbehaving.env_probe")],
                 [CPU], [get_context("default")])
    campaign = Campaign(str(d), CampaignOptions(repeats=2, fresh=1, timeout=30, plugins=PLUGINS, quiet=True))
    records = campaign.run(tasks)
    runs = [json.loads(line) for line in (d / "runs.jsonl").read_text().splitlines()]
    return {"dir": d, "records": records, "runs": runs, "tasks": tasks}


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
@pytest.mark.parametrize("subject", BAD)
def test_a_malformed_answer_is_a_crashed_row(bad_campaign, subject):
    rec = bad_campaign["records"][task_key(CASE.id, subject, "cpu", "default")]
    assert rec.statuses == {"crashed": 3}, rec.statuses
    assert rec.status == "error" and rec.ok_runs == 0
    assert rec.errors[0]["type"] == "MalformedAnswer", rec.errors
    assert rec.errors[0]["phase"] == "transfer"
    runs = [r for r in bad_campaign["runs"] if r["key"] == rec.key]
    assert [r["process"] for r in runs] == ["pool", "pool", "fresh:0"]


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_the_campaign_goes_on_after_malformed_answers(bad_campaign):
    rec = bad_campaign["records"][task_key(CASE.id, "control.deterministic", "cpu", "default")]
    assert rec.status == "ok" and rec.statuses == {"ok": 3}
    assert rec.tensors and all(t.bitwise_identical for t in rec.tensors.values())
    arrays = load_arrays(str(bad_campaign["dir"]), rec.array_file)
    assert arrays and all(isinstance(a, np.ndarray) and a.size for a in arrays.values())
    # the digests the worker took are the digests of the arrays that came over
    from harness.judge.digest import digest

    assert {k: digest(a) for k, a in arrays.items()} == {k: v[0] for k, v in rec.rep_digests.items()}


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_pool_and_fresh_processes_differ_and_the_pool_is_reused(bad_campaign):
    runs = [r for r in bad_campaign["runs"]
            if r["key"] == task_key(CASE.id, "misbehaving.env_probe", "cpu", "default")]
    pids = {r["process"]: set() for r in runs}
    for r in runs:
        pids[r["process"]].add(r["pid"])
    assert len(pids["pool"]) == 1 and len(pids["fresh:0"]) == 1  # two pool runs in one process
    assert pids["pool"] != pids["fresh:0"]
    assert os.getpid() not in pids["pool"] | pids["fresh:0"]


def _garbage_run(fork: bool):
    w = Worker(plugins=PLUGINS, fork=fork).start()
    try:
        bad = w.run(CASE.to_json(), "badanswer.garbage", "cpu", "default", timeout=30, case_id=CASE.id)
        alive_after = w.alive
    finally:
        w.close()
    return bad, alive_after


@pytest.mark.parametrize("fork", [False, True], ids=["spawned", "forked"])
def test_garbage_kills_only_that_worker(fork):
    bad, alive_after = _garbage_run(fork)
    assert bad.status == "crashed" and bad.error.type == "MalformedAnswer"
    assert "not a worker answer" in bad.error.message
    assert not alive_after  # its stream cannot be trusted again


def test_arrays_cross_without_pickling_and_equal_what_the_subject_made():
    w = Worker(plugins=PLUGINS, fork=True).start()
    try:
        a = w.run_answer(CASE.to_json(), "control.deterministic", "cpu", "default", timeout=60, case_id=CASE.id)
        b = w.run_answer(CASE.to_json(), "control.deterministic", "cpu", "default", timeout=60, case_id=CASE.id)
        spool = w.spool
        assert spool is not None and os.listdir(spool) == []  # each answer's file is unlinked once mapped
    finally:
        w.close()
    assert a.result.status == "ok" and a.result.arrays
    for k, arr in a.result.arrays.items():
        assert np.array_equal(arr, b.result.arrays[k])
        assert a.tensors[k]["digest"] == b.tensors[k]["digest"]
        arr.reshape(-1)[:1] = 0  # mapped copy-on-write: writable like any array the campaign holds
    assert not os.path.exists(spool)  # the spool folder goes with its worker


def test_a_replacement_pooled_worker_is_forked_and_a_fresh_one_is_spawned():
    """The pool's worker comes from the zygote (a fork); a fresh worker is a new interpreter: its own hash seed
    (PYTHONHASHSEED unset, so each interpreter draws one) and not a child of the zygote."""
    pooled = [Worker(plugins=PLUGINS, fork=True).start() for _ in range(2)]
    fresh = Worker(plugins=PLUGINS, fork=False).start()
    try:
        for w in (*pooled, fresh):
            w.wait_ready()
        assert [w.forked for w in pooled] == [True, True] and fresh.forked is False
        ppids = {w.pid: _ppid(w.pid) for w in (*pooled, fresh)}
        assert ppids[pooled[0].pid] == ppids[pooled[1].pid] != os.getpid()  # both children of the zygote
        assert ppids[fresh.pid] == os.getpid()  # spawned by us
    finally:
        for w in (*pooled, fresh):
            w.close()


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


BASE = dict(subject="s", case_id="c", device="cpu", context="default")


def _frame(meta: object, blob: bytes = b"") -> bytearray:
    import struct

    head = json.dumps(meta).encode()
    return bytearray(struct.pack("<I", len(head)) + head + blob)


GOOD_RESULT = {"status": "ok", "timings": {"forward": 0.1}, "declared_warnings": [], "error": None,
               "skip_reason": None}
MALFORMED = [
    bytearray(b""), bytearray(b"\x00\x00"), bytearray(b"\xff\xff\xff\x7f{}"), bytearray(b"\x05\x00\x00\x00[1,2"),
    _frame([1, 2, 3]), _frame({"result": "ok", "arrays": []}), _frame({"result": {}, "arrays": {}}),
    _frame({"result": {**GOOD_RESULT, "status": "crashed"}, "arrays": []}),
    _frame({"result": {**GOOD_RESULT, "timings": {"forward": "slow"}}, "arrays": []}),
    _frame({"result": {**GOOD_RESULT, "timings": {"forward": float("nan")}}, "arrays": []}),
    _frame({"result": {**GOOD_RESULT, "error": {"type": 1}}, "arrays": []}),
    _frame({"result": {**GOOD_RESULT, "declared_warnings": [None]}, "arrays": []}),
    _frame({"result": GOOD_RESULT, "arrays": [], "transfer_error": "OSError: no space"}),
    *(_frame({"result": GOOD_RESULT, "inline": True, "arrays": [entry]}, b"\x00" * 64) for entry in (
        {"name": "y", "dtype": ["f4"], "shape": [4], "offset": 0, "nbytes": 16, "digest": "d", "nan": 0, "inf": 0},
        {"name": "y", "dtype": "O", "shape": [4], "offset": 0, "nbytes": 32, "digest": "d"},
        {"name": "y", "dtype": "<f4", "shape": [4], "offset": 60, "nbytes": 16, "digest": "d", "nan": 0, "inf": 0},
        {"name": "y", "dtype": "<f4", "shape": [5], "offset": 0, "nbytes": 16, "digest": "d", "nan": 0, "inf": 0},
        {"name": "y", "dtype": "<f4", "shape": [-4], "offset": 0, "nbytes": 16, "digest": "d", "nan": 0, "inf": 0},
        {"name": "y", "dtype": "<f4", "shape": [4], "offset": 0, "nbytes": 16, "digest": None, "nan": 0, "inf": 0},
        {"name": "y", "dtype": "<f4", "shape": [4], "offset": 0, "nbytes": 16, "digest": "d", "nan": 9, "inf": 0},
        {"name": 7, "dtype": "<f4", "shape": [4], "offset": 0, "nbytes": 16, "digest": "d", "nan": 0, "inf": 0},
        "not an entry")),
    _frame({"result": GOOD_RESULT, "inline": False, "arrays": [
        {"name": "y", "dtype": "<f4", "shape": [4], "offset": 0, "nbytes": 16, "digest": "d", "nan": 0, "inf": 0}]}),
]


@pytest.mark.parametrize("payload", MALFORMED, ids=[f"m{i}" for i in range(len(MALFORMED))])
def test_every_malformed_answer_is_refused_as_malformed(payload, tmp_path):
    from harness.execute.answers import Malformed, decode_answer

    with pytest.raises(Malformed):
        decode_answer(payload, BASE, str(tmp_path / "absent.bin"))


def test_a_well_formed_answer_decodes_so_the_refusals_above_can_fail(tmp_path):
    from harness.execute.answers import decode_answer

    y = np.arange(4, dtype=np.float32)
    a = decode_answer(_frame({"result": GOOD_RESULT, "inline": True, "arrays": [
        {"name": "y", "dtype": y.dtype.str, "shape": [4], "offset": 0, "nbytes": 16, "digest": "d", "nan": 0,
         "inf": 0}]}, y.tobytes()), BASE, str(tmp_path / "absent.bin"))
    assert a.result.status == "ok" and np.array_equal(a.result.arrays["y"], y)
    assert a.tensors["y"] == {"dtype": "float32", "shape": [4], "digest": "d", "nan": 0, "inf": 0}


def test_zygotes_are_shared_per_environment_and_bounded(monkeypatch):
    from harness.execute import zygote as W

    env = W.worker_env({})
    a = W.zygote_for(env)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "something else")  # volatile: the same zygote
    assert W.zygote_for(W.worker_env({})) is a
    try:
        for k in range(W._MAX_ZYGOTES):
            W.zygote_for(W.worker_env({"HARNESS_TEST_ZYGOTE": str(k)}), wait=False)
        assert len(W._ZYGOTES) == W._MAX_ZYGOTES and a not in W._ZYGOTES.values()  # the oldest went first
        assert not a.alive  # and its process with it
    finally:
        W.close_zygotes()  # the others are started again where a later test needs one


# --------------------------------------------------------------------------- a task's pooled runs, asked at once

SECOND_RUN = "suites.plugins.second_run:SUBJECTS"


@pytest.fixture()
def second_run_registered():
    subjects = load_plugin(SECOND_RUN)
    yield subjects
    for s in subjects:
        SUBJECTS.pop(s.name, None)


def test_a_stream_answers_each_run_in_order_like_single_runs():
    w = Worker(plugins=PLUGINS, fork=True).start()
    try:
        streamed = list(w.run_answers(CASE.to_json(), "control.deterministic", "cpu", "default", timeout=60,
                                      count=3, case_id=CASE.id))
        single = w.run_answer(CASE.to_json(), "control.deterministic", "cpu", "default", timeout=60,
                              case_id=CASE.id)
        assert w.alive and os.listdir(w.spool) == []  # every answer's spool file unlinked
    finally:
        w.close()
    assert [a.result.status for a in streamed] == ["ok", "ok", "ok"]
    assert single.result.status == "ok" and single.tensors
    for a in streamed:  # the answer after the stream is its own (the pipe stayed in step)
        assert a.tensors == single.tensors
        assert all(np.array_equal(v, single.result.arrays[k]) for k, v in a.result.arrays.items())


def test_a_skip_ends_the_stream_and_the_worker_stays_in_step():
    w = Worker(plugins=PLUGINS, fork=True).start()
    try:
        skipped = list(w.run_answers(CASE.to_json(), "control.deterministic", "cpu", "cudnn_deterministic",
                                     timeout=60, count=3, case_id=CASE.id))
        after = w.run_answer(CASE.to_json(), "control.deterministic", "cpu", "default", timeout=60, case_id=CASE.id)
        alive = w.alive
    finally:
        w.close()
    assert [a.result.status for a in skipped] == ["skipped"]  # the worker ran no more of them either
    assert "applies only to gpu" in skipped[0].result.skip_reason
    assert after.result.status == "ok" and after.result.context == "default" and alive


def test_a_stream_left_early_ends_its_worker():
    """Answers still on their way would be read as the next request's: a stream the caller leaves before its
    last answer takes its worker with it."""
    w = Worker(plugins=PLUGINS, fork=True).start()
    try:
        stream = w.run_answers(CASE.to_json(), "control.deterministic", "cpu", "default", timeout=60, count=3,
                               case_id=CASE.id)
        first = next(stream)
        alive_before = w.alive
        stream.close()
        assert first.result.status == "ok" and alive_before
        assert not w.alive
    finally:
        w.close()


def test_a_crash_ends_the_stream_and_the_rest_run_in_a_new_pooled_worker(tmp_path, second_run_registered):
    w = Worker(plugins=(SECOND_RUN,), fork=True).start()
    try:
        answers = list(w.run_answers(CASE.to_json(), "secondrun.dies", "cpu", "default", timeout=60, count=3,
                                     case_id=CASE.id))
        assert not w.alive
    finally:
        w.close()
    assert [a.result.status for a in answers] == ["ok", "crashed"]  # nothing after the death is waited for
    # Through a campaign: R=5 in the pool, each death ends a stream and the rest go to the next pooled worker.
    tasks = plan([CASE], [get_subject("secondrun.dies")], [CPU], [get_context("default")])
    Campaign(str(tmp_path), CampaignOptions(repeats=5, fresh=0, timeout=60, plugins=(SECOND_RUN,),
                                             quiet=True)).run(tasks)
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [r["rep"] for r in runs] == [0, 1, 2, 3, 4]
    assert [r["status"] for r in runs] == ["ok", "crashed", "ok", "crashed", "ok"]
    assert [r["process"] for r in runs] == ["pool"] * 5
    pids = [r["pid"] for r in runs]
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4] and pids[0] != pids[4]
    y = load_arrays(str(tmp_path), json.loads((tmp_path / "tasks.jsonl").read_text())["array_file"])["y"]
    assert y.tolist() == [pids[0]]  # repetition 0 ran in the first worker, as its line says


@pytest.mark.parametrize("fork", [False, True], ids=["spawned", "forked"])
def test_a_worker_asked_to_stop_leaves_without_the_interpreters_finalization(fork, tmp_path):
    """A worker's every answer is written before it is asked to stop; tearing down its interpreter (Chainer's
    and NumPy's modules, 60-110 ms for a spawned one) would only make the campaign wait at the end of each
    group of tasks. It exits 0 and runs no exit handler of what it imported (here a plug-in's)."""
    marker = tmp_path / "finalized"
    w = Worker(env={"HARNESS_TEST_FINALIZED": str(marker)}, plugins=("suites.plugins.leaves:SUBJECTS",),
               fork=fork).start()
    try:
        a = w.run_answer(CASE.to_json(), "leaves.pid", "cpu", "default", timeout=60, case_id=CASE.id)
        pid = w.pid
    finally:
        w.close()
    assert a.result.status == "ok" and int(a.result.arrays["pid"][0]) == pid  # the plug-in ran in that worker
    if not fork:
        assert w.proc.returncode == 0
    assert not marker.exists()


def test_a_big_answer_comes_through_its_spool_file_and_the_file_goes():
    """Arrays over the frame's limit travel in a spool file, mapped here and then unlinked; a small answer's
    arrays come in the frame itself, with no file to unlink."""
    big = Case("embed", 5, {"vocab": 4096, "width": 96, "ids_shape": [10]})  # W and its gradient: 1.5 MiB each
    w = Worker(plugins=PLUGINS, fork=True).start()
    try:
        answers = [w.run_answer(c.to_json(), "control.deterministic", "cpu", "default", timeout=60, case_id=c.id)
                   for c in (big, big, CASE)]
        left = os.listdir(w.spool)
    finally:
        w.close()
    assert [a.result.status for a in answers] == ["ok"] * 3
    assert [a.spooled for a in answers] == [True, True, False]
    assert sum(arr.nbytes for arr in answers[0].result.arrays.values()) > (1 << 20)
    for k, arr in answers[0].result.arrays.items():
        assert np.array_equal(arr, answers[1].result.arrays[k])
    assert left == []


def test_a_run_with_the_bits_of_the_last_one_comes_without_its_arrays():
    """A request's runs whose outputs have the digests of its last ok answer send none (no spool file): the
    answer holds that answer's arrays, the same as the single run's after it."""
    big = Case("embed", 5, {"vocab": 4096, "width": 96, "ids_shape": [10]})  # W and its gradient: 1.5 MiB each
    w = Worker(plugins=PLUGINS, fork=True).start()
    try:
        streamed = list(w.run_answers(big.to_json(), "control.deterministic", "cpu", "default", timeout=60,
                                      count=3, case_id=big.id))
        single = w.run_answer(big.to_json(), "control.deterministic", "cpu", "default", timeout=60, case_id=big.id)
    finally:
        w.close()
    assert [a.result.status for a in streamed] == ["ok"] * 3
    assert [a.spooled for a in streamed] == [True, False, False] and single.spooled
    for a in streamed[1:]:
        assert a.tensors == single.tensors and a.result.timings
        assert all(np.array_equal(v, single.result.arrays[k]) for k, v in a.result.arrays.items())
        assert a.result.arrays.keys() == single.result.arrays.keys()


def _repeat_frame(tmp_path, previous):
    from harness.execute.answers import decode_answer

    return decode_answer(_frame({"result": GOOD_RESULT, "inline": True, "arrays": [], "repeat": True}), BASE,
                         str(tmp_path / "absent.bin"), previous=previous)


def test_a_repeat_answer_needs_an_earlier_ok_answer_and_takes_its_arrays(tmp_path):
    from harness.execute.answers import Answer, Malformed
    from harness.subjects.base import ErrorInfo, RunResult

    with pytest.raises(Malformed):
        _repeat_frame(tmp_path, None)
    with pytest.raises(Malformed):
        _repeat_frame(tmp_path, Answer(RunResult(**BASE, status="error", error=ErrorInfo("E", "m", "run")), {}))
    y = np.arange(4, dtype=np.float32)
    meta = {"y": {"dtype": "float32", "shape": [4], "digest": "d", "nan": 0, "inf": 0}}
    got = _repeat_frame(tmp_path, Answer(RunResult(**BASE, status="ok", arrays={"y": y}), meta))
    assert got.result.status == "ok" and got.result.arrays["y"] is y and got.tensors == meta
    assert got.result.timings == {"forward": 0.1}  # this run's own
    too_large = Answer(RunResult(**BASE, status="error", error=ErrorInfo("OutputTooLarge", "m", "transfer")), {},
                       sent_ok=True)
    again = _repeat_frame(tmp_path, too_large)  # refused here as the run it repeats was
    assert again.result.status == "error" and again.result.error.type == "OutputTooLarge" and not again.result.arrays


def test_the_worker_sends_a_repeat_only_for_the_same_bits(tmp_path):
    from harness.execute.answers import encode_answer
    from harness.subjects.base import RunResult

    y = np.arange(4, dtype=np.float32)
    first, meta = encode_answer(RunResult(**BASE, status="ok", arrays={"y": y}), str(tmp_path / "1.bin"))
    same, meta2 = encode_answer(RunResult(**BASE, status="ok", arrays={"y": y.copy()}), str(tmp_path / "2.bin"), meta)
    other, _ = encode_answer(RunResult(**BASE, status="ok", arrays={"y": y + 1}), str(tmp_path / "3.bin"), meta)
    renamed, _ = encode_answer(RunResult(**BASE, status="ok", arrays={"z": y}), str(tmp_path / "4.bin"), meta)

    def head(pieces):
        return json.loads(bytes(pieces[1]))

    assert "repeat" not in head(first) and meta is not None and meta2 is meta
    assert head(same)["repeat"] is True and head(same)["arrays"] == []
    for frame in (other, renamed):
        assert "repeat" not in head(frame) and len(head(frame)["arrays"]) == 1
