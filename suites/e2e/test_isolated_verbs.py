"""replay, localize and shrink run every subject call in worker or child processes: a subject that segfaults,
hangs, or ends its process (``sys.exit(0)``, ``os._exit(3)``) is a row or a one-line error with the right exit
code, never the verb's own death, never exit 0 ("nothing differs") for a run that did not finish, and never
counted as a difference (every run raising the same way is exit 3)."""

from __future__ import annotations

import pytest

from harness.core.cases import Case

CASE = Case("embed", 3, {"vocab": 5, "width": 3, "ids_shape": [6]})
PLUGINS = ("--subject-plugin", "suites.plugins.misbehaving:SUBJECTS", "--subject-plugin",
           "suites.plugins.exits:SUBJECTS")


@pytest.fixture()
def case_file(tmp_path):
    p = tmp_path / "case.json"
    p.write_text(CASE.to_json())
    return str(p)


def _no_traceback(r) -> None:
    assert "Traceback" not in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("subject,extra,shows", [
    ("misbehaving.segfault", (), "crashed"),
    ("misbehaving.hang", ("--timeout", "3"), "timeout"),
    ("exits.sys_exit_0", (), "crashed"),
    ("exits.os_exit_3", (), "crashed"),
])
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_replay_of_a_subject_that_dies_in_every_run_is_exit_3_never_a_difference(harness, case_file, subject, extra,
                                                                               shows):
    r = harness("replay", case_file, "--subject", subject, "--repeats", "1", *PLUGINS, *extra)
    _no_traceback(r)
    assert r.returncode == 3, (r.returncode, r.stdout[-1500:], r.stderr[-1500:])
    last = r.stdout.splitlines()[-1]
    assert shows in r.stdout and last.startswith("every run raised the same way") and "differ" not in last.split(":")[0]
    assert "comparison(s) differ" not in r.stdout


@pytest.mark.parametrize("subject,why", [
    ("misbehaving.segfault", "SIGSEGV"),
    ("exits.sys_exit_0", "ended the process (SystemExit(0))"),
    ("exits.os_exit_3", "exited (code 3)"),
])
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_localize_of_a_subject_that_dies_is_one_line_exit_2(harness, case_file, subject, why):
    r = harness("localize", case_file, "--subject", subject, *PLUGINS)
    _no_traceback(r)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("harness: error: ") and why in lines[-1], lines


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_localize_of_a_hang_is_killed_at_its_timeout(harness, case_file):
    r = harness("localize", case_file, "--subject", "misbehaving.hang", "--timeout", "5", *PLUGINS)
    _no_traceback(r)
    assert r.returncode == 2 and "did not finish in time" in r.stderr


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_shrink_of_a_crash_keeps_the_crash(harness, tmp_path, case_file):
    r = harness("shrink", case_file, "--subject", "misbehaving.segfault", "--kind", "error", "--error",
                "WorkerCrash in run", "--quiet", "--out", str(tmp_path / "min.json"), *PLUGINS)
    _no_traceback(r)
    assert r.returncode == 0, r.stdout + r.stderr
    mini = Case.from_json((tmp_path / "min.json").read_text())
    assert mini.spec["ids_shape"][0] < 6 and mini.spec["width"] < 3  # it crashes on any case: the smallest
    again = harness("replay", str(tmp_path / "min.json"), "--subject", "misbehaving.segfault", *PLUGINS)
    assert again.returncode == 3 and "SIGSEGV" in again.stdout  # the crash reproduced: every run, one way
