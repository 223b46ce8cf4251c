"""Attacks on the harness itself: hostile plug-ins at load and in ``accepts()``, names that break
figures, ``--keep`` racing a running report, interrupted writes that leave torn lines in the middle of the record
files, a full disk, a closed pipe, a stray ``SystemExit``. Each ends in one line with exit 2, an error row, or a
finished report, and loses nothing; none of these asserts on wall-clock time.

Each runs ``python -m harness`` as a user would; campaigns are tiny (``--examples 1``, one subject, one context).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.record_files import record_lines, remove_packed

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300
PLUGIN = "suites.plugins.attacks"
SMALL = ("--devices", "cpu", "--contexts", "default", "--fresh", "0", "--repeats", "1", "--examples", "1",
         "--relations", "none", "--no-shrink", "--no-localize", "--quiet")


def harness(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None,
            timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_PLUGIN_TIMEOUT": "10",
                                                **(env or {})})


def one_line_exit_2(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("harness: error: "), p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def jsonl(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in record_lines(str(path)) if ln.strip()]


# ---- plug-ins at load: one line, exit 2 -------------------------------------------------------------------------
@pytest.mark.parametrize("obj, needle", [
    ("RAISING", "factory attacked"), ("EXITING", "SystemExit(0)"), ("ENDLESS", "more than"),
    ("DECLARED_BOOL", "declared="), ("INT_NAME", "name=3"), ("DUPLICATE", "two subjects"),
    ("BAD_FAMILY", "family="), ("BAD_DEVICES", "devices="),
])
def test_a_hostile_plugin_object_is_one_line_at_load(obj, needle):
    one_line_exit_2(harness("subjects", "--subject-plugin", f"{PLUGIN}:{obj}"), "PluginError", needle)


@pytest.mark.parametrize("mode, needle", [("exit0", "SystemExit(0)"), ("os_exit", "exit code 0"),
                                          ("segv", "SIGSEGV"), ("hang", "did not answer within 2 s")])
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_a_plugin_that_ends_crashes_or_hangs_at_import_is_one_line(mode, needle):
    # A plug-in that hangs at import never answers, so a short limit gives the same line on any machine load.
    limit = {"HARNESS_PLUGIN_TIMEOUT": "2"} if mode == "hang" else {}
    p = harness("subjects", "--subject-plugin", f"{PLUGIN}:OK", env={"ATTACK_AT_IMPORT": mode, **limit})
    one_line_exit_2(p, "PluginError", needle)


def test_a_plugin_printing_a_forged_answer_at_import_still_loads_as_itself():
    p = harness("subjects", "--json", "--subject-plugin", f"{PLUGIN}:OK", env={"ATTACK_AT_IMPORT": "print"})
    assert p.returncode == 0, p.stderr
    assert "attack.ok" in {s["name"] for s in json.loads(p.stdout)}


# ---- plug-ins in accepts(): an error row per case, the report finishes ------------------------------------------
@pytest.mark.parametrize("obj", ["ACCEPTS_RAISE", "ACCEPTS_EXIT", "ACCEPTS_OS_EXIT", "ACCEPTS_SEGV", "ACCEPTS_HANG",
                                 "ACCEPTS_INTERRUPT"])
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_a_failing_accepts_is_an_error_row_and_the_report_finishes(obj, tmp_path):
    name = "attack." + obj.lower()
    out = tmp_path / "run"
    # A hang costs the plug-in limit: 5 s (the load itself, an interpreter importing the harness, takes under one).
    limit = {"HARNESS_PLUGIN_TIMEOUT": "5"} if obj == "ACCEPTS_HANG" else {}
    p = harness("report", "--subject-plugin", f"{PLUGIN}:{obj}", "--subjects", name, "--out", str(out), *SMALL,
                env=limit)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr
    mine = [t for t in jsonl(out / "tasks.jsonl") if t["subject"] == name]
    assert mine, "the plug-in subject got no task"
    for t in mine:  # never run: accepts() could not say, and the row says why
        assert t["status"] == "error" and t["errors"][0]["type"] == "PluginError", t
    if obj == "ACCEPTS_HANG":  # one hang is enough: the other cases are not asked (each would cost the timeout)
        messages = [t["errors"][0]["message"] for t in mine]
        hung = [m for m in messages if m.startswith("accepts() did not answer within 5 s")]
        not_asked = [m for m in messages if m.startswith("accepts() not asked: it hung once")]
        assert len(hung) == 1 and len(not_asked) == len(mine) - 1 >= 1, messages
    assert (out / "summary.html").exists()


def test_a_name_with_tex_specials_does_not_break_the_figures():
    import pandas as pd

    from harness.outputs.figures import plot_divergence, plot_error_ratio

    name = "adv.$\\foo{$"
    png = plot_divergence(pd.DataFrame({"subject": [name, "b"], "axis": ["repeat", "repeat"], "worst_ulp": [3, 0]}))
    assert png.startswith(b"\x89PNG")
    png = plot_error_ratio(pd.DataFrame({"subject": [name], "error_ratio": [0.5], "case_size": [10]}))
    assert png.startswith(b"\x89PNG")


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_a_systemexit_when_the_report_localizes_is_not_the_reports_exit(tmp_path):
    """The subject ends any process it is localized in with SystemExit(0): the report still finishes, writes
    everything, and says the localization did not happen."""
    out = tmp_path / "run"
    args = [a for a in SMALL if a != "--no-localize"]
    args[args.index("--repeats") + 1] = "3"
    p = harness("report", "--subject-plugin", f"{PLUGIN}:LOCALIZE_EXIT", "--subjects", "attack.localize_exit",
                "--out", str(out), *args)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (out / "findings.csv").exists() and (out / "timings.json").exists()
    assert "not localized" in p.stdout + (out / "summary.md").read_text()


# ---- --keep never deletes a running or unfinished run ----------------------------------------------------------
def test_prune_keeps_locked_and_unfinished_runs(tmp_path):
    from harness.outputs.retention import FINISHED, prune_reports

    base = tmp_path / "reports"
    names = [f"2020010{i}T000000Z-{i}" for i in range(1, 6)]
    for n in names:
        (base / n).mkdir(parents=True)
        (base / n / FINISHED).write_text("{}")
        (base / n / ".lock").write_text("")
    (base / names[1] / FINISHED).unlink()  # running or interrupted: not finished
    with open(base / names[2] / ".lock", "a+") as held:  # a report (a resume) holds it now
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        gone = prune_reports(str(base), keep=1)
    assert gone == [names[0], names[3]]
    assert sorted(os.listdir(base)) == [names[1], names[2], names[4]]


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_keep_0_while_another_report_runs_leaves_the_running_one_whole(tmp_path):
    """A report that started earlier (its directory locked, not finished) survives a second report's --keep."""
    running = tmp_path / "reports" / "20200101T000000Z-1"
    running.mkdir(parents=True)
    (running / "corpus.jsonl").write_text("")
    with open(running / ".lock", "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        p = harness("report", "--subjects", "chainer.embed_id", "--keep", "0", *SMALL, cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-2000:]
        assert (running / "corpus.jsonl").exists()
    runs = [n for n in os.listdir(tmp_path / "reports") if n != "latest"]
    assert len(runs) == 2, runs  # the running one and the new one (keep 0 keeps the newest)


# ---- kill -9 twice: torn lines in the middle; --resume finishes every task --------------------------------------
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_torn_lines_anywhere_are_rerun_and_the_files_rewritten_clean(tmp_path):
    run = tmp_path / "run"
    p = harness("report", "--subjects", "chainer.embed_id", "--out", str(run), *SMALL)
    assert p.returncode == 0, p.stderr[-2000:]
    keys = [t["key"] for t in jsonl(run / "tasks.jsonl")]
    assert len(keys) >= 6
    # What two kill -9 leave: a record cut short (ended by the first resume's newline), more records, another
    # cut short at the end; the runs of the torn tasks are on disk, their records not.
    lines = record_lines(str(run / "tasks.jsonl"))
    torn = lines[:2] + [lines[2][: len(lines[2]) // 2] + "\n"] + lines[3:5] + [lines[5][:40]]
    remove_packed(str(run / "tasks.jsonl"))
    (run / "tasks.jsonl").write_text("".join(torn))
    (run / "timings.json").unlink()
    remove_packed(str(run / "measures.jsonl"))
    p = harness("report", "--resume", str(run), "--quiet", "--no-shrink", "--no-localize")
    assert p.returncode == 0, p.stderr[-2000:]
    again = jsonl(run / "tasks.jsonl")
    assert sorted(t["key"] for t in again) == sorted(keys)  # every task once: the torn ones ran again
    runs = jsonl(run / "runs.jsonl")
    assert sorted(r["key"] for r in runs) == sorted(keys)  # one run each (--repeats 1): none written twice


# ---- a full disk: one line, exit 2, and what finished resumes --------------------------------------------------
def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_a_full_disk_is_one_line_and_the_run_resumes(tmp_path):
    fs = tmp_path / "small"
    if not _tmpfs(fs, "400k"):
        pytest.skip("mounting a 400 kB tmpfs needs root and mount(8) (not available here)")
    try:
        run = fs / "run"
        args = list(SMALL)
        args[args.index("--examples") + 1] = "30"  # more than 400 kB of arrays
        p = harness("report", "--subjects", "chainer.embed_id", "--keep-arrays", "all", "--out", str(run), *args)
        one_line_exit_2(p, "disk full", "--resume")
        assert (run / "campaign.json").exists() and (run / "corpus.jsonl").exists()
        subprocess.run(["mount", "-o", "remount,size=512m", str(fs)], check=True)
        p = harness("report", "--resume", str(run), "--quiet", "--no-shrink", "--no-localize")
        assert p.returncode == 0, p.stderr[-2000:]
        keys = [t["key"] for t in jsonl(run / "tasks.jsonl")]
        assert len(keys) == len(set(keys)) and (run / "summary.html").exists()
    finally:
        subprocess.run(["umount", "-l", str(fs)], capture_output=True)


# ---- a closed pipe: no traceback --------------------------------------------------------------------------------
def test_a_reader_that_left_is_not_a_traceback():
    proc = subprocess.Popen([sys.executable, "-m", "harness", "subjects"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    proc.stdout.close()  # like `| head` that has already exited
    err = proc.stderr.read().decode()
    rc = proc.wait(timeout=TIMEOUT)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert rc != 0  # the listing did not reach its reader: never "success"


# ---- inputs checked before work, an error that is not a difference (tools/attacks_inputs.py) -------------------
_CATEGORIES = ("case-arrays:bits-short:replay", "case-arrays:dtype-object:shrink", "corpus-arrays:inject-names-nothing",
               "case-lstm:bidirectional-on-uni:replay", "case-lstm:xs-widths-short:localize",
               "replay-raises:every-run", "audit-field:digest-other-algorithm:merge",
               "audit-field:version-float:compare",
               "audit-arrays:pickled", "audit-name:mathtext", "contracts-contradiction:identical-across-itself",
               "contracts-contradiction:tag-nothing-generates")


@pytest.mark.parametrize("name", _CATEGORIES)
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_an_attack_of_each_input_category_is_refused_in_one_line_or_handled(name):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import attacks
    finally:
        sys.path.pop(0)
    attack = next(a for a in attacks.attacks() if a.name == name)
    cls, why = attacks.run_one(attack, TIMEOUT)
    assert cls in ("clear", "handled"), (name, cls, why)
    if attack.expect == "error":
        assert cls == "clear" and why.startswith("harness: error: "), why


# ---- the files around a verb (tools/attacks_files.py): each attack refused in one line, nothing overwritten ----
@pytest.mark.slow
@pytest.mark.parametrize("group", ["output-over-input", "os-limit", "mode-ignores", "output-limit"])
def test_the_attacks_on_outputs_and_limits_are_each_refused_or_handled(group):
    sys.path.insert(0, str(ROOT))
    from tools.attacks import attacks, run_one

    todo = [a for a in attacks() if a.name.startswith(group + ":")]
    assert todo
    outcomes = {a.name: run_one(a, TIMEOUT) for a in todo}
    bad = {k: v for k, v in outcomes.items() if v[0] not in ("clear", "handled")}
    assert not bad, bad


# ---- rules, environment, options, resumes, value shapes, files every verb reads (tools/attacks_rules.py) ----
@pytest.mark.slow
@pytest.mark.parametrize("group", ["contracts-never", "env-var", "option-used", "resume-option", "value-shape",
                                   "output-over-read"])
def test_each_category_of_rules_environment_and_options_is_refused_or_run_as_asked(group):
    sys.path.insert(0, str(ROOT))
    from tools.attacks import attacks, run_one
    from tools.attacks_rules import GROUPS

    assert group in GROUPS
    todo = [a for a in attacks() if a.name.startswith(group + ":")]
    assert todo
    outcomes = {a.name: run_one(a, TIMEOUT) for a in todo}
    bad = {k: v for k, v in outcomes.items() if v[0] not in ("clear", "handled")}
    assert not bad, bad
    if group != "option-used":  # (the others are refusals: one line naming the value)
        assert all(v[0] == "clear" and v[1].startswith("harness: error: ") for v in outcomes.values()), outcomes


# ---- what leaves the harness: a claim that is not true, or that no script can check (tools/attacks_upstream.py)
@pytest.mark.slow
@pytest.mark.parametrize("group", ["export-false-claim", "export-cannot"])
def test_an_export_never_writes_a_claim_that_does_not_hold_and_refuses_what_it_cannot_check(group):
    sys.path.insert(0, str(ROOT))
    from tools.attacks import attacks, run_one
    from tools.attacks_upstream import GROUPS

    assert group in GROUPS
    todo = [a for a in attacks() if a.name.startswith(group + ":")]
    assert todo
    outcomes = {a.name: run_one(a, TIMEOUT) for a in todo}
    assert all(v[0] == "clear" for v in outcomes.values()), outcomes
    said = "harness export: the claim does not reproduce here" if group == "export-false-claim" else "harness: error: "
    assert all(v[1].startswith(said) for v in outcomes.values()), outcomes
