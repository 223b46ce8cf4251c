"""harness/upstream/reproducer.py: a script is run in a folder of its own and its exit code and output come back;
the outputs script bisect probes with holds the subject's call on the case's exact inputs."""

from __future__ import annotations

import ast
import os

import pytest

from harness.core.cases import Case
from harness.upstream.reproducer import outputs_script, run_script

CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [6]})


def test_a_script_runs_in_its_own_folder_and_gives_its_code_and_output(tmp_path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import os, sys\nprint(os.getcwd() != sys.argv[1], sys.argv[2])\nsys.exit(3)\n")
    code, out = run_script(str(script), str(tmp_path), "hello")
    assert (code, out) == (3, "True hello")


def test_a_script_past_its_time_is_stopped_and_says_so(tmp_path) -> None:
    script = tmp_path / "slow.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    code, out = run_script(str(script), timeout=1)
    assert code == 2 and out.endswith("the script ran past 1 s and was stopped")


@pytest.mark.slow  # the script is run in a fresh interpreter to check its call: seconds
def test_the_outputs_script_holds_the_call_and_its_inputs(tmp_path) -> None:
    case = tmp_path / "case.json"
    case.write_text(CASE.to_json())
    w = outputs_script(str(case), "chainer.embed_id", str(tmp_path / "probe.py"))
    assert w.library == "chainer" and w.data and os.path.exists(w.data) and w.lines_of_code > 5
    text = (tmp_path / "probe.py").read_text()
    ast.parse(text)
    assert "embed_id" in text and "--save-outputs" in text and "import harness" not in text
