"""Contracts files are validated whole: schema, contradictions and coverage, with file:line in every message."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.contexts import CONTEXTS
from harness.core.errors import ContractError
from harness.judge.contracts import ORACLE_RULES, load_contracts, validate
from harness.subjects.registry import SUBJECTS

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = (ROOT / "contracts.toml").read_text()

LINE = """
[[contract]]
subject = "chainer.embed_id"
device = "cpu"
context = "blas1"
reproducible = true
across_processes = true
identical_across = ["default"]
oracle = "within"
reason = "planted for a test"
"""


def _write(tmp_path, text: str | bytes) -> Path:
    p = tmp_path / "c.toml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def _refused(tmp_path, text, message) -> str:
    p = _write(tmp_path, text)
    with pytest.raises(ContractError) as info:
        load_contracts(p)
    msg = str(info.value)
    assert "\n" not in msg
    assert re.search(message, msg), msg
    return msg


def test_shipped_file_is_valid_and_covered():
    contracts = load_contracts()
    assert validate(contracts, SUBJECTS, CONTEXTS) == []


@pytest.mark.parametrize("replace,message", [
    (("across_processes = true", "across_processes = true"), None),  # control: the planted line loads
    (("reproducible = true", "reproducible = false"),
     r"c.toml:9: \$\.contract\[0\]\.identical_across=\[\"default\"\] must be \[\] where reproducible is false"),
    (("reproducible = true\nacross_processes = true\nidentical_across = [\"default\"]",
      "reproducible = false\nacross_processes = true"),
     r"c.toml:7: \$\.contract\[0\]\.reproducible=false must be true where across_processes = true"),
    (('oracle = "within"', 'oracle = "record"\ntolerance = { float32 = [1e-4, 1e-3] }'),
     r"c.toml:11: \$\.contract\[0\]\.tolerance=\{.*\} has no meaning with oracle = 'record'"),
    (('oracle = "within"', 'oracle = "record"\noracle_rules = ["normwise"]'),
     r"c.toml:11: \$\.contract\[0\]\.oracle_rules=\[\"normwise\"\] has no meaning with oracle = 'record'"),
    (('oracle = "within"', 'oracle = "within"\ntolerance = { float32 = [nan, 1e-3] }'),
     r"c.toml: holds nan: only finite numbers"),
    (('oracle = "within"', 'oracle = "within"\ntolerance = { float32 = [1e400, 1e-3] }'),
     r"c.toml: the number 1e400 is out of range"),
    (('oracle = "within"', 'oracle = "within"\ntolerance = { float32 = [-1, -1] }'),
     r"c.toml:11: \$\.contract\[0\]\.tolerance\.float32\[0\]=-1 must be >= 0"),
    (('oracle = "within"', 'oracle = "within"\ntolerance = { float32 = [1] }'),
     r"c.toml:11: \$\.contract\[0\]\.tolerance\.float32=\[1\] must be \[atol, rtol\]"),
    (('oracle = "within"', 'oracle = "within"\ntolerance = "tight"'),
     r"c.toml:11: \$\.contract\[0\]\.tolerance='tight' must be an object, got a string"),
    (('context = "blas1"', "context = 7"), r"c.toml:6: \$\.contract\[0\]\.context=7 must be a string, got an integer"),
    (('identical_across = ["default"]', 'identical_across = "default"'),
     r"c.toml:9: \$\.contract\[0\]\.identical_across='default' must be an array, got a string"),
    (('reason = "planted for a test"', 'reason = "x"\ninvariant_under = ["order", "sideways"]'),
     r"c.toml:12: \$\.contract\[0\]\.invariant_under\[1\]='sideways' must be 'alone', 'subbatch', 'order', "
     r"'padding' or 'duplicate'"),
    (('reason = "planted for a test"', 'reason = "x"\noracle_rules = ["loose"]'), r"'loose' must be 'summation_bound'"),
    (('reason = "planted for a test"', 'reason = "x"\nbogus = 1'),
     r"c.toml:12: \$\.contract\[0\]\.bogus is not a known field"),
    (('subject = "chainer.embed_id"', 'subject = "chainer.embed_id"\nnested = ' + "[" * 700 + "]" * 700),
     r"c.toml:5: nested too deeply"),
    (('subject = "chainer.embed_id"', 'subject = "chainer.embed_id"\nbig = ' + "9" * 5000),
     r"c.toml:5: the number 9999.* has 5000 characters"),
])
def test_bad_contract_line_is_one_line_with_file_and_line(tmp_path, replace, message):
    text = "version = 1\n" + LINE.replace(*replace)
    if message is None:
        [c] = load_contracts(_write(tmp_path, text)).contracts
        assert c.line == 3 and c.invariant_under == () and c.oracle_rules == ORACLE_RULES
        assert c.identical_across == ("default",)
    else:
        _refused(tmp_path, text, message)


def test_empty_file_and_non_utf8_and_directory(tmp_path):
    _refused(tmp_path, "", r"holds no \[\[contract\]\] line")
    _refused(tmp_path, "version = 1\n", r"holds no \[\[contract\]\] line")
    _refused(tmp_path, b'version = 1\n# caf\xe9\n' + LINE.encode(), r"c.toml:2: not UTF-8")
    with pytest.raises(ContractError, match="is a directory"):
        load_contracts(tmp_path)


def test_subjects_as_a_string_is_refused(tmp_path):
    text = SHIPPED + '\n[[bad_input]]\ntag = "bad:float_ids"\nsubjects = "chainer.embed_id"\n' \
                     'outcome = "any"\nreason = "x"\n'
    msg = _refused(tmp_path, text, r"subjects='chainer.embed_id' must be an array, got a string")
    assert f":{len(SHIPPED.splitlines()) + 4}:" in msg


def test_no_error_and_raises_for_the_same_tag_is_refused(tmp_path):
    text = SHIPPED + """
[[bad_input]]
tag = "bad:zz"
subjects = ["chainer.embed_id"]
device = "cpu"
outcome = "raises"
errors = ["ValueError"]
phase = "forward"
reason = "x"

[[bad_input]]
tag = "bad:zz"
subjects = ["*"]
device = "cpu"
outcome = "no_error"
reason = "y"
"""
    _refused(tmp_path, text, r"tag='bad:zz' is outcome='no_error' here and outcome='raises' at .*c.toml:\d+")


def test_missing_coverage_is_a_problem(tmp_path):
    # Remove every NStepLSTM CPU line: validate must name each missing subject x device x context.
    blocks = SHIPPED.split("[[contract]]")
    kept = [b for b in blocks if not ('subject = "chainer.NStepLSTM"' in b and 'device = "cpu"' in b)]
    assert len(kept) < len(blocks)
    p = _write(tmp_path, "[[contract]]".join(kept))
    problems = validate(load_contracts(p), SUBJECTS, CONTEXTS)
    assert problems
    assert all(re.match(rf"{re.escape(str(p))}:\d+: ", m) for m in problems)
    assert any("subject='chainer.NStepLSTM' device='cpu' context='default'" in m for m in problems)
    assert any("context='blas1'" in m for m in problems)


def test_stated_tolerance_without_oracle_rules_gets_none(tmp_path):
    text = "version = 1\n" + LINE.replace('oracle = "within"', 'oracle = "within"\ntolerance = { float32 = [0, 0] }')
    [c] = load_contracts(_write(tmp_path, text)).contracts
    assert c.tolerance == {"float32": (0.0, 0.0)} and c.oracle_rules == ()
    text = text.replace('reason =', 'oracle_rules = ["normwise"]\nreason =')
    [c] = load_contracts(_write(tmp_path, text)).contracts
    assert c.oracle_rules == ("normwise",)


def test_invariant_under_is_read(tmp_path):
    text = "version = 1\n" + LINE.replace("reason =", 'invariant_under = ["order", "duplicate"]\nreason =')
    [c] = load_contracts(_write(tmp_path, text)).contracts
    assert c.invariant_under == ("order", "duplicate")


@pytest.mark.parametrize("text", ["", 'version = 1\n[[contract]]\nsubject = "x"\ncontext = 7\n', b"\xff\xfe"])
def test_contracts_check_cli_is_one_line_exit_2(tmp_path, text):
    p = _write(tmp_path, text)
    r = subprocess.run([sys.executable, "-m", "harness", "contracts", "check", "--contracts", str(p)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    # the prefix wording is cli.py's
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("harness: ")


# ---- bad-input phases and known defects ---------------------------------------------------------------------

BAD = """
[[bad_input]]
tag = "bad:zz"
subjects = ["chainer.embed_id"]
device = "cpu"
outcome = "raises"
errors = ["IndexError"]
phase = "forward"
reason = "planted"
"""

DEFECT = """
[[known_defect]]
subjects = ["chainer.embed_id"]
device = "cpu"
tags = ["ids:empty"]
error = "ValueError"
phase = "backward"
reason = "planted"
reference = "https://example.invalid/issue/1"
"""


@pytest.mark.parametrize("replace,message", [
    (('phase = "forward"\n', ""),
     r"c.toml:\d+: \$\.bad_input\[0\] is missing the field 'phase' \(outcome = 'raises' needs"),
    (('phase = "forward"', 'phase = "sideways"'),
     r"c.toml:\d+: \$\.bad_input\[0\]\.phase='sideways' must be 'forward', "
     r"'backward', 'double-backward'"),
    (('outcome = "raises"\nerrors = ["IndexError"]', 'outcome = "no_error"'),
     r"c.toml:\d+: \$\.bad_input\[0\]\.phase='forward' applies to outcome = 'raises' only"),
])
def test_bad_input_phase_is_required_and_checked(tmp_path, replace, message):
    _refused(tmp_path, "version = 1\n" + LINE + BAD.replace(*replace), message)


def test_bad_input_phase_is_read_and_double_backward_is_spelled_either_way(tmp_path):
    [r] = load_contracts(_write(tmp_path, "version = 1\n" + LINE + BAD)).bad_inputs
    assert r.phase == "forward"
    [r] = load_contracts(_write(tmp_path, "version = 1\n" + LINE + BAD.replace('"forward"', '"double_backward"'))
                         ).bad_inputs
    assert r.phase == "double-backward"


@pytest.mark.parametrize("replace,message", [
    (('reference = "https://example.invalid/issue/1"\n', ""),
     r"\$\.known_defect\[0\] is missing the field 'reference'"),
    (('tags = ["ids:empty"]', "tags = []"), r"c.toml:\d+: \$\.known_defect\[0\]\.tags=\[\] must hold at least 1 item"),
    (('phase = "backward"', 'phase = "later"'), r"\$\.known_defect\[0\]\.phase='later' must be 'forward'"),
    (('reason = "planted"', 'reason = "planted"\nseverity = 3'),
     r"c.toml:20: \$\.known_defect\[0\]\.severity is not a known field"),
])
def test_bad_known_defect_is_one_line_with_file_and_line(tmp_path, replace, message):
    _refused(tmp_path, "version = 1\n" + LINE + DEFECT.replace(*replace), message)


WRONG_VALUES = DEFECT.replace('error = "ValueError"\nphase = "backward"\n', 'wrong = ["grad.W"]\n')


@pytest.mark.parametrize("text,message", [
    (DEFECT.replace('error = "ValueError"\nphase = "backward"\n', ""),
     r"c.toml:\d+: \$\.known_defect\[0\] is missing the field 'error' \(needs error and phase \(a crash.*or wrong = "),
    (WRONG_VALUES.replace('wrong = ["grad.W"]', 'wrong = ["grad.W"]\nerror = "ValueError"'),
     r"c.toml:\d+: \$\.known_defect\[0\]\.error='ValueError' is for a crash; a declaration with wrong = "),
    (WRONG_VALUES.replace('wrong = ["grad.W"]', "wrong = []"),
     r"c.toml:\d+: \$\.known_defect\[0\]\.wrong=\[\] must hold at least 1 item"),
])
def test_known_defect_is_a_crash_or_wrong_values_never_both_nor_neither(tmp_path, text, message):
    _refused(tmp_path, "version = 1\n" + LINE + text, message)


def test_known_wrong_values_declare_tensors_and_no_error(tmp_path):
    [d] = load_contracts(_write(tmp_path, "version = 1\n" + LINE + WRONG_VALUES)).known_defects
    assert (d.wrong, d.error, d.phase) == (("grad.W",), "", "")
    assert d.covers_values("grad.W") and not d.covers_values("y")
    assert not d.matches("", "")  # no error of any kind is this defect
    assert d.what == "grad.W beyond the oracle's tolerance" and d.describe().startswith("known defect: grad.W beyond")


def test_known_defect_lookup_matches_subject_device_tags_error_and_phase(tmp_path):
    c = load_contracts(_write(tmp_path, "version = 1\n" + LINE + DEFECT))
    [d] = c.known_defects
    assert d.line == len(("version = 1\n" + LINE).splitlines()) + 2 and d.reference.startswith("https://")
    tags = ("ids:empty", "ids:uniform")
    assert c.known_defect_for("chainer.embed_id", "cpu", tags, "ValueError", "backward") == d
    assert c.known_defect_for("chainer.embed_id", "cpu", tags, "ValueError", "forward") is None
    assert c.known_defect_for("chainer.embed_id", "cpu", tags, "IndexError", "backward") is None
    assert c.known_defect_for("chainer.embed_id", "gpu", tags, "ValueError", "backward") is None
    assert c.known_defect_for("espnet.embed_id", "cpu", tags, "ValueError", "backward") is None
    assert c.known_defect_for("chainer.embed_id", "cpu", ("ids:uniform",), "ValueError", "backward") is None


def test_known_defect_validation_names_unknown_subjects_and_a_defect_called_expected(tmp_path):
    text = "version = 1\n" + LINE + DEFECT.replace('["chainer.embed_id"]', '["chainer.embed_id", "no.such"]')
    problems = validate(load_contracts(_write(tmp_path, text)), SUBJECTS, CONTEXTS)
    assert any("subject='no.such' is not registered" in p for p in problems), problems
    expected = BAD.replace('"bad:zz"', '"ids:empty"').replace('"IndexError"', '"ValueError"').replace(
        '"forward"', '"backward"')
    problems = validate(load_contracts(_write(tmp_path, "version = 1\n" + LINE + DEFECT + expected)), SUBJECTS,
                        CONTEXTS)
    assert any("is also an expected error" in p and "a defect is never expected" in p for p in problems), problems


def test_shipped_file_declares_the_empty_batch_a_known_defect_and_every_raises_rule_a_phase():
    contracts = load_contracts()
    assert all(r.phase in ("forward", "backward", "double-backward") for r in contracts.bad_inputs
               if r.outcome == "raises")
    assert not [r for r in contracts.bad_inputs if r.tag == "ids:empty"]  # never an expected error
    for s in ("chainer.embed_id", "chainer.EmbedID", "espnet.embed_id", "espnet.EmbedID"):
        d = contracts.known_defect_for(s, "cpu", ("ids:empty",), "ValueError", "backward")
        assert d is not None and "18519" in d.reference, s
