"""harness/outputs/retention.py: only finished, idle run directories beyond the newest ``keep`` are deleted;
nothing else under ``reports/`` is touched."""

from __future__ import annotations

import fcntl
import os

import pytest

from harness.core.errors import InvalidArgument
from harness.outputs.retention import FINISHED, prune_reports


def _run(base, name: str, finished: bool = True) -> str:
    d = base / name
    d.mkdir()
    if finished:
        (d / FINISHED).write_text("{}")
    return name


def test_the_oldest_finished_idle_runs_go_and_everything_else_stays(tmp_path) -> None:
    old = [_run(tmp_path, f"2026010{i}T000000Z-1") for i in range(1, 6)]
    running = _run(tmp_path, "20260100T000000Z-9", finished=False)
    (tmp_path / "README.md").write_text("keep")
    (tmp_path / "baselines").mkdir()
    os.symlink(old[0], tmp_path / "latest")
    locked = old[1]
    fd = os.open(tmp_path / locked / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        gone = prune_reports(str(tmp_path), keep=2)
    finally:
        os.close(fd)
    assert gone == [old[2]]  # old[0] is latest, old[1] is locked; old[3:] are the newest two
    left = set(os.listdir(tmp_path))
    assert {running, "README.md", "baselines", "latest", old[0], old[1], old[3], old[4]} <= left
    assert old[2] not in left


def test_a_negative_keep_is_refused_and_a_missing_base_deletes_nothing(tmp_path) -> None:
    with pytest.raises(InvalidArgument, match="keep=-1"):
        prune_reports(str(tmp_path), keep=-1)
    assert prune_reports(str(tmp_path / "absent")) == []
