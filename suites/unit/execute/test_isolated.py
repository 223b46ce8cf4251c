"""harness/execute/isolated.py: a task's runs in worker processes, measured as a campaign measures them, and the
set-up failures that are this machine's problem rather than a finding."""

from __future__ import annotations

from types import SimpleNamespace

from harness.core.cases import Case
from harness.core.devices import CPU
from harness.execute.isolated import Runner, measure_isolated, setup_failure
from harness.judge.contracts import load_contracts

CASE = Case("embed", 4, {"vocab": 5, "width": 3, "ids_shape": [4]})


def test_runs_in_workers_are_measured_and_counted() -> None:
    with Runner() as runner:
        iso = measure_isolated(runner, load_contracts(), "chainer.embed_id", CASE, CPU, repeats=2)
        assert runner.runs >= 2
    assert iso.record.status == "ok" and iso.record.ok_runs == 2
    assert {r.status for r in iso.results} == {"ok"} and iso.arrays
    repeat = [m for m in iso.measures if m.kind == "repeat"]
    assert repeat and all(m.identical for m in repeat)
    assert any(m.kind == "oracle" for m in iso.measures)  # its oracle ran too


def _rec(status: str, ok_runs: int, errors: tuple) -> SimpleNamespace:
    return SimpleNamespace(status=status, ok_runs=ok_runs, errors=errors)


def test_only_a_worker_that_could_not_start_is_a_setup_failure() -> None:
    setup = {"phase": "setup", "type": "ImportError", "message": "no chainer"}
    assert setup_failure(_rec("error", 0, (setup,))) == "ImportError: no chainer"
    assert setup_failure(_rec("error", 0, ({"phase": "forward", "type": "ImportError", "message": "x"},))) is None
    assert setup_failure(_rec("partial", 1, (setup,))) is None
    assert setup_failure(_rec("skipped", 0, (setup,))) is None
