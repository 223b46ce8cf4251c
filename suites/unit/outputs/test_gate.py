"""Meta-tests: the gate can fail. Each check is shown failing on a planted problem (and passing without it)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.core.errors import ComparisonFailure, ContractViolation
from harness.core.records import VERDICT_ORDER
from harness.execute.campaign import CampaignOptions
from harness.execute.driver import run_campaign
from harness.execute.inprocess import measure_here
from harness.judge.contracts import load_contracts
from harness.judge.tolerance import assert_within_oracle, compare_oracle
from harness.outputs import results_table
from harness.outputs.gate import assert_no_violations, check_baseline, gate_violations
from harness.pytest_plugin import contract_violations
from harness.subjects.registry import SUBJECTS, subjects_for

pytestmark = pytest.mark.meta
ROOT = Path(__file__).resolve().parents[3]
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
    # the printed command runs the case file it names, written where it says
    assert "-m harness replay .harness-cases/cases/" in msg and "--subject control.nondeterministic" in msg
    written = Path(".harness-cases") / "cases" / f"{COLLIDE.id}.json"  # relative to where pytest runs, as printed
    assert written.read_text().strip() == COLLIDE.to_json()


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
    from harness.execute.campaign import Campaign, CampaignOptions
    from harness.execute.plan import plan
    from harness.subjects.registry import subjects_for

    d = str(tmp_path_factory.mktemp("meta") / "run")
    cases = [COLLIDE, Case("lstm", 3, {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [3, 2]})]
    camp = Campaign(d, CampaignOptions(repeats=2, fresh=1, quiet=True))
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
    victim["tensors"][name]["digest"] = "xxh3_128:" + "0" * 32  # another digest of the same algorithm
    (base / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    violations = check_baseline(small_run, str(base), load_contracts())
    assert [(v.kind, v.subject, v.tensor) for v in violations] == [
        ("digest stable against the baseline", "chainer.NStepLSTM", name)]
    assert "0" * 32 in violations[0].dossier() and "baseline digest" in violations[0].dossier()
    with pytest.raises(ContractViolation, match="digest stable against the baseline"):
        assert_no_violations(violations)


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_gate_command_exit_codes_and_junit(small_run, tmp_path):
    """`harness gate --baseline` exits 1 on a planted change (with a JUnit file), 0 without it."""
    corpus = os.path.join(small_run, "corpus.jsonl")
    base = tmp_path / "base"
    cmd = [sys.executable, "-m", "harness", "gate", "--devices", "cpu", "--corpus", corpus, "--repeats", "2",
           "--fresh", "0", "--quiet"]
    r0 = subprocess.run(cmd + ["--out", str(base)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r0.returncode == 0, r0.stdout + r0.stderr
    recs = [json.loads(x) for x in (base / "tasks.jsonl").read_text().splitlines()]
    victim = next(r for r in recs if r["subject"] == "chainer.embed_id" and r["context"] == "default")
    victim["tensors"]["grad.W"]["digest"] = "xxh3_128:" + "f" * 32
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


ZERO_TOLERANCE = """
[[contract]]
subject = "chainer.embed_id"
device = "cpu"
context = "blas2"
reproducible = true
across_processes = true
identical_across = []
oracle = "within"
tolerance = { float32 = [0.0, 0.0] }
reason = "meta-test: a stated tolerance is what is enforced (no summation bound or normwise rule unless listed)"
"""


def test_a_stated_zero_tolerance_is_enforced(tmp_path):
    contracts = _contracts_with(tmp_path, ZERO_TOLERANCE)
    violations = contract_violations(contracts, "chainer.embed_id", COLLIDE, CPU, context="blas2", repeats=2)
    oracle = [v for v in violations if v.measure.kind == "oracle"]
    assert oracle and any(v.tensor == "grad.W" for v in oracle), [v.headline() for v in violations]
    assert all("up to 0 + 0*|expected| allowed" in v.measure.allowed for v in oracle)
    # the same case under the shipped default-context line passes: the looser rules apply there
    assert contract_violations(load_contracts(), "chainer.embed_id", COLLIDE, CPU, repeats=2) == []


def _zero_tolerance_reproducer(tmp_path) -> list[str]:
    contracts = _contracts_with(tmp_path, ZERO_TOLERANCE)
    violations = contract_violations(contracts, "chainer.embed_id", COLLIDE, CPU, context="blas2", repeats=2)
    assert violations and {v.measure.kind for v in violations} == {"oracle"}, [v.headline() for v in violations]
    argv = shlex.split(violations[0].replay)
    assert argv[argv.index("--contracts") + 1] == str(tmp_path / "contracts.toml")
    # the dossier's other judging command too: a shrink judged by the shipped file would find nothing to shrink
    commands = _dossier_commands(violations[0].dossier())
    assert set(commands) == {"Reproduce", "Shrink"}, violations[0].dossier()
    assert commands["Reproduce"] == argv
    assert commands["Shrink"][commands["Shrink"].index("--contracts") + 1] == str(tmp_path / "contracts.toml")
    return argv


def _dossier_commands(dossier: str) -> dict[str, list[str]]:
    """The commands a dossier prints (``Reproduce:``, ``Shrink:``, ``Localize:``), by their label (the first
    of each where the text holds several)."""
    out: dict[str, list[str]] = {}
    for line in dossier.splitlines():
        label, _, rest = line.partition(": ")
        if label in ("Reproduce", "Shrink", "Localize"):
            out.setdefault(label, shlex.split(rest))
    return out


def test_the_in_process_gates_reproducer_names_the_contracts_file_that_judged(tmp_path):
    """A float32 sum of 400 colliding ids is not the float64 oracle's to the bit: a zero tolerance fails it,
    the shipped one does not; the printed command must judge by the file the gate judged by."""
    _zero_tolerance_reproducer(tmp_path)
    shipped = contract_violations(load_contracts(), "chainer.embed_id", COLLIDE, CPU, context="blas2", repeats=2)
    assert shipped == []  # (its commands, when it fails, name no file: the shipped one is every verb's default)


@pytest.mark.slow  # two harness processes: CI runs them, `make test` leaves them out
def test_the_in_process_gates_reproducer_reproduces_and_would_not_without_its_contracts(tmp_path):
    argv = _zero_tolerance_reproducer(tmp_path)
    run = lambda a: subprocess.run([sys.executable, *a[1:]], capture_output=True, text=True,  # noqa: E731
                                   timeout=300)  # from this directory, where the case file was written
    again = run(argv)
    assert again.returncode == 1 and "BEYOND TOLERANCE" in again.stdout, again.stdout + again.stderr
    i = argv.index("--contracts")
    without = run(argv[:i] + argv[i + 2:])  # judged by the shipped tolerance: within, nothing differs
    assert without.returncode == 0 and "nothing differs" in without.stdout, without.stdout + without.stderr


@pytest.fixture
def embed_id_registered_here():
    """chainer.embed_id replaced, as a pytest plugin or conftest would, by code of this module (outside the
    harness and outside --subject-plugin) that runs the shipped one; the shipped one put back after."""
    import dataclasses

    from harness.subjects.registry import get_subject, register

    shipped = get_subject("chainer.embed_id")

    def run(case, device, context, rec):  # noqa: ANN001 - the shipped embed_id, but this module's code
        shipped.run(case, device, context, rec)

    register(dataclasses.replace(shipped, run=run), replace=True)
    try:
        yield
    finally:
        register(shipped, replace=True)


def test_a_subject_registered_outside_subject_plugin_gets_no_command_but_the_reason(tmp_path, embed_id_registered_here):
    contracts = _contracts_with(tmp_path, ZERO_TOLERANCE)
    violations = contract_violations(contracts, "chainer.embed_id", COLLIDE, CPU, context="blas2", repeats=2)
    assert violations and all(v.replay == "" for v in violations)
    dossier = violations[0].dossier().splitlines()
    assert _dossier_commands(violations[0].dossier()) == {}  # no command that would run the shipped subject
    [why] = [ln for ln in dossier if ln.startswith("No command reproduces it: ")]
    assert f"module {__name__!r}" in why and "--subject-plugin" in why


@pytest.mark.slow  # a pytest session and a harness process: CI runs them, `make test` leaves them out
def test_a_pytest_gate_with_a_subject_plugin_prints_a_command_that_loads_it(tmp_path):
    # from a directory of its own (where the failing case is written), the gate's suite named by its path
    gate = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x",
            str(ROOT / "suites" / "gate" / "test_lstm.py"), "-k", "test_lstm_contract and NStepLSTM and not Bi"]
    env = {**os.environ, "HARNESS_PROFILE": "ci", "HARNESS_PLANTED": "scale"}
    r = subprocess.run(gate + ["--subject-plugin", "suites.plugins.planted_lstm:SUBJECTS"], capture_output=True,
                       text=True, cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    # every command of the first dossier loads the plug-in, and does what it says: the replay shows the planted
    # failure (exit 1), the shrink reproduces it and writes a minimal case (exit 0)
    commands = _dossier_commands("\n".join(ln.lstrip("E").strip() for ln in r.stdout.splitlines()))
    assert {"Reproduce", "Shrink"} <= set(commands), r.stdout
    expect = {"Reproduce": (1, "BEYOND TOLERANCE"), "Shrink": (0, "minimal case: ")}
    for label, (code, says) in expect.items():
        argv = commands[label]
        assert argv[argv.index("--subject-plugin") + 1] == "suites.plugins.planted_lstm:SUBJECTS", label
        done = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, cwd=tmp_path,
                              env={**env, "PYTHONPATH": str(ROOT)}, timeout=300)
        assert done.returncode == code and says in done.stdout, (label, done.stdout + done.stderr)
    bad = subprocess.run(gate + ["--subject-plugin", "no.such.module:SUBJECTS"], capture_output=True, text=True,
                         cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert bad.returncode == 4 and "--subject-plugin: subject-plugin='no.such.module:SUBJECTS'" in bad.stderr, \
        bad.stdout + bad.stderr


def test_gate_fails_when_the_positive_control_cannot_fire(small_run):
    """small_run has no control subject at all: a gate over it could not have caught nondeterminism."""
    from harness.outputs.gate import gate_campaign

    found = gate_campaign(small_run, load_contracts())
    control = [v for v in found if v.kind == "the positive control must diverge"]
    assert control and "control.nondeterministic did not run" in control[0].detail
    assert gate_campaign(small_run, load_contracts(), control=False) == []


def test_a_baseline_sharing_no_task_is_a_failure(small_run, tmp_path):
    from harness.core.contexts import get_context
    from harness.execute.campaign import CampaignOptions
    from harness.execute.driver import run_campaign
    from harness.subjects.registry import subjects_for

    other = str(tmp_path / "other")
    run_campaign(other, [Case("embed", 99, {"vocab": 4, "width": 2, "ids_shape": [5]})],
                 subjects_for(["chainer.embed_id"]), [CPU], [get_context("default")],
                 CampaignOptions(repeats=2, fresh=0, quiet=True))
    [v] = check_baseline(small_run, other, load_contracts())
    assert v.kind == "the baseline must share tasks with this run" and "shares no task" in v.detail


def test_junit_marks_cells_that_did_not_run_as_skipped(tmp_path):
    import xml.etree.ElementTree as ET

    from harness.core.contexts import get_context
    from harness.core.devices import Device
    from harness.execute.campaign import CampaignOptions
    from harness.execute.driver import run_campaign
    from harness.outputs.gate import write_junit
    from harness.subjects.registry import subjects_for

    run = run_campaign(str(tmp_path / "r"), [COLLIDE], subjects_for(["chainer.embed_id"]), [CPU, Device("gpu", 0)],
                       [get_context("default")], CampaignOptions(repeats=2, fresh=0, quiet=True))
    if any(r.device == "gpu:0" and r.status != "skipped" for r in run.records.values()):
        pytest.skip("a GPU is present: its cell ran")
    path = tmp_path / "gate.xml"
    write_junit(str(path), run.records, [], 1.0)
    suite = ET.parse(path).getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    skipped = cases["chainer.embed_id[gpu:0]::default"].find("skipped")
    assert skipped is not None and skipped.get("message").startswith("no GPU")
    assert cases["chainer.embed_id[cpu]::default"].find("skipped") is None
    assert suite.get("skipped") == "1" and suite.get("failures") == "0"


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_a_broken_contracts_dossier_is_short_and_its_replay_command_reproduces_it(tmp_path):
    """The campaign gate on a contract that calls the positive control reproducible: at most 40 lines per
    dossier, the first naming the rule, and the printed command, run as printed, exits 1 (reproduced)."""

    from harness.core.corpus_files import write_corpus

    corpus = tmp_path / "one.jsonl"
    write_corpus([COLLIDE], str(corpus))
    strict = (ROOT / "contracts.toml").read_text().replace(
        'subject = "control.nondeterministic"\ndevice = "cpu"\ncontext = "*"\nreproducible = false',
        'subject = "control.nondeterministic"\ndevice = "cpu"\ncontext = "*"\nreproducible = true', 1)
    assert "reproducible = true" in strict
    (tmp_path / "strict.toml").write_text(strict)
    r = subprocess.run([sys.executable, "-m", "harness", "gate", "--devices", "cpu", "--corpus", str(corpus),
                        "--contracts", str(tmp_path / "strict.toml"), "--out", str(tmp_path / "run"), "--quiet",
                        "--repeats", "3", "--fresh", "0"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    dossier = r.stderr.split("\n\n")[0].splitlines()
    assert len(dossier) <= 40 and dossier[0].startswith("FINDING 1 of ")
    assert "[contract broken] control.nondeterministic [cpu]" in dossier[0]
    assert "not reproducible run to run of parameter gradients (reproducible: " in dossier[0]
    assert any(line.startswith("Worst: ") and "grad.W" in line for line in dossier)
    cmd = next(line for line in dossier if line.startswith("Reproduce: ")).removeprefix("Reproduce: ")
    argv = shlex.split(cmd)
    assert argv[1:3] == ["-m", "harness"] and "--contracts" in argv
    again = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert again.returncode == 1 and "DIFFERS" in again.stdout, again.stdout + again.stderr


def test_a_baseline_of_another_digest_algorithm_is_refused_in_one_line(small_run, tmp_path):
    from harness.core.errors import InvalidArgument

    base = tmp_path / "sha-baseline"
    shutil.copytree(small_run, base)
    recs = [json.loads(x) for x in (base / "tasks.jsonl").read_text().splitlines()]
    for r in recs:  # a baseline written when digests were plain SHA-256
        for t in r["tensors"].values():
            if t.get("digest"):
                t["digest"] = "ab" * 32
    (base / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(InvalidArgument, match="digests of different algorithms cannot be compared") as info:
        check_baseline(small_run, str(base), load_contracts())
    assert "\n" not in str(info.value)


# One judge per verdict: the report, the gate and ``replay`` give the same verdict on the same tensor, and
# each ``assert_*`` raises exactly when its pure function says so.

CASES = [
    Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [400], "id_kind": "collision", "distinct": 2}),
    Case("lstm", 3, {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [3, 2]}),
]
SUBJECT_NAMES = ["chainer.embed_id", "control.nondeterministic", "control.deterministic", "chainer.NStepLSTM",
            "oracle.embed", "oracle.lstm"]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("judge") / "run")
    run = run_campaign(d, CASES, subjects_for(SUBJECT_NAMES), [CPU], [get_context("default"), get_context("blas1")],
                       CampaignOptions(repeats=3, fresh=0, quiet=True), contracts=load_contracts())
    return run


def test_report_gate_and_replay_give_the_same_verdict(campaign):
    contracts = load_contracts()
    run = campaign
    results = results_table.results_frame(run)
    broken = {(v.measure.case_id, v.measure.subject, v.measure.context, v.measure.tensor, v.measure.kind)
              for v in gate_violations(run.directory, run.measures)}
    checked = 0
    for rec in run.records.values():
        if SUBJECTS[rec.subject].role == "oracle" or rec.status != "ok":
            continue
        case = next(c for c in CASES if c.id == rec.case_id)
        others = ["default"] if rec.context != "default" else []
        here = measure_here(contracts, rec.subject, case, CPU, rec.context, 3, contexts=others)
        mine = {(m.tensor, m.kind, m.other): m for m in run.measures
                if (m.case_id, m.subject, m.context) == (rec.case_id, rec.subject, rec.context)}
        for m in here.measures:
            theirs = mine.get((m.tensor, m.kind, m.other))
            assert theirs is not None, (rec.key, m.tensor, m.kind)
            # replay's (in-process) verdict is the campaign's
            assert m.verdict == theirs.verdict, (rec.key, m.tensor, m.kind, m.verdict, theirs.verdict)
            # the gate fails on exactly the broken ones
            in_gate = (rec.case_id, rec.subject, rec.context, m.tensor, m.kind) in broken
            assert in_gate == (theirs.verdict in ("broken", "error")), (rec.key, m.tensor, m.kind)
            checked += 1
        # the report's row verdict is the worst of the tensor's measures
        for name in rec.tensors:
            row = results[(results["key"] == rec.key) & (results["tensor"] == name)]
            verdicts = [mm.verdict for (t, _, _), mm in mine.items() if t in (name, "")]
            worst = max(verdicts, key=lambda v: VERDICT_ORDER[v] if v != "skipped" else -1)
            assert row["verdict"].iloc[0] == worst, (rec.key, name)
    assert checked >= 30, checked
    # the positive control did diverge, and its contract allows it: a finding, not a violation
    assert any(m.subject == "control.nondeterministic" and m.kind == "repeat" and m.identical is False
               for m in run.measures)


OPTIONS = st.fixed_dictionaries({}, optional={
    "atol": st.floats(0, 1e-2), "rtol": st.floats(0, 1e-2), "n_terms": st.integers(1, 500),
    "normwise": st.booleans(), "text": st.booleans(), "source": st.text(max_size=5),
    "bound": st.floats(0, 1e-3).map(lambda b: np.full((4, 3), b)),
})


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(options=OPTIONS, noise=st.floats(1e-9, 1e-1), seed=st.integers(0, 2**16))
def test_assert_within_oracle_raises_exactly_when_compare_oracle_says_not_within(options, noise, seed):
    rng = np.random.default_rng(seed)
    expected = rng.standard_normal((4, 3))
    actual = (expected + noise * rng.standard_normal((4, 3))).astype(np.float32)
    result = compare_oracle("t", actual, expected, **options)
    if result.within_tolerance:
        assert assert_within_oracle("t", actual, expected, **options) == result
    else:
        with pytest.raises(ComparisonFailure) as info:
            assert_within_oracle("t", actual, expected, **options)
        assert str(info.value) == result.message()


def test_no_role_is_decided_by_a_name_prefix():
    pattern = re.compile(r"""startswith\(\s*\(?\s*["'](oracle|control)\.""")
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "harness").rglob("*.py"))
            if p.name != "registry.py"
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not hits, hits
