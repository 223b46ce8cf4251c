"""harness/verbs/env.py: ``harness env`` prints the fingerprint, as JSON when asked, and ``--check`` says whether
the CPU stack is usable."""

from __future__ import annotations

import json

from harness.verbs.env import EnvOptions, env


def test_the_fingerprint_as_json_names_the_versions(capsys) -> None:
    assert env(EnvOptions(json=True)) == 0
    fp = json.loads(capsys.readouterr().out)
    assert "numpy" in json.dumps(fp).lower() and "chainer" in json.dumps(fp).lower()


def test_check_passes_on_this_machine(capsys) -> None:
    assert env(EnvOptions(check=True)) == 0
    assert capsys.readouterr().out.strip()
