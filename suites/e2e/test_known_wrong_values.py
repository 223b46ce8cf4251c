"""A ``[[known_defect]]`` with ``wrong = [...]`` end to end: the case runs in the harness's workers, its measures
are judged with the declarations of a contracts file, and ``replay`` prints "known defect" for the declared
tensor instead of failing. The subject is Chainer's CPU embedding on the float16 edge whose running sum
overflows (grad.W = inf where the float64 oracle says 40000), which the shipped file covers with an ``any``
rule; here a contracts file declares it a known wrong value instead, and a third leaves it undeclared."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.generate.edges import edge_cases
from harness.judge.contracts import DEFAULT_CONTRACTS

EDGE = "edge:float16:partial_sum_overflow"
RULE_HEAD = f'[[bad_input]]\ntag = "{EDGE}"\n'
DECLARED = f'''
[[known_defect]]
subjects = ["chainer.embed_id"]
device = "cpu"
tags = ["{EDGE}"]
wrong = ["grad.W"]
reason = "planted: float16 accumulation passes 65,504"
reference = "https://example.invalid/known-wrong"
'''


def _without_rule(text: str) -> str:
    start = text.index(RULE_HEAD)
    end = text.find("\n\n", start)
    return text[:start] + (text[end + 2:] if end >= 0 else "")


@pytest.mark.slow  # three replays, each with its workers: CI runs it, `make test` leaves it out
def test_replay_reads_a_declared_wrong_tensor_as_a_known_defect(tmp_path, harness):
    (case,) = [c for c in edge_cases() if EDGE in c.tags]
    case_file = tmp_path / "case.json"
    case_file.write_text(case.to_json())
    shipped = Path(DEFAULT_CONTRACTS).read_text()
    assert RULE_HEAD in shipped
    undeclared = tmp_path / "undeclared.toml"
    undeclared.write_text(_without_rule(shipped))
    declared = tmp_path / "declared.toml"
    declared.write_text(_without_rule(shipped) + DECLARED)
    args = ("replay", str(case_file), "--subject", "chainer.embed_id", "--device", "cpu", "--repeats", "2")

    p = harness(*args, "--contracts", str(undeclared))
    assert p.rc == 1 and "BEYOND TOLERANCE" in p.stdout, p.stdout + p.stderr  # the planted value is really wrong
    p = harness(*args, "--contracts", str(declared))
    assert p.rc == 0, p.stdout + p.stderr
    assert "known defect" in p.stdout and "grad.W beyond the oracle's tolerance" in p.stdout, p.stdout
    assert "example.invalid/known-wrong" in p.stdout, p.stdout
