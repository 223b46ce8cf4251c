"""The report's figures are drawn in a forked child while the tables are built (harness/outputs/tables.py
``_Figures``): the same bytes as drawing them in the report's own process, and no file left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Run in a child interpreter: the fork is taken only where no other thread runs (a pytest-xdist worker has some).
CODE = r"""
import json, os, sys, threading
from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.execute.campaign import CampaignSettings
from harness.execute.driver import run_campaign
from harness.outputs.tables import _Figures, cells_frame
from harness.subjects.registry import get_subject

out = sys.argv[1]
cases = [Case("embed", s, {"vocab": 7, "width": 4, "ids_shape": [3, 5]}) for s in range(2)]
run = run_campaign(out, cases, [get_subject("chainer.embed_id"), get_subject("control.nondeterministic")], [CPU],
                   [get_context("default")], CampaignSettings(repeats=2, fresh=0, quiet=True, jobs=1))
measures = list(run.measures)
figs = _Figures(out, cells_frame(measures), measures, run.cases)
threads = threading.active_count()
figs.start()
forked = figs.pid is not None
got = figs.result()
want = figs.draw()
print(json.dumps({"threads": threads, "forked": forked, "names": [n for n, _ in got],
                  "same": [a == b for (_, a), (_, b) in zip(got, want)], "png": [d[:4].hex() for _, d in got],
                  "left": sorted(n for n in os.listdir(out) if n.startswith(".figures-"))}))
"""


def test_figures_drawn_in_a_forked_child_are_the_bytes_drawn_here(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", CODE, str(tmp_path / "run")], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["forked"], res  # the child interpreter runs one thread: the figures were drawn in a fork
    assert res["names"] == ["verdicts.png", "divergence.png", "error_vs_size.png"]
    assert res["same"] == [True, True, True] and res["png"] == ["89504e47"] * 3
    assert res["left"] == []
