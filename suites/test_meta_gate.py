"""Meta-tests: the gate can fail. Each check is shown failing on a planted problem (and passing without it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.cases import Case
from harness.judge.contracts import load_contracts
from harness.core.devices import CPU
from harness.core.errors import ContractViolation
from harness.outputs.gate import assert_no_violations, check_baseline
from harness.pytest_plugin import contract_violations

pytestmark = pytest.mark.meta
ROOT = Path(__file__).resolve().parents[1]
COLLIDE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [400], "id_kind": "collision", "distinct": 2})


def _contracts_with(tmp_path, extra: str):
    text = (ROOT / "contracts.toml").read_text() + "\n" + extra
    p = tmp_path / "contracts.toml"
    p.write_text(text)
    return load_contracts(p)


STRICT_CONTROL = """
[[contract]]
subject = "control.nondeterministic"
device = "cpu"
context = "blas1"
reproducible = true
across_processes = true
identical_across = []
oracle = "record"
reason = "meta-test: a must-be-reproducible contract on the positive control"
"""


def test_nondeterministic_control_under_strict_contract_fails_with_dossier(tmp_path):
    contracts = _contracts_with(tmp_path, STRICT_CONTROL)
    violations = contract_violations(contracts, "control.nondeterministic", COLLIDE, CPU, context="blas1",
                                     repeats=5)
    with pytest.raises(ContractViolation) as info:
        assert_no_violations(violations)
    msg = str(info.value)
    first = msg.splitlines()[0]
    # the first line (pytest's short summary) names subject, device, context, rule and tensor
    assert first.startswith("control.nondeterministic [cpu] blas1: broken -- reproducible") and "grad.W" in first
    assert len(msg.splitlines()) <= 40
    assert "Mismatched elements:" in msg and "Greatest ULP distance:" in msg
    assert "Actual: " in msg and " (0x" in msg  # the values at the worst index, with their bits
    assert COLLIDE.to_json() in msg
    assert "python -m harness replay" in msg and "--subject control.nondeterministic" in msg


def test_deterministic_control_under_the_same_contract_passes(tmp_path):
    contracts = _contracts_with(tmp_path, STRICT_CONTROL.replace("control.nondeterministic", "control.deterministic"))
    assert contract_violations(contracts, "control.deterministic", COLLIDE, CPU, context="blas1", repeats=5) == []


def test_missing_contract_line_is_a_failure_not_a_pass(tmp_path):
    contracts = load_contracts(ROOT / "contracts.toml")
    contracts = type(contracts)(contracts.path, tuple(c for c in contracts.contracts
                                                      if c.subject != "chainer.embed_id"), contracts.bad_inputs)
    case = Case("embed", 1, {"vocab": 5, "width": 3, "ids_shape": [4]})
    [v] = contract_violations(contracts, "chainer.embed_id", case, CPU)
    assert v.kind == "no contract" and "chainer.embed_id" in v.detail and v.measure.verdict == "broken"


def test_contracts_check_fails_on_unknown_subject(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text((ROOT / "contracts.toml").read_text() + """
[[contract]]
subject = "nosuch.subject"
device = "cpu"
context = "*"
reproducible = true
reason = "planted"
""")
    run = lambda p: subprocess.run([sys.executable, "-m", "harness", "contracts", "check", "--contracts", str(p)],  # noqa: E731
                                   capture_output=True, text=True, cwd=ROOT, timeout=120)
    good = run(ROOT / "contracts.toml")
    assert good.returncode == 0, good.stderr
    r = run(bad)
    assert r.returncode == 1
    assert "subject='nosuch.subject' is not registered" in r.stderr
    assert "Traceback" not in r.stderr


def test_contracts_check_fails_on_malformed_line(tmp_path):
    from harness.core.errors import ContractError

    p = tmp_path / "c.toml"
    p.write_text('version = 1\n[[contract]]\nsubject = "chainer.embed_id"\ndevice = "tpu"\nreason = "x"\n')
    with pytest.raises(ContractError, match="device='tpu' must be 'cpu' or 'gpu'"):
        load_contracts(p)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from harness.core.contexts import get_context
    from harness.execute.campaign import Campaign, CampaignSettings, plan
    from harness.subjects.registry import subjects_for

    d = str(tmp_path_factory.mktemp("meta") / "run")
    cases = [COLLIDE, Case("lstm", 3, {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [3, 2]})]
    camp = Campaign(d, CampaignSettings(repeats=2, fresh=1, quiet=True))
    camp.write_inputs(cases, {})
    subjects = subjects_for(["chainer.embed_id", "chainer.NStepLSTM", "oracle.embed", "oracle.lstm"])
    camp.run(plan(cases, subjects, [CPU], [get_context("default")]))
    return d


def test_baseline_mode_passes_against_itself(small_run):
    assert check_baseline(small_run, small_run, load_contracts()) == []


def test_baseline_mode_fails_on_a_planted_digest_change(small_run, tmp_path):
    base = tmp_path / "baseline"
    shutil.copytree(small_run, base)
    lines = (base / "tasks.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    victim = next(r for r in recs if r["subject"] == "chainer.NStepLSTM")
    name = sorted(victim["tensors"])[0]
    victim["tensors"][name]["digest"] = "0" * 64
    (base / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    violations = check_baseline(small_run, str(base), load_contracts())
    assert [(v.kind, v.subject, v.tensor) for v in violations] == [
        ("digest stable against the baseline", "chainer.NStepLSTM", name)]
    assert "0" * 64 in violations[0].dossier() and "baseline digest" in violations[0].dossier()
    with pytest.raises(ContractViolation, match="digest stable against the baseline"):
        assert_no_violations(violations)


def test_gate_command_exit_codes_and_junit(small_run, tmp_path):
    """`harness gate --baseline` exits 1 on a planted change (with a JUnit file), 0 without it."""
    corpus = os.path.join(small_run, "corpus.jsonl")
    base = tmp_path / "base"
    cmd = [sys.executable, "-m", "harness", "gate", "--devices", "cpu", "--corpus", corpus, "--repeats", "2",
           "--workers-repeats", "0", "--quiet"]
    r0 = subprocess.run(cmd + ["--out", str(base)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r0.returncode == 0, r0.stdout + r0.stderr
    recs = [json.loads(x) for x in (base / "tasks.jsonl").read_text().splitlines()]
    victim = next(r for r in recs if r["subject"] == "chainer.embed_id" and r["context"] == "default")
    victim["tensors"]["grad.W"]["digest"] = "f" * 64
    (base / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    junit = tmp_path / "gate.xml"
    r1 = subprocess.run(cmd + ["--out", str(tmp_path / "new"), "--baseline", str(base), "--junit", str(junit)],
                        capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r1.returncode == 1, r1.stdout + r1.stderr
    assert "digest stable against the baseline" in r1.stderr
    import xml.etree.ElementTree as ET

    suite = ET.parse(junit).getroot()
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert suite.tag == "testsuite" and "chainer.embed_id[cpu]::default" in failed
    r2 = subprocess.run(cmd[:4] + ["--contracts", str(tmp_path / "missing.toml")], capture_output=True, text=True,
                        cwd=ROOT, timeout=120)
    assert r2.returncode == 2 and "cannot be read" in r2.stderr


def test_flaky_divergence_is_a_contract_failure_with_the_original_example():
    """A property whose divergence does not reproduce while shrinking is still a failure (not a pass)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from harness.core.records import Measure
    from harness.outputs.gate import Violation
    from harness.pytest_plugin import assert_contract, contract_property

    calls = {"n": 0}

    @contract_property
    @settings(max_examples=20, derandomize=True, database=None)
    @given(st.integers(0, 10))
    def prop(k):
        calls["n"] += 1
        if calls["n"] == 3:  # diverges once, never again: what a racing atomic looks like to Hypothesis
            assert_contract([Violation(Measure(
                kind="repeat", case_id=COLLIDE.id, subject="control.nondeterministic", device="cpu",
                context="default", tensor="grad.W", n_diff=1, n_total=12, verdict="broken",
                rule="reproducible", contract="planted"), replay=f"echo '{COLLIDE.to_json()}' > case.json")])

    with pytest.raises(ContractViolation) as info:
        prop()
    msg = str(info.value)
    assert "did not reproduce while shrinking" in msg
    assert "Mismatched elements: 1 / 12 (8.3%)" in msg and COLLIDE.to_json() in msg


def test_xdist_workers_are_pinned_one_gpu_each():
    from harness.pytest_plugin import pin_xdist_worker_gpu

    env = {"PYTEST_XDIST_WORKER": "gw5"}
    assert pin_xdist_worker_gpu(env, count=4) == "1" and env["CUDA_VISIBLE_DEVICES"] == "1"
    assert pin_xdist_worker_gpu({"PYTEST_XDIST_WORKER": "gw1"}, count=1) is None  # one GPU: shared
    assert pin_xdist_worker_gpu({}, count=4) is None  # not an xdist worker
    kept = {"PYTEST_XDIST_WORKER": "gw0", "CUDA_VISIBLE_DEVICES": "3"}
    assert pin_xdist_worker_gpu(kept, count=4) is None and kept["CUDA_VISIBLE_DEVICES"] == "3"
