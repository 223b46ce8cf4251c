"""harness/upstream/plugin_call.py: the child prints a subject's role and library call as one JSON line."""

from __future__ import annotations

import json

from harness.upstream.plugin_call import main


def test_a_shipped_subject_prints_its_call_and_a_control_none(capsys) -> None:
    assert main(["plugin_call", "[]", "chainer.embed_id"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["role"] == "subject" and got["call"][0].endswith("library_calls.py")
    assert got["call"][1] == "embed_function"
    assert main(["plugin_call", "[]", "control.deterministic"]) == 0
    assert json.loads(capsys.readouterr().out) == {"role": "control", "call": None}
