"""The command line (harness/cli.py): ``cases``, ``replay`` and the one-line errors of bad input.

Every call is ``python -m harness ...`` in a subprocess. Usage and set-up errors must exit 2 with a
single line on stderr that names the argument or value, and never a traceback.
(``contracts check`` is tested elsewhere.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.corpus_files import load_corpus, write_corpus
from harness.core.devices import CPU
from harness.judge import digest as digests
from harness.subjects.base import execute
from harness.subjects.registry import get_subject

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120
CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [40], "id_kind": "collision", "distinct": 2})


def harness(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def one_line_error(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    line = lines[0]
    assert line.startswith("harness: "), line
    for n in needles:
        assert n in line, (n, line)
    return line


# ---- cases ---------------------------------------------------------------------------------------
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_cases_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    args = ["cases", "--family", "embed", "--examples", "5"]
    for name, seed in (("f1", "3"), ("f2", "3"), ("f3", "4")):
        p = harness(*args, "--seed", seed, "--out", name, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert f"wrote 5 cases to {name}" in p.stderr
    f1, f2, f3 = ((tmp_path / n).read_bytes() for n in ("f1", "f2", "f3"))
    assert f1 == f2
    assert f1 != f3
    cases = load_corpus(str(tmp_path / "f1"))
    assert len(cases) == 5 and all(c.family == "embed" for c in cases)
    assert len(f1.splitlines()) == 5
    # Printed to stdout it is the same corpus, line for line.
    p = harness(*args, "--seed", "3")
    assert p.returncode == 0 and p.stdout.encode() == f1


def test_cases_bad_family_is_a_usage_error():
    p = harness("cases", "--family", "conv")
    assert p.returncode == 2 and "invalid choice: 'conv'" in p.stderr and "Traceback" not in p.stderr


# ---- replay --------------------------------------------------------------------------------------
def _printed_digests(stdout: str) -> dict[str, str]:
    out = {}
    for line in stdout.splitlines():
        m = re.match(r"\s+(\S+)\s+\S+\s+\(.*?\)\s+digest (\w+:[0-9a-f]{12})\s+(bit-identical|DIFFERS) over \d+", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def test_replay_reproduces_from_the_json_alone(tmp_path):
    path = tmp_path / "case.json"
    path.write_text(CASE.to_json())
    p = harness("replay", str(path), "--subject", "chainer.embed_id", "--repeats", "3", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert f"case {CASE.id} (embed), subject chainer.embed_id, device cpu, context default, 3 runs" in p.stdout
    assert "in worker processes" in p.stdout
    assert "statuses: ok x3" in p.stdout
    printed = _printed_digests(p.stdout)
    assert set(printed) == {"y", "grad.W", "grad2.gy"}, p.stdout
    assert "DIFFERS" not in p.stdout and p.stdout.count("bit-identical over 3") == 3 and "nothing differs" in p.stdout
    # The digests are those of the same run in this process: the JSON carried everything.
    here = execute(get_subject("chainer.embed_id"), Case.from_json(path.read_text()), CPU, get_context("default"))
    for name, d in printed.items():
        assert digests.short_digest(digests.digest(here.arrays[name])) == d, name  # names its algorithm
    assert p.stdout.count("oracle within tolerance") == 3 and "BEYOND TOLERANCE" not in p.stdout


def test_replay_shows_the_nondeterministic_control_differs(tmp_path):
    path = tmp_path / "case.json"
    path.write_text(CASE.to_json())
    p = harness("replay", str(path), "--subject", "control.nondeterministic", "--repeats", "6")
    assert p.returncode == 1, p.stderr  # the difference reproduced: exit 1, as diff does
    line = next(ln for ln in p.stdout.splitlines() if ln.strip().startswith("grad.W"))
    assert "DIFFERS over 6" in line and "n_diff" in line and "(0x" in line  # the values, with their bits
    assert "1 comparison(s) differ" in p.stdout


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_replay_picks_a_case_from_a_corpus(tmp_path):
    other = Case("embed", 12, {"vocab": 5, "width": 2, "ids_shape": [7]})
    corpus = tmp_path / "c.jsonl"
    write_corpus([other, CASE], str(corpus))
    p = harness("replay", str(corpus), "--case-id", CASE.id, "--subject", "espnet.embed_id", "--repeats", "2")
    assert p.returncode == 0, p.stderr
    assert f"case {CASE.id}" in p.stdout and "bit-identical over 2" in p.stdout
    one_line_error(harness("replay", str(corpus), "--subject", "espnet.embed_id"), "holds 2 cases", "--case-id")
    one_line_error(harness("replay", str(corpus), "--case-id", "000000000000", "--subject", "espnet.embed_id"),
                   "'000000000000'")


# ---- bad input ----------------------------------------------------------------------------------------
@pytest.fixture()
def case_file(tmp_path) -> Path:
    path = tmp_path / "case.json"
    path.write_text(CASE.to_json())
    return path


def test_bad_device(case_file):
    one_line_error(harness("replay", str(case_file), "--subject", "chainer.embed_id", "--device", "tpu"),
                   "device='tpu'")


def test_unknown_subject(case_file):
    one_line_error(harness("replay", str(case_file), "--subject", "chainer.nope"), "UnknownSubject",
                   "subject='chainer.nope'")


def test_missing_case_file(tmp_path):
    missing = tmp_path / "nowhere.json"
    one_line_error(harness("replay", str(missing), "--subject", "chainer.embed_id"), "does not exist", str(missing))


def test_unknown_context(case_file):
    one_line_error(harness("replay", str(case_file), "--subject", "chainer.embed_id", "--context", "warp9"),
                   "context='warp9'")


def test_zero_repeats(case_file):
    one_line_error(harness("replay", str(case_file), "--subject", "chainer.embed_id", "--repeats", "0"),
                   "repeats=0")


def test_malformed_case_files(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"family": "embed", "seed": ')
    one_line_error(harness("replay", str(bad_json), "--subject", "chainer.embed_id"), "CaseError", "not valid")
    bad_family = tmp_path / "fam.json"
    bad_family.write_text('{"family": "conv", "seed": 1, "spec": {}}')
    one_line_error(harness("replay", str(bad_family), "--subject", "chainer.embed_id"), "family='conv'")
    bad_spec = tmp_path / "spec.json"
    bad_spec.write_text('{"family": "embed", "seed": 1, "spec": {"vocab": 0, "width": 2, "ids_shape": [3]}}')
    one_line_error(harness("replay", str(bad_spec), "--subject", "chainer.embed_id"), "vocab=0")


def test_replay_on_gpu_without_one_is_a_one_line_error(case_file):
    from harness.core.devices import Device

    if Device("gpu", 0).available:
        pytest.skip("a GPU is present")
    p = harness("replay", str(case_file), "--subject", "chainer.embed_id", "--device", "gpu")
    # A device asked for by name that cannot run is an error with the reason, never a green "skipped".
    one_line_error(p, "device='gpu'", "no GPU")
    assert p.stdout == ""


def test_report_bad_arguments_are_one_line(tmp_path, case_file):
    corpus = tmp_path / "c.jsonl"
    write_corpus([CASE], str(corpus))
    common = ["report", "--corpus", str(corpus), "--subjects", "control.deterministic", "--devices", "cpu",
              "--contexts", "default", "--out", str(tmp_path / "out"), "--quiet", "--no-localize"]
    one_line_error(harness(*common, "--repeats", "0"), "repeats=0")
    one_line_error(harness(*common, "--fresh", "-1"), "fresh=-1")
    one_line_error(harness(*common, "--devices", "tpu"), "device='tpu'")  # the last --devices wins
    one_line_error(harness(*common, "--shard", "5/2"), "shard='5/2'")
    one_line_error(harness("report", "--resume", str(tmp_path / "nothing"), "--quiet"), "nothing to resume")
    assert not (tmp_path / "out" / "tasks.jsonl").exists()  # nothing ran
