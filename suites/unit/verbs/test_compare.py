"""harness/verbs/compare.py: ``compare`` exits 1 only when asked and something changed; ``merge`` writes the
machines' matrix."""

from __future__ import annotations

import os

import numpy as np

from harness.verbs.compare import CompareOptions, MergeOptions, compare, merge
from suites.audit_files import _synthetic

X = np.linspace(-2, 3, 50, dtype=np.float32)
ENV = {"gpu": {"available": False}}


def test_compare_exits_1_on_a_change_only_with_exit_code(tmp_path, capsys) -> None:
    a = _synthetic(tmp_path / "a.json", ENV, [("s", "ok", {"y": X})])
    same = _synthetic(tmp_path / "same.json", ENV, [("s", "ok", {"y": X})])
    other = _synthetic(tmp_path / "b.json", ENV, [("s", "ok", {"y": X + 1})])
    assert compare(CompareOptions(str(a), str(same), exit_code=True)) == 0
    assert compare(CompareOptions(str(a), str(other), exit_code=True)) == 1
    assert compare(CompareOptions(str(a), str(other))) == 0
    out = tmp_path / "cmp"
    assert compare(CompareOptions(str(a), str(other), out=str(out))) == 0
    assert any(n.startswith("compare.") for n in os.listdir(out))
    assert "compare:" in capsys.readouterr().err


def test_merge_writes_the_matrix_of_the_machines(tmp_path) -> None:
    a = _synthetic(tmp_path / "m1.json", ENV, [("s", "ok", {"y": X})])
    b = _synthetic(tmp_path / "m2.json", {"gpu": {"available": False}, "host": "other"}, [("s", "ok", {"y": X})])
    out = tmp_path / "merged"
    assert merge(MergeOptions((str(a), str(b)), str(out))) == 0
    assert any(n.startswith("merge.") for n in os.listdir(out))
