"""The contracts file is validated whole: schema and coverage, one line per problem with file:line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import ContractError
from harness.judge.contracts import load_contracts, validate

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = (ROOT / "contracts.toml").read_text()
LINE = """
[[contract]]
subject = "chainer.embed_id"
device = "cpu"
context = "blas2"
reproducible = true
reason = "planted"
"""


def _write(tmp_path, text: str, name: str = "c.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("extra,needle", [
    ("across_processes = true\nreproducible = false", "across_processes = true needs reproducible = true"),
    ("tolerance = { float32 = [nan, 1e-3] }", "must be finite and >= 0"),
    ("tolerance = { float32 = [-1, -1] }", "must be finite and >= 0"),
    ('tolerance = "tight"', "must be a table"),
    ('identical_across = "default"', "must be a list of names"),
    ('invariant_under = ["sideways"]', "names 'sideways', not one of alone"),
    ('oracle_rules = ["vibes"]', "names 'vibes'"),
])
def test_a_bad_contract_line_is_refused_with_its_line(tmp_path, extra, needle):
    body = LINE.replace('reproducible = true\n', "") if "reproducible = false" in extra else LINE
    text = SHIPPED + body.replace('reason = "planted"', extra + '\nreason = "planted"')
    with pytest.raises(ContractError) as info:
        load_contracts(_write(tmp_path, text))
    msg = str(info.value)
    assert needle in msg and re.search(r"c\.toml:\d+:", msg) and "\n" not in msg, msg


def test_context_must_be_a_name(tmp_path):
    with pytest.raises(ContractError, match=r"c\.toml:\d+: context=7 must be a context name"):
        load_contracts(_write(tmp_path, SHIPPED + LINE.replace('context = "blas2"', "context = 7")))


def test_subjects_as_a_string_is_refused_not_split_into_characters(tmp_path):
    rule = '\n[[bad_input]]\ntag = "bad:float_ids"\nsubjects = "chainer.embed_id"\noutcome = "any"\nreason = "x"\n'
    with pytest.raises(ContractError, match="subjects='chainer.embed_id' must be a list"):
        load_contracts(_write(tmp_path, SHIPPED + rule))


def test_raises_and_no_error_for_the_same_tag_cannot_both_hold(tmp_path):
    rules = ('\n[[bad_input]]\ntag = "x:y"\nsubjects = ["chainer.embed_id"]\noutcome = "raises"\nerrors = ["E"]\n'
             'reason = "a"\n\n[[bad_input]]\ntag = "x:y"\nsubjects = ["chainer.embed_id"]\noutcome = "no_error"\n'
             'reason = "b"\n')
    with pytest.raises(ContractError, match="both a raises and a no_error rule"):
        load_contracts(_write(tmp_path, SHIPPED + rules))


def test_an_empty_file_and_bytes_that_are_not_utf8_are_refused(tmp_path):
    with pytest.raises(ContractError, match="holds no \\[\\[contract\\]\\] line"):
        load_contracts(_write(tmp_path, "version = 1\n"))
    p = tmp_path / "binary.toml"
    p.write_bytes(b"\xff\xfe[[contract]]\n")
    with pytest.raises(ContractError, match="is not UTF-8 text"):
        load_contracts(p)


def test_missing_coverage_is_a_problem_for_every_gap(tmp_path):
    from harness.core.contexts import CONTEXTS
    from harness.subjects.registry import SUBJECTS

    blocks = SHIPPED.split("[[contract]]")
    kept = [b for b in blocks if 'subject = "chainer.NStepLSTM"\ndevice = "cpu"' not in b]
    assert len(kept) < len(blocks), "the shipped file lost its NStepLSTM CPU lines"
    contracts = load_contracts(_write(tmp_path, "[[contract]]".join(kept)))
    problems = validate(contracts, SUBJECTS, CONTEXTS)
    gaps = [p for p in problems if "subject='chainer.NStepLSTM' device='cpu'" in p]
    assert gaps and all("no line covers" in p for p in gaps)
    assert validate(load_contracts(), SUBJECTS, CONTEXTS) == []


def test_contracts_check_exits_1_with_one_line_per_problem(tmp_path):
    blocks = SHIPPED.split("[[contract]]")
    kept = [b for b in blocks if 'subject = "chainer.NStepLSTM"\ndevice = "cpu"' not in b]
    p = _write(tmp_path, "[[contract]]".join(kept))
    r = subprocess.run([sys.executable, "-m", "harness", "contracts", "check", "--contracts", str(p)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "no line covers subject='chainer.NStepLSTM'" in r.stderr
    assert "Traceback" not in r.stderr
