"""``replay`` offers the export command where a difference or an error reproduces: the command it prints, read back as
the command line reads it, is the reproducer replay itself ran."""

from __future__ import annotations

import pytest

from harness import cli
from harness.core.cases import Case
from harness.judge.reproducer import Reproducer, split_command

CASE = Case("embed", 3, {"vocab": 5, "width": 3, "ids_shape": [6]})
PLUGIN = "suites.plugins.misbehaving:SUBJECTS"


@pytest.mark.slow  # a whole harness process tree
def test_replay_prints_the_export_command_of_what_reproduces(harness, tmp_path):
    case = tmp_path / "case.json"
    case.write_text(CASE.to_json())
    argv = ["replay", str(case), "--subject", "misbehaving.segfault", "--subject-plugin", PLUGIN, "--repeats", "1",
            "--context", "blas1"]
    r = harness(*argv)
    assert r.returncode == 3, r.stderr[-1500:]  # every run crashed the same way: an error, not a difference
    lines = r.stdout.splitlines()
    assert lines[-1].startswith("every run raised the same way")  # the verdict stays the last line
    exports = [ln.removeprefix("export: ") for ln in lines if ln.startswith("export: ")]
    assert len(exports) == 1, r.stdout
    env, words = split_command(exports[0])
    assert words[0] == "export" and words[-2:] == ["--out", "reproduce-case.py"]
    back = Reproducer.from_options("export", vars(cli.build_parser().parse_args(words)), env=env)
    ran = Reproducer.from_options("replay", vars(cli.build_parser().parse_args(argv)))
    assert back == ran.for_verb("export") and back.contexts == ("blas1",)


@pytest.mark.slow
def test_replay_prints_no_export_command_where_nothing_differs(harness, tmp_path):
    case = tmp_path / "case.json"
    case.write_text(CASE.to_json())
    r = harness("replay", str(case), "--subject", "chainer.embed_id", "--repeats", "2")
    assert r.returncode == 0 and "export: " not in r.stdout and r.stdout.splitlines()[-1] == "nothing differs"
