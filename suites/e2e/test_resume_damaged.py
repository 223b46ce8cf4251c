"""``report --resume`` of a run directory damaged the ways a disk, a copy or a kill damage one: it finishes, says
what runs again, and ends with every planned task's record exactly once and every run's line exactly once."""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.record_files import record_lines

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--subjects", "chainer.embed_id", "--devices", "cpu", "--contexts", "default", "--fresh", "0", "--repeats",
         "1", "--examples", "1", "--relations", "none", "--no-shrink", "--no-localize", "--quiet"]


def _harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("finished") / "run"
    r = _harness("report", "--out", str(d), "--keep-arrays", "all", *SMALL)
    assert r.returncode == 0, r.stderr[-2000:]
    return d


def _lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in record_lines(str(path)) if ln.strip()]


def _cut(name: str):
    def damage(d: Path) -> None:
        raw = (d / name).read_bytes()
        (d / name).write_bytes(raw[:len(raw) // 2])
    return damage


def _flip_arrays(d: Path) -> None:
    path = sorted((d / "arrays").iterdir())[0]
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("damage,said", [(_cut("tasks.jsonl.xz"), "tasks.jsonl.xz: cut short"),
                                         (_cut("runs.jsonl.xz"), "runs.jsonl.xz: cut short"),
                                         (_flip_arrays, ".npz: damaged")],
                         ids=["tasks-cut", "runs-cut", "arrays-damaged"])
def test_a_damaged_run_resumes_with_nothing_lost_or_counted_twice(finished, tmp_path, damage, said) -> None:
    want = sorted(r["key"] for r in _lines(finished / "tasks.jsonl"))
    d = tmp_path / "run"
    shutil.copytree(finished, d)
    damage(d)
    r = _harness("report", "--resume", str(d), "--quiet", "--no-shrink", "--no-localize")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert said in r.stderr and "harness: note: resume:" in r.stderr
    tasks = _lines(d / "tasks.jsonl")
    assert sorted(t["key"] for t in tasks) == want  # every task once
    runs = collections.Counter(x["key"] for x in _lines(d / "runs.jsonl"))
    assert runs == {t["key"]: t["runs"] for t in tasks if t["runs"]}  # every run's line once
