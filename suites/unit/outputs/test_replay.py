"""harness/outputs/replay.py: ``replay`` runs a case in workers and prints one line per tensor; its exit code says
whether anything differs (0 for a deterministic subject, 1 for the nondeterministic control)."""

from __future__ import annotations

import io

from harness.core.cases import Case
from harness.core.devices import CPU
from harness.core.records import Measure
from harness.judge.contracts import load_contracts
from harness.outputs.replay import differs, replay

CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [400], "id_kind": "collision", "distinct": 2})
KEY = dict(case_id="c", subject="s", device="cpu", context="default", tensor="y")


def test_a_difference_is_a_value_that_differs_never_an_error() -> None:
    assert differs(Measure(kind="repeat", identical=False, verdict="broken", **KEY))
    assert not differs(Measure(kind="repeat", identical=True, verdict="bit-identical", **KEY))
    assert differs(Measure(kind="oracle", within=False, verdict="broken", **KEY))
    assert not differs(Measure(kind="oracle", within=False, verdict="known defect", **KEY))
    assert not differs(Measure(kind="task", tensor="", verdict="error",
                               **{k: v for k, v in KEY.items() if k != "tensor"}))


def test_replay_exits_0_for_the_deterministic_control_and_1_for_the_nondeterministic_one() -> None:
    same, other = io.StringIO(), io.StringIO()
    assert replay(load_contracts(), CASE, "control.deterministic", [CPU], ["default"], 3, same) == 0
    assert replay(load_contracts(), CASE, "control.nondeterministic", [CPU], ["default"], 3, other) == 1
    assert "bit-identical" in same.getvalue() and "DIFFERS" in other.getvalue()


def test_without_a_stream_replay_prints_to_the_standard_output_of_the_call(capsys) -> None:
    """The default stream is the one in place when replay is called (a capture's), not the one at import."""
    assert replay(load_contracts(), CASE, "control.deterministic", [CPU], ["default"], 2) == 0
    assert "bit-identical" in capsys.readouterr().out
