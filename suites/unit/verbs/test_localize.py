"""harness/verbs/localize.py: ``localize`` runs the subject in a child and prints where two runs first differ, or
that nothing does; an unknown subject is refused before any child starts."""

from __future__ import annotations

import json

import pytest

from harness.core.cases import Case
from harness.core.errors import UnknownSubject
from harness.judge.reproducer import Reproducer
from harness.verbs.localize import LocalizeOptions, localize

CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [20]})


def test_a_deterministic_subject_localizes_to_no_divergence(tmp_path, capsys) -> None:
    case = tmp_path / "case.json"
    case.write_text(CASE.to_json())
    assert localize(LocalizeOptions(Reproducer(str(case), "chainer.embed_id"), json=True, timeout=240)) == 0
    loc = json.loads(capsys.readouterr().out)
    assert loc["diverged"] is False and loc["root"] is None and loc["outputs_differ"] == []


def test_the_nondeterministic_control_is_said_to_differ_outside_chainers_nodes(tmp_path, capsys) -> None:
    case = tmp_path / "case.json"
    case.write_text(CASE.to_json())
    assert localize(LocalizeOptions(Reproducer(str(case), "control.nondeterministic"), timeout=240)) == 0
    text = capsys.readouterr().out
    assert "final outputs differ (grad.W)" in text and "diverged" in text


def test_an_unknown_subject_is_refused_before_a_child_starts(tmp_path) -> None:
    with pytest.raises(UnknownSubject):
        localize(LocalizeOptions(Reproducer(str(tmp_path / "absent.json"), "no.such.subject")))
