"""One task's runs (harness.execute.task_runs): what a timeout means is decided by a second try alone, with
twice the limit. The workers here are stand-ins that answer what each test scripts, so the rule is tested
without a clock: a timeout the second try does not repeat is a note, a starved one twice is "not judged", a hang
twice is the timeout finding."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from harness.core.cases import Case
from harness.core.records import Verdict
from harness.execute.answers import Answer, tensor_meta
from harness.execute.plan import Task
from harness.execute.run_clock import RunTime
from harness.execute.settings import CampaignOptions
from harness.execute.solo import SOLO
from harness.execute.task_runs import run_task
from harness.judge.task_verdicts import judge_task
from harness.subjects.base import ErrorInfo, RunResult

CASE = Case("embed", 3, {"vocab": 5, "width": 2, "ids_shape": [4]})
TASK = Task(CASE, "control.deterministic", "cpu", "default")
SETTINGS = CampaignOptions(repeats=2, fresh=1, timeout=10.0, quiet=True, jobs=1)


def ok(limit: float) -> Answer:
    arrays = {"y": np.arange(3, dtype=np.float32)}
    return Answer(RunResult(TASK.subject, CASE.id, "cpu", "default", "ok", arrays=arrays), tensor_meta(arrays))


def timeout(expired: str, cpu_share: float, held_off_share: float) -> Callable[[float], Answer]:
    def answer(limit: float) -> Answer:
        wall = limit if expired == "cpu" else 3 * limit
        cpu = limit if expired == "cpu" else wall * cpu_share
        timing = RunTime(limit, 3 * limit, cpu=cpu, wall=wall, held_off=(wall - cpu) * held_off_share,
                         expired=expired)
        return Answer(RunResult(TASK.subject, CASE.id, "cpu", "default", "timeout",
                                error=ErrorInfo("Timeout", f"no answer within {limit:g} s of CPU time", "run")),
                      {}, timing=timing)
    return answer


STARVED = timeout("wall", 0.05, 0.9)    # a twentieth of a core, waiting for one the rest of the time
SPINS = timeout("cpu", 1.0, 0.0)        # the whole CPU limit spent
SLEEPS = timeout("wall", 0.0, 0.0)      # asleep to the wall limit, with the CPU free


class Worker:
    def __init__(self, script: list[Callable[[float], Answer]], seen: list[tuple[float, int]]) -> None:
        self.pid = 4242
        self.script, self.seen = script, seen

    def run_answers(self, case_json: str, subject: str, device: str, context: str, limit: float, count: int,
                    case_id: str = "") -> Iterator[Answer]:
        for _ in range(count):
            self.seen.append((limit, SOLO.busy))  # the limit asked, and how many runs held the gate shared
            a = self.script.pop(0)(limit)
            yield a
            if a.result.status != "ok":
                return

    def run_answer(self, *args: Any, **kw: Any) -> Answer:
        return next(self.run_answers(*args[:5], 1, **kw))


class Workers:
    """A worker set whose every slot answers from one script, in order."""

    def __init__(self, *script: Callable[[float], Answer]) -> None:
        self.seen: list[tuple[float, int]] = []
        self.again: list[str] = []
        self.w = Worker(list(script), self.seen)

    @contextmanager
    def use(self, slot: str, used: set[int] | None = None) -> Iterator[tuple[str, Worker]]:
        if slot == "pool":
            yield "pool", self.w
            return
        assert used is not None
        k = len(used)
        used.add(k)
        yield f"fresh:{k}", self.w

    @contextmanager
    def use_again(self, slot: str) -> Iterator[Worker]:
        self.again.append(slot)
        yield self.w


def verdict_of(outcome: Any) -> Any:
    rec = outcome.record
    from types import SimpleNamespace

    contract = SimpleNamespace(subject=TASK.subject, device="cpu", context="*", line=1)
    return judge_task(contract, {"case_id": rec.case_id, "subject": rec.subject, "device": rec.device,
                                 "context": rec.context}, rec.status, rec.run_status, rec.first_error,
                      rec.skip_reason)


def test_a_timeout_that_does_not_repeat_alone_is_a_note_and_the_task_is_judged() -> None:
    ws = Workers(ok, STARVED, ok, ok)
    out = run_task(TASK, ws, SETTINGS)  # type: ignore[arg-type]
    # pooled run 1 timed out beside another lane's run, then answered alone with twice the limit
    assert [limit for limit, _ in ws.seen] == [10.0, 10.0, 20.0, 10.0] and ws.again == ["pool"]
    assert [busy for _, busy in ws.seen] == [1, 1, 0, 1]  # the second try held the gate alone
    rec = out.record
    assert rec.status == "ok" and rec.statuses == {"ok": 3} and verdict_of(out) is None
    retried = out.runs[1]["retried"]
    assert retried["status"] == "timeout" and retried["cpu"]["starved"] is True
    assert len(out.notes) == 1 and "not a finding" in out.notes[0] and "CPU share 5%" in out.notes[0]
    assert out.seconds["retried"] == 1


def test_a_run_starved_twice_is_not_judged_timed_out_twice_and_never_a_finding() -> None:
    ws = Workers(STARVED, STARVED)
    out = run_task(TASK, ws, SETTINGS)  # type: ignore[arg-type]
    rec = out.record
    assert rec.status == "skipped" and rec.skip_reason is not None
    assert rec.skip_reason.startswith("timed out twice (limit 20 s of CPU, CPU share 5%)")
    m = verdict_of(out)
    assert m is not None and m.verdict == Verdict.NOT_JUDGED.value and m.detail == rec.skip_reason
    assert "timeout" not in rec.statuses and not out.notes


def test_a_spinning_hang_alone_too_is_the_timeout_finding() -> None:
    ws = Workers(SPINS, SPINS)
    out = run_task(TASK, ws, SETTINGS)  # type: ignore[arg-type]
    rec = out.record
    # both timeouts recorded, and no third run: the finding is made
    assert rec.statuses == {"timeout": 2} and rec.status == "error" and len(ws.seen) == 2
    assert [r["cpu"]["expired"] for r in out.runs] == ["cpu", "cpu"] and out.runs[1]["alone"] is True
    m = verdict_of(out)
    assert m is not None and m.verdict == Verdict.ERROR.value and "Timeout" in m.actual


def test_a_sleeping_hang_in_a_fresh_worker_is_the_timeout_finding_tried_in_the_same_slot() -> None:
    ws = Workers(ok, ok, SLEEPS, SLEEPS)
    out = run_task(TASK, ws, SETTINGS)  # type: ignore[arg-type]
    assert ws.again == ["fresh:0"] and [r["process"] for r in out.runs] == ["pool", "pool", "fresh:0", "fresh:0"]
    assert out.record.statuses == {"ok": 2, "timeout": 2} and out.record.run_status == "timeout"
    m = verdict_of(out)
    assert m is not None and m.verdict == Verdict.ERROR.value


def test_the_runs_are_held_to_the_users_case_limit_not_the_default(monkeypatch) -> None:
    import dataclasses

    from harness.core.case_limits import MAX_CASE_BYTES_ENV

    # under the user's limit: not run, and the reason names the option that set the limit
    out = run_task(TASK, Workers(), dataclasses.replace(SETTINGS, max_case_bytes=1))  # type: ignore[arg-type]
    assert out.record.status == "skipped" and "--max-case-bytes" in (out.record.skip_reason or "")
    m = verdict_of(out)
    assert m is not None and m.verdict == Verdict.NOT_JUDGED.value
    # over the default (a tiny one here) but under the user's: it runs
    monkeypatch.setenv(MAX_CASE_BYTES_ENV, "1")
    out = run_task(TASK, Workers(ok, ok, ok), dataclasses.replace(SETTINGS, max_case_bytes=1 << 40))  # type: ignore[arg-type]
    assert out.record.status == "ok" and out.record.statuses == {"ok": 3}


class Kernel:
    """The kernel's count of out-of-memory kills, as :func:`harness.execute.run_clock.oom_kills` reads it."""

    kills = 0


def sigkill(for_memory: bool) -> Callable[[float], Answer]:
    """A run whose worker died of SIGKILL: sent by the out-of-memory killer (the count grows) or by another."""
    def answer(limit: float) -> Answer:
        Kernel.kills += int(for_memory)
        return Answer(RunResult(TASK.subject, CASE.id, "cpu", "default", "crashed",
                                error=ErrorInfo("WorkerCrash", "worker died with SIGKILL", "run")), {})
    return answer


OOM, KILLED = sigkill(True), sigkill(False)


def kernel(monkeypatch) -> None:
    Kernel.kills = 0
    monkeypatch.setattr("harness.execute.task_runs.oom_kills", lambda: Kernel.kills)


def test_a_worker_the_out_of_memory_killer_ends_beside_others_is_run_alone_and_is_a_note(monkeypatch) -> None:
    kernel(monkeypatch)
    ws = Workers(ok, OOM, ok, ok)
    out = run_task(TASK, ws, SETTINGS)  # type: ignore[arg-type]
    assert ws.again == ["pool"] and [busy for _, busy in ws.seen] == [1, 1, 0, 1]  # the second try held it alone
    rec = out.record
    assert rec.status == "ok" and rec.statuses == {"ok": 3} and verdict_of(out) is None
    assert out.runs[1]["retried"]["killed_for_memory"] is True and out.runs[1]["retried"]["status"] == "crashed"
    assert len(out.notes) == 1 and "out-of-memory killer" in out.notes[0] and "not a finding" in out.notes[0]


def test_a_worker_the_out_of_memory_killer_ends_alone_too_is_not_judged_and_never_a_finding(monkeypatch) -> None:
    kernel(monkeypatch)
    out = run_task(TASK, Workers(OOM, OOM), SETTINGS)  # type: ignore[arg-type]
    rec = out.record
    assert rec.status == "skipped" and (rec.skip_reason or "").startswith("killed for memory twice")
    m = verdict_of(out)
    assert m is not None and m.verdict == Verdict.NOT_JUDGED.value and m.detail == rec.skip_reason
    assert "crashed" not in rec.statuses and not out.notes


def test_a_sigkill_the_out_of_memory_killer_did_not_send_is_the_crash_finding_at_once(monkeypatch) -> None:
    kernel(monkeypatch)
    ws = Workers(ok, KILLED, ok)
    out = run_task(TASK, ws, SETTINGS)  # type: ignore[arg-type]
    assert ws.again == [] and out.record.run_status == "crashed" and not out.notes
    m = verdict_of(out)
    assert m is not None and m.verdict == Verdict.ERROR.value


def test_a_corner_runs_two_pooled_and_one_fresh_and_is_a_said_skip_where_blas_threads_cannot_matter() -> None:
    corner = Case("lstm", 3, {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [8]}, tags=("corner",))
    campaign = CampaignOptions(repeats=5, fresh=2, timeout=10.0, quiet=True, jobs=1)
    ws = Workers(ok, ok, ok)
    out = run_task(Task(corner, TASK.subject, "cpu", "debug"), ws, campaign)  # type: ignore[arg-type]
    assert [r["process"] for r in out.runs] == ["pool", "pool", "fresh:0"] and out.record.statuses == {"ok": 3}
    # in a context that only sets BLAS's thread count, and no product large enough to split: one skipped row,
    # no worker asked, its reason in the report; a skip, not a failure of the gate
    ws = Workers()
    out = run_task(Task(corner, TASK.subject, "cpu", "blas2"), ws, campaign)  # type: ignore[arg-type]
    rec = out.record
    assert rec.status == "skipped" and not ws.seen and len(out.runs) == 1
    assert "blas2 changes only BLAS's thread count" in (rec.skip_reason or "")
    m = verdict_of(out)
    assert m is not None and m.verdict == Verdict.SKIPPED.value and not Verdict(m.verdict).fails
