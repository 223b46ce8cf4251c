"""Parent-side work in forked children (harness/core/forking.py): the report's figures and the measure pass
give the same bytes and the same measures as computed here, a failing child leaves the work to this process,
and where another thread runs nothing is forked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# Run in a child interpreter: the fork is taken only where no other thread runs (a pytest-xdist worker has some).
CODE = r"""
import json, os, sys, threading
from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.core.forking import Forked, fork_safe, map_forked
from harness.execute.campaign import CampaignOptions
from harness.execute.driver import run_campaign
from harness.execute.measure_pass import measure_campaign
from harness.judge.contracts import load_contracts
from harness.outputs import figures, render
from harness.outputs.report_files import FIGURES, draw_figures, start_figures
from harness.outputs.tables import cells_frame
from harness.subjects.registry import get_subject

from harness.outputs.drawing import FigureServer

out = sys.argv[1]
# started before the campaign, as harness report starts it: it imports matplotlib while the runs go
server = FigureServer().start()
unasked = FigureServer().start()
dying = FigureServer().start()
cases = [Case("embed", s, {"vocab": 7, "width": 4, "ids_shape": [3, 5]}) for s in range(3)]
cases += [Case("lstm", s, {"n_layers": 1, "in_size": 3, "hidden": 2, "lengths": [2, 1]}) for s in range(2)]
subjects = [get_subject(n) for n in ("chainer.embed_id", "chainer.NStepLSTM", "control.nondeterministic")]
run = run_campaign(out, cases, subjects, [CPU], [get_context("default"), get_context("blas1")],
                   CampaignOptions(repeats=2, fresh=1, quiet=True, jobs=1))
# the lane's thread is gone; the lifeline's spawner (it started the lane's workers) may stay, holding no lock
from harness.core.lifeline import helper_threads
res = {"safe": fork_safe(), "threads": threading.active_count() - helper_threads()}
measures = list(run.measures)
cells = cells_frame(measures)
# matplotlib not imported here yet (the server imported it in its own process): one child draws the three
res["preloaded_before"] = figures.preloaded()
f = Forked(lambda: draw_figures(cells, measures, run.cases)).start()
res["figures_forked"] = f.pid is not None
cold = start_figures(cells, measures, run.cases)()
res["server_running"] = [server.running, unasked.running, dying.running]
served = start_figures(cells, measures, run.cases, server=server)()
res["served_pids_gone"] = server.pid is None
res["served_not_imported_here"] = not figures.preloaded()
os.kill(dying.pid, 9)  # a server that died: the figures are drawn here instead
dead = start_figures(cells, measures, run.cases, server=dying)()
pid = unasked.pid
unasked.close()  # never asked: stopped and reaped
try:
    os.waitpid(pid, os.WNOHANG)
    res["unasked_reaped"] = False
except ChildProcessError:
    res["unasked_reaped"] = True
# imported (and a figure drawn) here: one child per figure, the same bytes
render.preload()
res["preloaded_after"] = figures.preloaded()
kids = []
real_start = Forked.start
def counting_start(self):
    started = real_start(self)
    kids.append(started.pid)
    return started
Forked.start = counting_start
warm = start_figures(cells, measures, run.cases)()
Forked.start = real_start
res["warm_children"] = len([k for k in kids if k is not None])
got, want = f.result(), draw_figures(cells, measures, run.cases)
res["names"] = [n for n, _ in got]
res["same_figures"] = [a == b == c == d for (_, a), (_, b), (_, c), (_, d) in zip(got, want, cold, warm)]
res["served_names"] = [n for n, _ in served]
res["same_served"] = [a == b == c for (_, a), (_, b), (_, c) in zip(served, dead, want)]
res["png"] = [d[:4].hex() for _, d in got]
contracts = load_contracts(None)
one = measure_campaign(out, contracts, tasks=run.records, write=False, parts=1)
three = measure_campaign(out, contracts, tasks=run.records, write=False, parts=3)
res["tasks"], res["measures"] = len(run.records), len(one)
res["same_measures"] = [m.to_dict() for m in one] == [m.to_dict() for m in three]
res["same_as_campaign"] = sorted(json.dumps(m.to_dict(), sort_keys=True) for m in one) == sorted(
    json.dumps(m.to_dict(), sort_keys=True) for m in measures)
# a child that dies: the work is done here instead, with the same answer
parent = os.getpid()
def dies_in_child():
    if os.getpid() != parent:
        os._exit(3)
    return "here"
res["died"] = Forked(dies_in_child).start().result()
res["map"] = map_forked(lambda p: (p, os.getpid() != parent), [0, 1, 2])
# the figure children run below this process's priority; a figure drawn here (no fork) leaves it alone
import harness.outputs.drawing as drawing_module
real_draw = drawing_module.draw
drawing_module.draw = lambda kind, args: str(os.nice(0)).encode()
res["own_nice"] = os.nice(0)
res["child_nice"] = [int(b) for _, b in start_figures(cells, measures, run.cases)()]
# another thread running: nothing forks
ev = threading.Event()
t = threading.Thread(target=ev.wait); t.start()
res["safe_with_thread"] = fork_safe()
res["map_with_thread"] = map_forked(lambda p: (p, os.getpid() != parent), [0, 1])
res["here_nice"] = [int(b) for _, b in start_figures(cells, measures, run.cases)()]
res["own_nice_after"] = os.nice(0)
ev.set(); t.join()
drawing_module.draw = real_draw
print(json.dumps(res))
"""


def _run(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", CODE, str(tmp_path / "run")], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_forked_work_gives_what_this_process_computes(tmp_path):
    res = _run(tmp_path)
    assert res["safe"] and res["threads"] == 1, res  # the child interpreter runs one thread (and the spawner): it forks
    assert res["figures_forked"]
    assert res["preloaded_before"] is False and res["preloaded_after"] is True
    assert res["warm_children"] == 3  # with matplotlib imported here, each figure in its own child
    assert res["names"] == ["verdicts.png", "divergence.png", "error_vs_size.png"]
    assert res["same_figures"] == [True, True, True] and res["png"] == ["89504e47"] * 3
    # drawn by the server forked before the campaign, or here where it died: the same bytes
    assert res["server_running"] == [True, True, True] and res["served_pids_gone"]
    assert res["served_names"] == res["names"] and res["same_served"] == [True, True, True]
    assert res["unasked_reaped"] and res["served_not_imported_here"]
    # the measure pass dealt into three forked slices: the same measures, in the same order, as in one
    assert res["tasks"] >= 20 and res["measures"] > 100
    assert res["same_measures"] and res["same_as_campaign"]
    assert res["died"] == "here"
    assert res["map"] == [[0, False], [1, True], [2, True]]
    assert res["safe_with_thread"] is False
    lowered = min(res["own_nice"] + 10, 19)
    assert res["child_nice"] == [lowered] * 3, res  # each figure child below this process
    assert res["here_nice"] == [res["own_nice"]] * 3 and res["own_nice_after"] == res["own_nice"]
    assert res["map_with_thread"] == [[0, False], [1, False]]
