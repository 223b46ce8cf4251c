"""harness.execute.worker: a run whose outputs are larger than the harness takes from one run is a row of its own,
decided before anything of them is mapped or measured in the harness's process."""

from __future__ import annotations

import pytest

from harness.core.cases import Case
from harness.core.errors import InvalidArgument
from harness.execute.memory_limits import OUTPUT_ENV, output_limit
from harness.execute.worker import Worker

PLUGIN = "suites.plugins.leaves:SUBJECTS"  # leaves.pid answers one int64: 8 bytes
CASE = Case("embed", 0, {"vocab": 5, "width": 3, "ids_shape": [4]})


def _run(limit: str, monkeypatch):
    monkeypatch.setenv(OUTPUT_ENV, limit)
    w = Worker(plugins=(PLUGIN,)).start()
    try:
        return w.run(CASE.to_json(), "leaves.pid", "cpu", "default", timeout=120, case_id=CASE.id)
    finally:
        w.close()


def test_outputs_over_the_limit_are_an_error_row(monkeypatch):
    r = _run("4", monkeypatch)
    assert r.status == "error" and r.error.type == "OutputTooLarge" and r.error.phase == "transfer", r
    assert "8 bytes" in r.error.message and not r.arrays


def test_outputs_within_the_limit_come_back(monkeypatch):
    r = _run("8", monkeypatch)
    assert r.status == "ok" and r.arrays["pid"].nbytes == 8, r


def test_a_bad_limit_is_one_line_before_a_worker_starts(monkeypatch):
    monkeypatch.setenv(OUTPUT_ENV, "lots")
    with pytest.raises(InvalidArgument, match=f"{OUTPUT_ENV}='lots' must be a number of bytes"):
        Worker(plugins=(PLUGIN,))
    monkeypatch.setenv(OUTPUT_ENV, "none")
    assert output_limit() is None
