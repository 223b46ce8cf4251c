"""A subject's bad output is a finding on its row, never the end of the campaign or of the report."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.core.cases import Case
from harness.core.corpus_files import write_corpus

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "suites.plugins.misbehaving:SUBJECTS"
CASES = [Case("embed", 1, {"vocab": 5, "width": 3, "ids_shape": [6]}),
         Case("embed", 2, {"vocab": 4, "width": 2, "ids_shape": [3, 2]})]


def _report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", "report", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad")
    corpus = d / "c.jsonl"
    write_corpus(CASES, str(corpus))
    out = d / "run"
    p = _report("--corpus", str(corpus), "--subjects",
                "misbehaving.object_output,misbehaving.wrong_shape,misbehaving.nan,oracle.embed", "--devices", "cpu",
                "--contexts", "default", "--subject-plugin", PLUGIN, "--out", str(out), "--quiet", "--repeats", "2",
                "--fresh", "0", "--no-localize", "--relations", "none")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    return out


def _results(run: Path) -> pd.DataFrame:
    with gzip.open(run / "results.csv.gz", "rt") as f:
        return pd.read_csv(f, keep_default_na=False)


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_an_object_dtype_output_is_an_error_row(bad_run):
    r = _results(bad_run)
    rows = r[r["subject"] == "misbehaving.object_output"]
    assert len(rows) == len(CASES) and (rows["status"] == "error").all() and (rows["verdict"] == "error").all()
    assert rows["error"].str.startswith("BadOutput in transfer: output 'y' has dtype object").all()


def test_a_wrong_shape_and_all_nan_outputs_are_judged_not_fatal(bad_run):
    r = _results(bad_run)
    for subject in ("misbehaving.wrong_shape", "misbehaving.nan"):
        rows = r[r["subject"] == subject]
        assert len(rows) == 2 * len(CASES) and (rows["status"] == "ok").all()
        # beyond any tolerance (shape mismatch; NaN against numbers): broken, with the ULP maximum recorded
        assert (rows["verdict"] == "broken").all() and (rows["within_tolerance"].astype(str) == "False").all()
        assert (rows["oracle_max_ulp"].astype(str) == str(2**64 - 1)).all()
    for name in ("summary.html", "summary.md", "findings.csv", "cells.csv"):
        assert (bad_run / name).stat().st_size > 0


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_resume_of_a_finished_bad_run_writes_the_same_report(bad_run):
    before = _results(bad_run)
    p = _report("--resume", str(bad_run), "--quiet", "--no-localize")
    assert p.returncode == 0, p.stderr
    after = _results(bad_run)
    assert before[["key", "tensor", "verdict"]].equals(after[["key", "tensor", "verdict"]])
