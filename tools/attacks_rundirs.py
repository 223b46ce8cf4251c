"""Report directories for the attacks on ``--resume`` and ``--keep``: a finished run with a damaged or torn
``tasks.jsonl`` (and the check that every planned task is on disk once after the resume), and a report directory
held by a running report (and the check that ``--keep`` left it whole)."""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

try:
    from tools.attacks_spec import SMALL, harness_env
except ImportError:  # run as a script: tools/ is the path's first folder
    from attacks_spec import SMALL, harness_env  # type: ignore[no-redef]


def _finished_run(tmp: Path) -> None:
    subprocess.run([sys.executable, "-m", "harness", "report", "--subjects", "chainer.embed_id",
                    "--out", str(tmp / "run"), *SMALL], cwd=tmp, env=harness_env({}), capture_output=True, check=True)
    packed = tmp / "run" / "tasks.jsonl.xz"  # as a finished report packs it (harness.core.record_files)
    if packed.exists():
        (tmp / "run" / "tasks.jsonl").write_bytes(lzma.decompress(packed.read_bytes()))
        packed.unlink()


def damaged_run(line: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        _finished_run(tmp)
        with open(tmp / "run" / "tasks.jsonl", "a") as f:
            f.write(line)
    return setup


def torn_run(tmp: Path) -> None:
    _finished_run(tmp)
    p = tmp / "run" / "tasks.jsonl"
    lines = p.read_text().splitlines(keepends=True)
    (tmp / "keys.json").write_text(json.dumps(sorted(json.loads(ln)["key"] for ln in lines)))
    p.write_text("".join(lines[:2] + [lines[2][:len(lines[2]) // 2] + "\n"] + lines[3:5] + [lines[5][:30]]))


def lost_tasks(tmp: Path) -> str:
    want = json.loads((tmp / "keys.json").read_text())
    p = tmp / "run" / "tasks.jsonl"
    data = lzma.decompress(p.with_suffix(".jsonl.xz").read_bytes()) if not p.exists() else p.read_bytes()
    got = sorted(json.loads(ln)["key"] for ln in data.decode().splitlines() if ln.strip())
    return "" if got == want else f"{len(want)} tasks planned, {len(got)} ({len(set(got))} distinct) on disk"


def running_dir(tmp: Path) -> None:
    d = tmp / "reports" / "20200101T000000Z-1"
    d.mkdir(parents=True)
    (d / "corpus.jsonl").write_text("")
    # The holder: a process that keeps the lock for the attack's duration (as a running report does).
    code = ("import fcntl,sys,time;f=open(sys.argv[1],'a+');fcntl.flock(f,fcntl.LOCK_EX);"
            "open(sys.argv[2],'w').close();time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(d / ".lock"), str(tmp / "locked")])
    (tmp / "holder.pid").write_text(str(proc.pid))
    while not (tmp / "locked").exists():
        if proc.poll() is not None:
            raise RuntimeError("lock holder died")


def running_lost(tmp: Path) -> str:
    pid = int((tmp / "holder.pid").read_text())
    try:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    except (OSError, ChildProcessError):
        pass
    ok = (tmp / "reports" / "20200101T000000Z-1" / "corpus.jsonl").exists()
    return "" if ok else "the running report's directory was deleted"
