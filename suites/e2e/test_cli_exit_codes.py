"""The command line a CI user can trust: exit codes, one-line refusals before any work, run directories.

Every check runs ``python -m harness ...`` in a real subprocess. A usage or set-up error must be exit 2
with one ``harness: error:`` line naming the argument and the value, no traceback, and nothing run;
``compare --exit-code`` and ``replay`` say "changed" / "differs" with exit 1.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.cases import Case
from harness.core.corpus_files import write_corpus
from harness.core.devices import Device
from harness.core.record_files import record_file
from harness.core.records import repair_jsonl

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120
CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [40], "id_kind": "collision", "distinct": 2})
GPU_HERE = Device("gpu", 0).available
VERBS = ["env", "subjects", "cases", "replay", "report", "contracts", "contracts check", "gate", "audit",
         "compare", "merge", "localize"]
SMALL = ["--subjects", "control.deterministic", "--contexts", "default", "--repeats", "2",
         "--fresh", "0", "--quiet", "--no-localize"]


def harness(*args: str, cwd: Path = ROOT, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


def refused(p: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2, one ``harness: error:`` line holding every needle, no traceback."""
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("harness: error: "), lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "one.jsonl"
    write_corpus([CASE], str(path))
    return path


@pytest.fixture()
def case_file(tmp_path) -> Path:
    path = tmp_path / "case.json"
    path.write_text(CASE.to_json())
    return path


# ---- help ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_help_exits_0_and_ends_with_its_exit_codes(verb):
    p = harness(*verb.split(), "--help")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    head, sep, tail = p.stdout.rpartition("Exit codes:")
    assert sep and head, p.stdout
    codes = [ln for ln in tail.splitlines() if ln.strip()]
    # Nothing after the exit codes but the codes themselves ("  0  ...", "  2  ...").
    assert codes and all(ln.startswith("  ") and ln.split()[0].isdigit() for ln in codes), tail
    assert any(ln.split()[0] == "2" for ln in codes), tail


def test_every_option_of_every_verb_has_help_text():
    import argparse

    from harness.cli import build_parser

    def walk(parser: argparse.ArgumentParser, path: str):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{path} {name}".strip())
            elif not isinstance(action, argparse._HelpAction):
                yield path, action

    missing = [f"{verb}: {a.option_strings or a.dest}" for verb, a in walk(build_parser(), "")
               if verb and not (a.help or "").strip()]
    assert not missing, missing


_NO_NUMPY = """
import contextlib, io, json, sys
from harness.cli import build_parser
seen = {}
for argv in json.loads(sys.argv[1]):
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as exc:
        seen[" ".join(argv)] = [exc.code, "numpy" in sys.modules]
print(json.dumps(seen))
"""


def test_help_and_parse_time_refusals_import_no_numpy():
    """--help and a value the parser refuses cost an interpreter and argparse, not NumPy and the campaign
    (a user's typo, and the many refusals these suites check, answer in a tenth of a second)."""
    argvs = [[*verb.split(), "--help"] for verb in VERBS] + [
        ["report", "--devices", "tpu"], ["report", "--repeats", "0"], ["gate", "--devices", "gpu:x"],
        ["replay", "nope.json", "--subject", "chainer.embed_id"], ["audit", "--contexts", "nope", "--out", "a.json"]]
    p = subprocess.run([sys.executable, "-c", _NO_NUMPY, json.dumps(argvs)], cwd=ROOT, capture_output=True,
                       text=True, timeout=TIMEOUT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout)
    assert len(seen) == len(argvs), seen  # every one ended in the parser: help (0) or a refusal (2)
    assert {code for code, _ in seen.values()} == {0, 2}, seen
    assert not [a for a, (_, numpy) in seen.items() if numpy], seen


def test_top_level_help_speaks_to_users():
    p = harness("--help")
    assert p.returncode == 0 and "Nothing imports" not in p.stdout
    assert "same bits" in p.stdout and "python -m harness report" in p.stdout


# ---- devices -----------------------------------------------------------------------------------------
@pytest.mark.skipif(GPU_HERE, reason="a GPU is usable here: asking for one is not an error")
@pytest.mark.parametrize("argv", [
    ["report", "--devices", "gpu"], ["gate", "--devices", "gpu"], ["gate", "--devices", "gpu:0"],
    ["audit", "--devices", "gpu", "--out", "{tmp}/a.json"],
    ["replay", "{case}", "--subject", "chainer.embed_id", "--device", "gpu"],
    ["localize", "{case}", "--subject", "chainer.embed_id", "--device", "gpu"],
])
def test_a_gpu_asked_for_by_name_but_absent_is_exit_2_with_the_reason(argv, tmp_path, case_file):
    argv = [a.format(tmp=tmp_path, case=case_file) for a in argv]
    p = harness(*argv, *(["--out", str(tmp_path / "run")] if argv[0] in ("report", "gate") else []))
    line = refused(p, "gpu", "GPU")
    from harness.core.devices import gpu_reason

    assert gpu_reason() in line  # the reason, as the device layer gives it
    assert not (tmp_path / "run").exists() and not (tmp_path / "a.json").exists()  # nothing ran


def test_a_gpu_index_that_does_not_exist_is_refused_on_any_machine(tmp_path):
    p = harness("report", "--devices", "cpu,gpu:99", "--out", str(tmp_path / "run"))
    refused(p, "devices='cpu,gpu:99'", "gpu:99 is not usable")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_devices_all_runs_what_is_here_and_says_what_it_skipped(tmp_path, corpus):
    out = tmp_path / "run"
    p = harness("report", "--corpus", str(corpus), "--devices", "all", "--out", str(out), *SMALL)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    notes = [ln for ln in p.stderr.splitlines() if ln.startswith("harness: note: ")]
    if GPU_HERE:
        assert not any("skipping gpu" in ln for ln in notes), notes
    else:
        [note] = [ln for ln in notes if "skipping gpu:0" in ln]
        assert "devices='all'" in note and "no GPU" in note, note
        # ... and the skipped GPU is a visible row of the report, with its reason, not a silent absence.
        import pandas as pd

        rows = pd.read_csv(out / "results.csv.gz")
        gpu = rows[rows["device"] == "gpu:0"]
        assert len(gpu) and set(gpu["status"]) == {"skipped"}, gpu


@pytest.mark.parametrize("text", ["", ",", "tpu"])
def test_empty_or_unknown_devices_are_refused(text, tmp_path):
    refused(harness("report", "--devices", text, "--out", str(tmp_path / "run")), f"{text!r}")


# ---- arguments, checked before any work ------------------------------------------------------------
@pytest.mark.parametrize("flag,value,needle", [
    ("--timeout", "nan", "timeout=nan"), ("--timeout", "inf", "timeout=inf"), ("--timeout", "-1", "timeout=-1"),
    ("--examples", "-5", "examples=-5"), ("--repeats", "0", "repeats=0"), ("--subjects", "", "subjects=''"),
    ("--subjects", "chainer.nope", "subject='chainer.nope'"), ("--contexts", "warp9", "context='warp9'"),
    ("--shard", "x/y", "shard='x/y'"), ("--shard", "3/2", "shard='3/2'"),
    ("--corpus", "/nonexistent/c.jsonl", "corpus='/nonexistent/c.jsonl'"),
])
def test_report_refuses_bad_values_before_any_work(flag, value, needle, tmp_path):
    out = tmp_path / "run"
    refused(harness("report", flag, value, "--out", str(out), "--quiet"), needle)
    assert not out.exists()


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_unwritable_outputs_are_refused_before_any_work(tmp_path, corpus):
    afile = tmp_path / "afile"
    afile.write_text("x")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        for argv, needle in [
            (["report", "--out", str(afile)], "is an existing file"),
            (["report", "--out", str(afile / "sub")], "is a file"),
            (["gate", "--devices", "cpu", "--junit", str(tmp_path)], "is a directory"),
            (["gate", "--devices", "cpu", "--junit", str(afile / "gate.xml")], "is a file"),
            (["audit", "--devices", "cpu", "--corpus", str(corpus), "--out", str(tmp_path)], "is a directory"),
            (["cases", "--out", str(afile / "c.jsonl")], "is a file"),
        ]:
            refused(harness(*argv), needle, repr(argv[-1]))
        if os.geteuid() != 0 or not os.access(ro, os.W_OK):  # root writes anywhere: the probe would pass
            refused(harness("report", "--out", str(ro / "run")), "cannot be written")
        else:  # ... so the probe must really have written there, and left nothing behind
            assert not list(ro.iterdir())
    finally:
        ro.chmod(0o755)
    assert afile.read_text() == "x"


def test_a_bad_baseline_is_exit_2_before_the_campaign(tmp_path):
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "tasks.jsonl").write_text('{}\n{"key": "k"}\n')
    for base, needle in [(tmp_path / "nowhere", "does not exist"), (not_a_run, "holds no tasks.jsonl"),
                         (torn, "tasks.jsonl:1")]:
        out = tmp_path / f"run-{base.name}"
        p = harness("gate", "--devices", "cpu", "--baseline", str(base), "--out", str(out), "--quiet")
        refused(p, "baseline", needle)
        assert not out.exists()  # no campaign started


# ---- run directories ------------------------------------------------------------------------------------
def _tasks_bytes(run: Path) -> bytes:
    """The task records of a run as stored (a finished report keeps them packed: tasks.jsonl.xz)."""
    return Path(str(record_file(str(run / "tasks.jsonl")))).read_bytes()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, corpus) -> Path:
    out = tmp_path_factory.mktemp("runs") / "done"
    p = harness("report", "--corpus", str(corpus), "--devices", "cpu", "--out", str(out), *SMALL)
    assert p.returncode == 0, p.stderr
    return out


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_an_existing_non_empty_out_is_refused_unless_resume(finished_run, corpus):
    before = _tasks_bytes(finished_run)
    p = harness("report", "--corpus", str(corpus), "--devices", "cpu", "--out", str(finished_run), *SMALL)
    refused(p, f"out={str(finished_run)!r}", "non-empty", "--resume")
    assert _tasks_bytes(finished_run) == before  # nothing mixed in
    # The same flags with --resume: allowed (nothing left to do).
    p = harness("report", "--corpus", str(corpus), "--devices", "cpu", "--resume", str(finished_run), *SMALL)
    assert p.returncode == 0, p.stderr


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_a_finished_report_resumed_judges_what_it_judged(tmp_path):
    # The report prunes repetition 0's arrays to its findings' worst tensors; a resume measures again, and
    # before the pruned tasks ran again every oracle and relation cell of this run turned "not judged".
    import csv

    from harness.generate.corpora import anchor_cases

    corpus = tmp_path / "embed.jsonl"
    write_corpus([c for c in anchor_cases() if c.family == "embed"][:3], str(corpus))
    out = tmp_path / "run"
    args = ["--corpus", str(corpus), "--devices", "cpu", "--subjects", "chainer.embed_id", "--contexts", "default",
            "--repeats", "2", "--fresh", "0", "--quiet", "--no-localize", "--no-shrink"]
    p = harness("report", *args, "--out", str(out))
    assert p.returncode in (0, 1), p.stderr

    def verdicts() -> list[tuple[str, ...]]:
        with open(out / "cells.csv", newline="") as f:
            return sorted((r["subject"], r["context"], r["relation"], r["verdict"]) for r in csv.DictReader(f))

    before = verdicts()
    judged = [v for v in before if v[3] not in ("not judged", "skipped")]
    assert len(judged) >= 3 and any(v[2] for v in judged), before  # the oracle's cells and a relation's
    from harness.execute.campaign import load_tasks

    named = [r.array_file for r in load_tasks(str(out)).values() if r.array_file]
    assert len([f for f in named if not (out / "arrays" / f).exists()]) >= len(named) // 2  # pruned
    p = harness("report", "--resume", str(out), "--quiet", "--no-localize", "--no-shrink")
    assert p.returncode in (0, 1), p.stderr
    assert verdicts() == before


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_resume_with_contradicting_flags_names_every_differing_field(finished_run, tmp_path):
    other = tmp_path / "other.jsonl"
    write_corpus([Case("embed", 12, {"vocab": 5, "width": 2, "ids_shape": [7]})], str(other))
    before = _tasks_bytes(finished_run)
    p = harness("report", "--resume", str(finished_run), "--corpus", str(other), "--subjects",
                "control.nondeterministic", "--repeats", "3", "--timeout", "7", "--quiet", "--no-localize")
    line = refused(p, "contradict its campaign.json", "--corpus", "--subjects", "--repeats", "--timeout")
    assert "--devices" not in line and "--contexts" not in line  # not given: not named
    assert _tasks_bytes(finished_run) == before


def test_garbage_campaign_json_or_an_empty_task_line_is_one_line(finished_run, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(finished_run, bad)
    (bad / "campaign.json").write_text("{not json")
    refused(harness("report", "--resume", str(bad), "--quiet"), "campaign.json", "not valid JSON")
    (bad / "campaign.json").write_text((finished_run / "campaign.json").read_text())
    repair_jsonl(str(bad / "tasks.jsonl"))  # a finished report keeps it packed: plain again, as a resume makes it
    first = (bad / "tasks.jsonl").read_text().splitlines()[0]
    with open(bad / "tasks.jsonl", "a") as f:
        f.write("{}\n" + first + "\n")
    refused(harness("report", "--resume", str(bad), "--quiet"), "tasks.jsonl:", "field 'key' is missing")


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_a_second_run_into_a_locked_directory_is_refused_naming_the_holder(finished_run, tmp_path):
    # The lock is a real flock held by this test process, exactly as a running report holds it.
    locked = tmp_path / "locked"
    shutil.copytree(finished_run, locked)
    with open(locked / ".lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        refused(harness("report", "--resume", str(locked), "--quiet"), "in use by another harness run",
                f"pid {os.getpid()}")
    # Released: the resume goes ahead (nothing left to do).
    p = harness("report", "--resume", str(locked), "--quiet", "--no-localize")
    assert p.returncode == 0, p.stderr


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_a_running_report_holds_the_lock(tmp_path, corpus):
    out = tmp_path / "busy"
    cmd = [sys.executable, "-m", "harness", "report", "--corpus", str(corpus), "--devices", "cpu",
           "--subjects", "misbehaving.hang", "--subject-plugin", "suites.plugins.misbehaving:SUBJECTS",
           "--contexts", "default", "--repeats", "1", "--fresh", "0", "--timeout", "60",
           "--out", str(out), "--quiet", "--no-localize"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if (out / "campaign.json").exists() and (out / ".lock").exists() and \
                    (out / ".lock").read_text().strip() == str(proc.pid):
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read()
        refused(harness("report", "--resume", str(out), "--quiet"), f"pid {proc.pid}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the report and its worker: one session we started
        proc.wait(30)


def test_cases_writes_a_readable_corpus_atomically(tmp_path):
    out = tmp_path / "c.jsonl"
    p = harness("cases", "--family", "embed", "--examples", "2", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert out.stat().st_mode & 0o777 == 0o644
    assert [x.name for x in tmp_path.iterdir()] == ["c.jsonl"]  # no temp file left
    refused(harness("cases", "--examples", "-1", "--out", str(tmp_path / "d.jsonl")), "examples=-1")
    assert not (tmp_path / "d.jsonl").exists()


# ---- exit codes of findings -------------------------------------------------------------------------------
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_replay_exits_1_on_a_difference_and_0_when_bit_identical(case_file):
    differs = harness("replay", str(case_file), "--subject", "control.nondeterministic", "--repeats", "6")
    assert differs.returncode == 1, differs.stdout + differs.stderr
    assert "DIFFERS over 6" in differs.stdout and "Traceback" not in differs.stderr
    same = harness("replay", str(case_file), "--subject", "control.deterministic", "--repeats", "3")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "DIFFERS" not in same.stdout and "bit-identical over 3" in same.stdout


@pytest.fixture(scope="module")
def audits(tmp_path_factory, corpus) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("audits")
    a = d / "A.json"
    p = harness("audit", "--corpus", str(corpus), "--devices", "cpu", "--subjects", "control.deterministic",
                "--out", str(a), "--quiet")
    assert p.returncode == 0, p.stderr
    data = json.loads(a.read_text())
    entry = next(e for e in data["entries"] if e["tensors"])
    name = sorted(entry["tensors"])[0]
    old = entry["tensors"][name]["digest"]
    entry["tensors"][name]["digest"] = old[:-1] + ("0" if old[-1] != "0" else "1")  # (the hex, not the name)
    b = d / "B.json"
    b.write_text(json.dumps(data, indent=1, sort_keys=True))
    return a, b


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_compare_exit_code_is_0_same_1_changed_2_error(audits, tmp_path):
    a, b = audits
    same = harness("compare", str(a), str(a), "--exit-code")
    assert same.returncode == 0, same.stderr
    assert "compare: same:" in same.stderr
    changed = harness("compare", str(a), str(b), "--exit-code")
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "compare: changed:" in changed.stderr and "Traceback" not in changed.stderr
    # Without the flag a successful comparison is 0, changed or not.
    assert harness("compare", str(a), str(b)).returncode == 0
    refused(harness("compare", str(a), str(tmp_path / "missing.json"), "--exit-code"), "missing.json")


READOUT_CASE = Case("lstm", 5, {"n_layers": 1, "in_size": 16384, "hidden": 1, "lengths": [1],
                                "dtype": "float64", "w_scale": 0.01})


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_replay_contexts_compares_two_contexts_and_exits_1_when_they_differ(tmp_path):
    # control.blas_readout: a float64 dot product of K=16384 that OpenBLAS splits over its threads.
    path = tmp_path / "readout.json"
    path.write_text(READOUT_CASE.to_json())
    plugin = ["--subject-plugin", "suites.plugins.pipeline_control:SUBJECTS"]
    p = harness("replay", str(path), "--subject", "control.blas_readout", *plugin, "--contexts", "blas1,blas2",
                "--repeats", "2")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "compared with blas1" in p.stdout
    # each context alone is reproducible; blas2 differs from blas1
    assert "DIFFERS vs context blas1" in p.stdout and "bit-identical over 2" in p.stdout
    # The index-ordered sum does not care about BLAS threads: the same two contexts give exit 0.
    case = tmp_path / "case.json"
    case.write_text(CASE.to_json())
    same = harness("replay", str(case), "--subject", "control.deterministic", "--contexts", "blas1,blas2",
                   "--repeats", "2")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "DIFFERS" not in same.stdout and same.stdout.count("bit-identical") >= 3
    refused(harness("replay", str(path), "--subject", "control.blas_readout", *plugin, "--contexts", "blas1"),
            "contexts='blas1'", "two contexts")


# ---- fuzz: any value of these options is exit 2 with one line, or accepted (never a traceback) ----------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_NUMBERISH = st.one_of(_TEXT, st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e309", "1", "2/2", "0/0", "1/0",
                                                "gpu", "gpu:-1", "cpu,,", "all", " "]),
                       st.integers(-10**6, 10**6).map(str), st.floats(allow_nan=True).map(str))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flag=st.sampled_from(["--timeout", "--repeats", "--fresh", "--examples", "--shard", "--devices",
                             "--subjects", "--contexts", "--corpus", "--seed"]), value=_NUMBERISH)
def test_fuzzed_report_values_are_one_line_errors(flag, value, tmp_path_factory, capsys):
    """In-process (fast): ``--out`` at an existing file is checked last, so a value that passes its own
    check still ends in exit 2 before any work; a bad value must be refused first, in one line."""
    from harness.cli import main

    afile = tmp_path_factory.mktemp("fuzz") / "afile"
    afile.write_text("x")
    capsys.readouterr()
    try:
        code = main(["report", f"{flag}={value}", "--out", str(afile), "--quiet"])
    except SystemExit as exc:  # argparse: a value of the wrong type
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, (flag, value, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("harness: error: "), (flag, value, err)
    assert "Traceback" not in err


#: Every verb that runs one case on one subject reads it through the same check (replay, localize, shrink).
_CASE_VERBS = {"replay": (), "localize": (), "shrink": ("--kind", "error", "--max-runs", "2")}


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
@pytest.mark.parametrize("verb", sorted(_CASE_VERBS))
def test_an_oversized_case_or_one_of_another_family_is_refused_before_work(tmp_path, verb):
    extra = _CASE_VERBS[verb]
    huge = tmp_path / "huge.json"
    from harness.core.cost import estimate, gib

    big = Case("embed", 0, {"vocab": 5, "width": 3, "ids_shape": [30000, 30000]})
    huge.write_text(big.to_json())
    refused(harness(verb, str(huge), "--subject", "chainer.embed_id", *extra),
            f"case {big.id} needs about {gib(estimate(big).peak)} at its peak",
            "max-case-bytes")
    small = tmp_path / "small.json"
    small.write_text(CASE.to_json())
    refused(harness(verb, str(small), "--subject", "chainer.embed_id", "--max-case-bytes", "10", *extra),
            "over the limit of 10 bytes")
    lstm = tmp_path / "lstm.json"
    lstm.write_text(Case("lstm", 0, {"n_layers": 1, "in_size": 2, "hidden": 2, "lengths": [2]}).to_json())
    refused(harness(verb, str(lstm), "--subject", "chainer.embed_id", *extra), "is a lstm case", "takes embed cases")
