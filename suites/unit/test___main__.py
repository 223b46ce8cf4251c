"""``python -m harness`` (harness/__main__.py): the program runs the command line and exits with its code."""

from __future__ import annotations


def test_the_program_exits_with_the_command_lines_code(harness) -> None:
    ok = harness("--help")
    assert ok.rc == 0, ok.stderr
    assert "usage:" in ok.stdout and "report" in ok.stdout
    bad = harness("no-such-verb")
    assert bad.rc == 2, (bad.rc, bad.stderr)
    assert "Traceback" not in bad.stderr and "no-such-verb" in bad.stderr
