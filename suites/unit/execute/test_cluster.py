"""Campaigns and audits on a real Dask LocalCluster (2 worker processes on 127.0.0.1; no mocks).

One cluster serves the module; the every-spread audit starts its own through the verb's code path.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="dask[distributed] is not installed")

from harness.core.contexts import get_context  # noqa: E402
from harness.core.corpus_files import load_corpus, write_corpus  # noqa: E402
from harness.core.devices import CPU  # noqa: E402
from harness.core.errors import InvalidArgument  # noqa: E402
from harness.execute.campaign import Campaign, CampaignOptions  # noqa: E402
from harness.execute.cluster import ClusterError, DaskExecutor, connect, parse_cluster_spec  # noqa: E402
from harness.execute.plan import plan
from harness.outputs.audit import DEFAULT_CORPUS, compare_audits, merge_audits, run_audit  # noqa: E402
from harness.subjects.registry import get_subject, load_plugin, subjects_for  # noqa: E402
from harness.verbs.audit import AuditOptions  # noqa: E402

PLUGIN = "suites.plugins.misbehaving:SUBJECTS"
SUBJECTS = ["chainer.embed_id", "espnet.embed_id"]


@pytest.fixture(scope="module")
def client():
    with connect("local", n_workers=2) as conn:
        conn.client.wait_for_workers(2, timeout=60)
        yield conn.client


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    cases = [c for c in load_corpus(DEFAULT_CORPUS) if c.family == "embed" and not c.bad][:3]
    path = tmp_path_factory.mktemp("corpus") / "tiny.jsonl"
    write_corpus(cases, str(path))
    return path


def digests(data: dict) -> dict:
    return {(e["case_id"], e["subject"], e["device"], e["context"]): (e["status"], {n: t["digest"] for n, t in
            e["tensors"].items()}) for e in data["entries"]}


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_shard_audit_matches_local(client, corpus, tmp_path):
    def opts(name: str) -> AuditOptions:
        return AuditOptions(corpus=str(corpus), devices="cpu", out=str(tmp_path / name),
                            subjects=tuple(SUBJECTS), quiet=True)

    local = run_audit(opts("local.json"))
    shard = run_audit(opts("shard.json"), executor=DaskExecutor(client))
    assert len(local["entries"]) == 6
    assert digests(shard) == digests(local)
    assert all(e["status"] == "ok" and e["tensors"] for e in shard["entries"])
    cmp = compare_audits(tmp_path / "local.json", tmp_path / "shard.json")
    assert set(cmp.rows["verdict"]) == {"identical"}


def test_records_name_host_worker_and_attempts(client, corpus, tmp_path):
    tasks = plan(load_corpus(str(corpus)), subjects_for(SUBJECTS), [CPU], [get_context("default")])
    recs = Campaign(str(tmp_path), CampaignOptions(repeats=2, fresh=0, quiet=True)).run(
        tasks, executor=DaskExecutor(client))
    workers = set(client.scheduler_info()["workers"])
    assert {r.dask_worker for r in recs.values()} <= workers
    assert all(r.host and r.attempts == 1 and r.gpu is None for r in recs.values())


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_every_audit_two_identical_columns(corpus, tmp_path):
    from harness.outputs.fleet import ClusterOptions
    from harness.verbs.audit import AuditOptions, audit_on_cluster

    got = audit_on_cluster(AuditOptions(out=str(tmp_path / "A.json"), corpus=str(corpus), devices="cpu",
                                        subjects=",".join(SUBJECTS), quiet=True,
                                        cluster=ClusterOptions("local", "every", 2)))
    paths = [p for p, _ in got]
    assert [Path(p).name for p in paths] == ["A-worker0.json", "A-worker1.json"]
    workers = [d["cluster"]["worker"] for _, d in got]
    assert len(set(workers)) == 2
    res = merge_audits(paths)
    assert len(res.columns) == 2
    assert res.matrix["consistent"].all() and len(res.matrix) == 2
    cmp = compare_audits(*paths)
    assert set(cmp.rows["verdict"]) == {"identical"}


@pytest.fixture(autouse=True)
def _registry_restored():
    """The misbehaving plug-in is registered by some tests here: leave the registry as it was for the rest of
    the session (an audit's default subjects are every registered one)."""
    from harness.subjects.registry import SUBJECTS as REGISTRY

    before = dict(REGISTRY)
    yield
    REGISTRY.clear()
    REGISTRY.update(before)


def _slow_tasks(n: int):
    load_plugin(PLUGIN)
    cases = [c for c in load_corpus(DEFAULT_CORPUS) if c.family == "embed" and not c.bad][:n]
    return plan(cases, [get_subject("misbehaving.slow")], [CPU], [get_context("default")])


def _lines(directory: Path) -> list[dict]:
    with open(directory / "tasks.jsonl", encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def _subject_errors_only(recs: dict) -> bool:
    """Every record finished, and any error is the subject's own (raised in its forward/backward phase),
    never a worker crash, timeout or set-up failure."""
    errs = [e for r in recs.values() for e in r.errors]
    return (sum(r.status == "ok" for r in recs.values()) > len(recs) // 2
            and all(e["phase"] in ("forward", "backward") and e["type"] not in ("WorkerCrash", "WorkerError", "Timeout")
                    for e in errs))


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_worker_killed_mid_campaign_loses_no_task(client, tmp_path):
    tasks = _slow_tasks(10)
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    settings = CampaignOptions(repeats=2, fresh=0, quiet=True, plugins=(PLUGIN,))
    killed = []

    def kill_when_running() -> None:
        # Once results stream in, the victim is busy with a task (each takes >= 0.5 s): kill it then.
        deadline = time.time() + 60
        while time.time() < deadline:
            p = tmp_path / "tasks.jsonl"
            if p.exists() and p.stat().st_size > 0:
                os.kill(pids[victim], signal.SIGKILL)
                killed.append(victim)
                return
            time.sleep(0.05)

    t = threading.Thread(target=kill_when_running)
    t.start()
    recs = Campaign(str(tmp_path), settings).run(tasks, executor=DaskExecutor(client))
    t.join()
    assert killed == [victim]
    lines = _lines(tmp_path)
    assert sorted(r["key"] for r in lines) == sorted(t.key for t in tasks)  # each once, none lost
    # The subject's own answers only (one case indexes out of bounds, as on any pool): no crash, no timeout.
    assert _subject_errors_only(recs)
    retried = [r for r in lines if r["attempts"] > 1]
    assert retried, "the task running on the killed worker should be recorded as retried"
    assert all(r["dask_worker"] != victim for r in retried)
    client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker


class _Stop(Exception):
    pass


class _StopAfter(DaskExecutor):
    """Stops the campaign after ``n`` outcomes, as a lost client or cluster would."""

    def __init__(self, client, n: int) -> None:
        super().__init__(client)
        self.n = n

    def run(self, tasks, settings):
        for i, item in enumerate(super().run(tasks, settings)):
            yield item
            if i + 1 == self.n:
                raise _Stop()


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_resume_after_restarted_cluster(client, tmp_path):
    tasks = _slow_tasks(6)
    settings = CampaignOptions(repeats=1, fresh=0, quiet=True, plugins=(PLUGIN,))
    with pytest.raises(_Stop):
        Campaign(str(tmp_path), settings).run(tasks, executor=_StopAfter(client, 2))
    assert len(_lines(tmp_path)) == 2
    client.restart()  # every worker process is replaced: nothing of the first run survives there
    recs = Campaign(str(tmp_path), settings).run(tasks, executor=DaskExecutor(client))
    lines = _lines(tmp_path)
    assert sorted(r["key"] for r in lines) == sorted(t.key for t in tasks)
    assert len(recs) == len(tasks) and _subject_errors_only(recs)


def test_bad_cluster_specs_are_one_line_errors():
    with pytest.raises(InvalidArgument, match=r"cluster='localhost:8786' is not"):
        parse_cluster_spec("localhost:8786")
    assert parse_cluster_spec("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    try:
        import dask_cuda  # noqa: F401
    except ImportError:
        with pytest.raises(ClusterError, match="needs dask-cuda"):
            connect("local-cuda")
    with pytest.raises(InvalidArgument, match="cluster-workers=0"):
        connect("local", n_workers=0)


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_a_poll_shorter_than_every_task_waits_instead_of_failing(client, tmp_path):
    """``distributed.wait(timeout=..., return_when="FIRST_COMPLETED")`` raises TimeoutError when nothing finished
    within the poll; the executor must take that as "nothing yet". The poll (1 ms) is far below the time any task
    takes (each runs >= 0.5 s and starts workers), so every poll but the last times out, on any machine."""
    tasks = _slow_tasks(3)
    settings = CampaignOptions(repeats=1, fresh=0, quiet=True, plugins=(PLUGIN,))
    recs = Campaign(str(tmp_path), settings).run(tasks, executor=DaskExecutor(client, poll_seconds=0.001))
    assert sorted(r["key"] for r in _lines(tmp_path)) == sorted(t.key for t in tasks)
    assert len(recs) == len(tasks) and _subject_errors_only(recs)
