"""A replay's outcome: an error in every run is its own kind (exit 3), never counted as a difference; runs that
disagree (some raised, some did not; or raised differently) and values that differ are exit 1."""

from __future__ import annotations

from harness.core.records import Measure, TaskRecord
from harness.judge.outcomes import EXIT_CODES, is_difference, replay_outcome

KEY = {"case_id": "c", "subject": "s", "device": "cpu", "context": "default"}


def record(statuses, errors=(), context="default"):
    ok = statuses.get("ok", 0)
    runs = sum(statuses.values())
    status = "skipped" if "skipped" in statuses else "ok" if ok == runs else "error" if not ok else "partial"
    return TaskRecord(key=f"k-{context}", case_id="c", family="embed", subject="s", device="cpu", context=context,
                      status=status, runs=runs, ok_runs=ok, statuses=statuses, errors=tuple(errors),
                      skip_reason="not here" if status == "skipped" else None)


VALUE_ERROR = {"type": "ValueError", "phase": "forward", "message": "bad"}
TASK_ERROR = Measure(kind="task", tensor="", verdict="error", rule="run error", **KEY)


def test_every_run_raising_the_same_way_is_raised_exit_3_and_no_difference():
    out = replay_outcome([record({"error": 3}, [VALUE_ERROR])], [TASK_ERROR])
    assert (out.kind, out.exit_code) == ("raised", 3)
    assert "ValueError in forward" in out.line and "3 of 3" in out.line and "comparison" not in out.line
    assert not is_difference(TASK_ERROR)


def test_a_crash_in_every_run_is_raised_too():
    crash = {"type": "WorkerCrash", "phase": "run", "message": "SIGSEGV"}
    assert replay_outcome([record({"crashed": 2}, [crash])], [TASK_ERROR]).kind == "raised"


def test_runs_that_disagree_are_a_difference_exit_1():
    some = replay_outcome([record({"ok": 2, "error": 1}, [VALUE_ERROR])], [])
    assert (some.kind, some.exit_code) == ("differs", 1) and "disagree" in some.line
    two = replay_outcome([record({"error": 2}, [VALUE_ERROR, {"type": "KeyError", "phase": "backward",
                                                               "message": "k"}])], [])
    assert two.kind == "differs"
    other_context = replay_outcome([record({"ok": 3}), record({"error": 1}, [VALUE_ERROR], "blas1")], [])
    assert other_context.kind == "differs" and "1 ValueError in forward" in other_context.line


def test_values_that_differ_are_exit_1_and_values_that_agree_exit_0():
    same = Measure(kind="repeat", tensor="y", identical=True, verdict="bit-identical", **KEY)
    diff = Measure(kind="context", tensor="y", identical=False, verdict="broken", other="blas1", **KEY)
    beyond = Measure(kind="oracle", tensor="y", within=False, verdict="broken", **KEY)
    assert replay_outcome([record({"ok": 3})], [same]).exit_code == 0
    assert replay_outcome([record({"ok": 3})], [same, diff]).line == "1 comparison(s) differ"
    assert replay_outcome([record({"ok": 3})], [beyond]).exit_code == 1


def test_a_broken_check_without_a_difference_is_exit_1_said_as_such():
    broken = Measure(kind="task", tensor="", verdict="broken", rule="no contract", **KEY)
    out = replay_outcome([record({"ok": 1})], [broken])
    assert (out.kind, out.exit_code) == ("broken", 1) and "comparison" not in out.line


def test_a_skipped_replay_is_exit_0_and_the_table_has_one_code_per_kind():
    assert replay_outcome([record({"skipped": 1})], []).exit_code == 0
    assert set(EXIT_CODES.values()) == {0, 1, 3} and 2 not in EXIT_CODES.values()


def test_every_run_raising_where_the_contract_says_otherwise_is_broken_exit_1():
    """A bad input that must raise in forward raised in backward, in every run: the same error each time, and
    a finding (the contract's check fails), not an error of the harness's kind 3."""
    err = {"type": "IndexError", "phase": "backward", "message": "index 4 is out of bounds"}
    broken = Measure(kind="task", tensor="", verdict="broken", rule="bad input must: raise IndexError in forward",
                     **KEY)
    out = replay_outcome([record({"error": 1}, [err])], [broken])
    assert (out.kind, out.exit_code) == ("broken", 1)
    assert "IndexError in backward" in out.line and "raise IndexError in forward" in out.line
