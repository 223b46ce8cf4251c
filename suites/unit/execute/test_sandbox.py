"""harness/execute/sandbox.py: a named call in a child process; whatever the child does comes back as a result
with a one-line reason, never as an exception or an exit of the parent."""

from __future__ import annotations

import os
import signal

import pytest

from harness.execute.localization import localize_request
from harness.execute.sandbox import CHILD_ENV, Sandboxed, in_child, run_call


def test_a_child_that_fails_on_its_request_is_a_result_with_its_last_line() -> None:
    res = run_call(localize_request, {"no_such_field": 1}, timeout=120)
    assert not res.ok and res.status in ("exited", "error", "crashed")
    reason = res.reason()
    assert reason and "\n" not in reason
    assert "no_such_field" in reason or "no_such_field" in res.stderr
    assert not in_child()  # the parent never becomes the child


@pytest.mark.parametrize("status, code, needle", [("crashed", -signal.SIGSEGV, "SIGSEGV"),
                                                  ("timeout", -signal.SIGKILL, "did not finish in time"),
                                                  ("exited", 0, "exited (code 0) without an answer"),
                                                  ("error", 2, "exit 2")])
def test_each_way_to_end_without_an_answer_has_its_reason(status: str, code: int, needle: str) -> None:
    res = Sandboxed(status, code, "", "some output\nlast words\n")
    assert not res.ok and needle in res.reason()
    if status in ("crashed", "exited"):
        assert res.reason().endswith("last words)") or res.reason().endswith(": last words")
    assert Sandboxed("ok", 0, "", "", answer={"a": 1}).ok


def test_in_child_reads_the_childs_variable(monkeypatch) -> None:
    monkeypatch.setenv(CHILD_ENV, "1")
    assert in_child()
    monkeypatch.setenv(CHILD_ENV, "0")
    assert not in_child() and os.environ[CHILD_ENV] == "0"
