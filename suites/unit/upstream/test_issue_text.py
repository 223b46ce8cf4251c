"""The issue text: each library's template sections, the size bound, the note form, the runtime fields."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import SetupError
from harness.upstream.issue_text import MAX_CHARS, IssueFacts, issue_text, issue_title, recipe_facts, runtime_fields

_SCRIPT = """import numpy as np
import chainer
link = chainer.links.EmbedID(5, 4)
y = link(np.zeros((0,), np.int32)); y.grad = np.zeros((0, 4), np.float32); y.backward()
"""
_TRACEBACK = """versions: python 3.11.7, numpy 2.4.6, chainer 7.8.1
Traceback (most recent call last):
  File "/tmp/r/reproduce-embedid-empty.py", line 4, in <module>
  File "/v/lib/python3.11/site-packages/chainer/functions/connection/embed_id.py", line 73, in forward
    gy = gy.reshape(x.size, -1)
ValueError: cannot reshape array of size 0 into shape (0,newaxis)
REPRODUCED
"""
_ROOT = str(Path(__file__).resolve().parents[3])
_ENV = {"Platform": "Linux-6.1-x86_64", "Chainer": "7.8.1", "ChainerX": "not available", "NumPy": "2.4.6",
        "CuPy": "not available", "iDeep": "not available", "Python": "3.11.7", "CPU model": "AMD EPYC",
        "OPENBLAS_CORETYPE": "(unset)", "OpenBLAS core type": "SkylakeX", "BLAS threads": "2", "ESPnet": "202511"}


def _facts(**kw) -> IssueFacts:
    base = dict(library="chainer", title="EmbedID backward fails on an empty batch",
                description="`L.EmbedID` accepts an empty batch in its forward, but its backward raises.",
                expected="backward returns an all-zero W gradient", actual="ValueError in backward",
                script_name="reproduce-embedid-empty.py", script_text=_SCRIPT, output=_TRACEBACK, exit_code=1,
                diagnosis="the CPU backward runs gy.reshape(x.size, -1), which NumPy refuses for x.size == 0",
                reference="chainer/functions/connection/embed_id.py EmbedIDGrad.forward",
                data_name="reproduce-embedid-empty.npz", environment=_ENV,
                conditions={"device": "cpu", "dtype": "float32", "BLAS threads": "any"},
                patches=("numpy.sctypes", "pkg_resources"))
    base.update(kw)
    return IssueFacts(**base)


def _headings(text: str, pattern: str) -> list[str]:
    return re.findall(pattern, text, flags=re.M)


def test_a_chainer_issue_has_its_template_sections_in_order_and_what_a_maintainer_needs():
    text = issue_text(_facts())
    assert text.startswith("# EmbedID backward fails on an empty batch\n")
    assert _headings(text, r"^## (.+)$") == [
        "Description", "Expected behavior", "Actual behavior", "Conditions", "Code to reproduce",
        "Error messages, stack traces, or logs", "Diagnosis"]
    for field in ("Platform", "Chainer", "ChainerX", "NumPy", "CuPy", "iDeep", "CPU model", "OpenBLAS core type",
                  "BLAS threads"):
        assert f"- {field}: {_ENV[field]}" in text
    assert "- iDeep: not available" in text
    assert "File \"/v/lib/python3.11/site-packages/chainer/functions/connection/embed_id.py\", line 73" in text
    assert "Raised at `chainer/functions/connection/embed_id.py:73`" in text
    assert "'setuptools<70'" in text and "pip install --no-build-isolation chainer==7.8.1" in text
    assert "`numpy.sctypes`" in text and "`pkg_resources`" in text and "before `import chainer`" in text
    assert "gy.reshape(x.size, -1)" in text and "exit code 1" in text
    # the data by reference only; the script in full
    assert "`reproduce-embedid-empty.npz`" in text and _SCRIPT.strip() in text
    assert "espnet" not in text.lower()


def test_an_espnet_issue_follows_the_bug_report_template_and_says_where_the_module_lives():
    text = issue_text(_facts(library="espnet", recipe="espnet1.asr.decoder.bpe",
                             recipe_source="egs/librispeech/asr1/run.sh"))
    assert _headings(text, r"^\*\*(.+?)\*\*$") == [
        "Describe the bug", "Basic environments:", "Environments from `torch.utils.collect_env`:",
        "Task information:", "To Reproduce", "Error logs", "Diagnosis"]
    assert "espnet.nets.chainer_backend.deterministic_embed_id" in text and "ESPnet1" in text
    assert "pip install --no-deps espnet==202511" in text and "without torch" in text
    assert " - Recipe: espnet1.asr.decoder.bpe (egs/librispeech/asr1/run.sh)" in text and " - Task: ASR" in text
    assert "`espnet 202511`" in text and "pytorch version: not installed" in text
    assert "Expected: backward returns an all-zero W gradient" in text


def test_a_huge_output_is_cut_in_its_middle_and_the_text_says_so():
    head, tail = "FIRST LINE OF OUTPUT\n", "\nValueError: the last line of the traceback"
    huge = head + "x" * 40 + ("\n" + "y" * 100) * 3_000 + tail
    text = issue_text(_facts(output=huge))
    assert len(text) <= MAX_CHARS
    assert len(issue_text(_facts(output="short"))) < len(text)  # it was cut only as far as it had to be
    assert MAX_CHARS - len(text) < 200
    assert head in text and tail in text
    assert re.search(r"\[\.\.\. [\d,]+ characters of the output cut here", text)


def test_a_small_output_is_not_cut():
    text = issue_text(_facts())
    assert "cut here" not in text and _TRACEBACK.strip() in text


def test_a_behaviour_note_is_titled_as_one_and_quotes_the_contracts_reason_without_a_bugs_framing():
    reason = "contracts.toml line 58 (reproducible = false): GPU backward declares atomicAdd"
    for library in ("chainer", "espnet"):
        f = _facts(library=library, note=True, title="EmbedID's GPU backward differs run to run",
                   diagnosis=reason, expected="")
        text = issue_text(f)
        assert issue_title(f) == "Behaviour note: EmbedID's GPU backward differs run to run"
        assert text.startswith("# Behaviour note: ")
        assert f"> {reason}" in text
        for bug in ("Expected behavior", "Actual behavior", "Expected:", "Describe the bug", "Error logs",
                    "Error messages"):
            assert bug not in text
        assert "not a defect" in text or "not a bug" in text


def test_an_unknown_library_is_refused():
    with pytest.raises(ValueError, match="library='cupy'"):
        _facts(library="cupy")


def test_runtime_fields_of_this_venv_name_print_runtime_infos_fields_and_the_blas_from_a_child_only():
    env = {"PATH": os.environ.get("PATH", ""), "OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_NUM_THREADS": "1"}
    code = ("import json, sys; from harness.upstream.issue_text import runtime_fields; "
            f"got = runtime_fields(sys.executable, {env!r}); print(json.dumps([got, 'chainer' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=_ROOT)
    got, chainer_here = json.loads(out.stdout)
    assert not chainer_here  # the child imported Chainer; the caller did not
    assert list(got)[:6] == ["Platform", "Chainer", "ChainerX", "NumPy", "CuPy", "iDeep"]
    import numpy

    assert got["Chainer"] == "7.8.1" and got["NumPy"] == numpy.__version__
    assert got["iDeep"] == "not available"
    assert got["OPENBLAS_CORETYPE"] == "Haswell"
    assert got["OpenBLAS core type"] == "Haswell"  # the kernels OpenBLAS reports it picked
    assert got["BLAS threads"] == "1"
    assert got["CPU model"] and got["CPU model"] != "unknown"


def test_runtime_fields_follow_the_environment_given():
    env = {"PATH": os.environ.get("PATH", ""), "OPENBLAS_CORETYPE": "Sandybridge", "OPENBLAS_NUM_THREADS": "2"}
    got = runtime_fields(sys.executable, env)
    assert got["OpenBLAS core type"] == "Sandybridge" and got["BLAS threads"] == "2"


def test_runtime_fields_of_a_python_that_cannot_run_is_a_setup_error(tmp_path):
    with pytest.raises(SetupError, match="cannot report its runtime fields"):
        runtime_fields(str(tmp_path / "no-python"), {})


def test_a_cases_recipe_tag_names_the_recipe_and_its_source():
    name, source = recipe_facts(("real-scale", "recipe:espnet1.lm.word"))
    assert name == "espnet1.lm.word" and "lm_vocabsize=65000" in source
    assert recipe_facts(("ids:empty",)) == ("", "")
