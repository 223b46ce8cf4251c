"""The report as a person reads it: the verdict and the matrix on the first screen, no sideways scroll at
1400 px (in a real headless Chromium), escaped values, findings whose replay command reproduces them, and
retention of old run directories."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.execute.campaign import CampaignSettings
from harness.execute.driver import run_campaign
from harness.execute.relations import RELATIONS
from harness.generate.corpora import relation_cases
from harness.judge.findings import Origin
from harness.outputs import render, screenshot, tables
from harness.outputs.assemble import campaign_findings
from harness.subjects.registry import subjects_for

ROOT = Path(__file__).resolve().parents[1]
COLLIDE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [400], "id_kind": "collision", "distinct": 2})


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("render") / "run")
    embed = [c for c in relation_cases() if c.family == "embed"]
    run = run_campaign(d, [COLLIDE, *embed], subjects_for(["chainer.embed_id", "control.nondeterministic",
                                                           "control.deterministic", "oracle.embed"]),
                       [CPU], [get_context("default"), get_context("blas1")],
                       CampaignSettings(repeats=3, fresh=0, quiet=True), relations=[RELATIONS["order"]])
    frames: dict = {}
    found = campaign_findings(d, run.measures, run.records, run.cases, Origin(d))
    tables.write_report(run, environment={"gpu": {"available": False, "reason": "none here"}}, found=found,
                        frames=frames)
    return d, frames


def test_the_page_opens_with_the_verdict_and_the_matrix(report):
    d, frames = report
    page = Path(d, "summary.html").read_text()
    assert page.index('id="verdict"') < page.index('id="matrix"') < page.index("Findings (")
    assert frames["headline"] and all(line in page for line in map(lambda s: s.replace("'", "&#x27;"),
                                                                     frames["headline"]))
    md = Path(d, "summary.md").read_text()
    assert md.splitlines()[0] == "# Reproducibility report" and "## Verdicts" in md


@pytest.mark.skipif(screenshot.find_chromium() is None, reason="no chromium here (Debian: apt-get install chromium)")
def test_in_chromium_the_verdict_and_matrix_are_on_the_first_screen_without_sideways_scroll(report, tmp_path):
    d, _ = report
    m = screenshot.page_metrics(os.path.join(d, "summary.html"), width=1400, height=900)
    assert m["scrollWidth"] <= 1400, m
    assert 0 < m["verdictBottom"] <= 900 and 0 < m["matrixTop"] <= 900, m
    png = screenshot.screenshot(os.path.join(d, "summary.html"), str(tmp_path / "page.png"))
    assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_value_is_escaped():
    cells = pd.DataFrame([{"subject": "<script>alert(1)</script>", "role": "subject", "device": "cpu",
                           "context": "default", "relation": "", "verdict": "broken", "worst_ulp": 3,
                           "tensors": 1, "tensors_differing": 1, "error_ratio": None, "allowed": "",
                           "contract": "a|b\nc", "reason": ""}])
    findings = pd.DataFrame(columns=list(tables.FINDING_COLUMNS))
    page = render.summary_html(["x <b>y</b>"], cells, findings, [], pd.DataFrame({"key": ["k"], "value": ["<i>"]}),
                               "/tmp/<d>")
    assert "<script>alert" not in page and "&lt;script&gt;" in page and "<b>y</b>" not in page and "<i>" not in page
    md = render.summary_md(["a|b\nc"], cells, findings, [])
    assert "a\\|b c" in md


def test_every_findings_replay_command_reproduces_it(report):
    d, frames = report
    f = frames["findings"]
    kinds = set(f["kind"])
    assert {"not reproducible run to run", "not invariant"} <= kinds, kinds
    ran = 0
    for cmd in f.loc[f["kind"].isin(["not reproducible run to run", "not invariant"]), "replay"].head(4):
        argv = shlex.split(cmd)
        assert argv[1:3] == ["-m", "harness"]
        # the printed interpreter is this environment's (relative to the checkout); here, this test's own.
        p = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 1, (cmd, p.stdout[-800:], p.stderr[-800:])  # the difference reproduced
        ran += 1
    assert ran >= 2


def test_old_run_directories_are_pruned_and_nothing_else(tmp_path):
    base = tmp_path / "reports"
    runs = [f"2026120{i}T000000Z-{i}" for i in range(1, 6)]
    for r in runs:
        (base / r).mkdir(parents=True)
        (base / r / render.FINISHED).write_text("{}")  # finished reports (an unfinished one is never pruned)
    (base / "baselines").mkdir()
    (base / "README.md").write_text("x")
    (base / "latest").symlink_to(runs[0])  # the oldest is the latest's target: kept
    gone = render.prune_reports(str(base), keep=2)
    assert gone == runs[1:3]
    assert sorted(os.listdir(base)) == sorted(["README.md", "baselines", "latest", runs[0], *runs[3:]])
    with pytest.raises(Exception, match="keep=-1"):
        render.prune_reports(str(base), keep=-1)
