"""One planted regression (``suites.plugins.planted_lstm``: NStepLSTM's ``hy`` scaled by 1.01) fails the gate as
a handful of headline findings, in its summary and on the page built from its run; the findings beneath them
are one per context, each with its own reproducer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.judge import findings as F

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "suites.plugins.planted_lstm:SUBJECTS"
FAILING = [c.value for c in F.Classification if c.fails]


@pytest.mark.slow  # a whole gate campaign: CI runs it, `make test` leaves it out
def test_a_regression_planted_in_one_place_is_at_most_five_headlines_in_the_gate_and_on_the_page(tmp_path):
    from harness.execute.measure_pass import load_measures
    from harness.outputs import page_view, render, report_files, tables

    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "harness", "gate", "--devices", "cpu", "--out", str(out), "--quiet",
                        "--repeats", "2", "--fresh", "0", "--no-shrink", "--subject-plugin", PLUGIN],
                       capture_output=True, text=True, cwd=ROOT, timeout=900,
                       env={**os.environ, "HARNESS_PROFILE": "ci", "HARNESS_PLANTED": "scale"})
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]
    found = F.loads((out / "findings.json").read_text())
    failing = [f for f in found if f.fails]
    [summary] = [ln for ln in r.stdout.splitlines() if ln.startswith("gate: ")]
    heads = int(re.search(r"; (\d+) headline finding\(s\)", summary).group(1))
    assert f"from {len(failing)} finding(s)" in summary and 1 <= heads <= 5 < len(failing) + 5
    dossiers = re.findall(r"^FINDING \d+ of (\d+): (.*)$", r.stderr, re.M)
    assert len(dossiers) == heads and all(int(n) == heads for n, _ in dossiers)
    # the planted bug holds in every context the gate ran, and says so
    assert any("beyond oracle tolerance of outputs" in t and "in every CPU context: " in t for _, t in dossiers)

    cells = tables.cells_frame(load_measures(str(out)))
    env = report_files.flatten_environment(json.loads((out / "environment.json").read_text()))
    view = page_view.report_view(str(out), cells, found, [], env)
    page = render.summary_html(view)
    cards = re.findall(r'<article class="finding".*?<span class="badge"[^>]*>([^<]+)</span>', page, re.S)
    assert 1 <= sum(c in FAILING for c in cards) <= 5
    assert re.search(r"the gate fails on (\d+) contract broken", view.gate_line()[1]).group(1) == str(heads)
    # every finding is on the page, beneath its headline
    assert all(f'id="finding-{f.id}"' in page for f in found)
