"""No process outlives the harness: kill ``python -m harness`` with SIGKILL while a plug-in hangs (at its import, in
``accepts()``, in a run) and every process it started (manifest children, zygotes and their workers, spawned
workers, the figure server, forked children) is gone a few seconds later.

Every process of one run is found by a marker in its environment (``/proc/PID/environ``), which each child
inherits; the bound on how long they may take to go is generous (a busy machine), never asserted as a speed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from harness.core import lifeline

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGIN = ["--subject-plugin", "suites.plugins.hangs:SUBJECTS"]
_TAG = "HARNESS_TEST_RUN_TAG"


def _tagged(tag: str) -> list[int]:
    """The processes whose environment carries ``tag`` (zombies have none: they are gone)."""
    needle = f"{_TAG}={tag}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env:
            found.append(int(name))
    return found


def _wait(pred, bound: float) -> bool:
    end = time.monotonic() + bound
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


@pytest.fixture(scope="module")
def case_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("case") / "corpus.jsonl"
    subprocess.run([sys.executable, "-m", "harness", "cases", "--family", "embed", "--examples", "1", "--out",
                    str(path)], cwd=ROOT, check=True, capture_output=True)
    first = path.read_text(encoding="utf-8").splitlines()[0]
    out = path.parent / "case.json"
    out.write_text(first + "\n", encoding="utf-8")
    return str(out)


_SMALL = ["--subjects", "hangs.subject", "--examples", "1", "--repeats", "1", "--fresh", "1", "--relations", "none",
          "--timeout", "3600", "--no-localize", "--quiet"]

STAGES = [
    ("report-import", lambda case, out: ["report", *PLUGIN, *_SMALL, "--out", out], "import"),
    ("report-accepts", lambda case, out: ["report", *PLUGIN, *_SMALL, "--out", out], "accepts"),
    ("report-run", lambda case, out: ["report", *PLUGIN, *_SMALL, "--out", out], "run"),
    ("subjects-import", lambda case, out: ["subjects", *PLUGIN], "import"),
    ("replay-run", lambda case, out: ["replay", case, "--subject", "hangs.subject", "--repeats", "1", "--timeout",
                                      "3600", *PLUGIN], "run"),
    ("localize-run", lambda case, out: ["localize", case, "--subject", "hangs.subject", "--timeout", "3600",
                                        *PLUGIN], "run"),
]


@pytest.mark.parametrize("argv,where", [(s[1], s[2]) for s in STAGES], ids=[s[0] for s in STAGES])
def test_sigkill_leaves_no_process_of_the_harness(argv, where, case_file, tmp_path) -> None:
    tag = uuid.uuid4().hex
    mark = tmp_path / "hung"
    env = {**os.environ, _TAG: tag, "HARNESS_TEST_HANG": where, "HARNESS_TEST_HANG_MARK": str(mark),
           "HARNESS_PLUGIN_TIMEOUT": "3600", "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-m", "harness", *argv(case_file, str(tmp_path / "out"))], cwd=ROOT,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        reached = _wait(lambda: mark.exists() and mark.read_text().strip() != "" or proc.poll() is not None, 300)
        assert reached and proc.poll() is None, (
            f"the plug-in never hung in {where} (exit {proc.poll()}): {proc.stderr.read().decode()[-2000:]}"
            if proc.poll() is not None else f"the plug-in never hung in {where}")
        hung = [int(p) for p in mark.read_text().split()]
        assert all(p != proc.pid for p in hung)  # the plug-in hangs in a child, never in the harness itself
        assert set(hung) <= set(_tagged(tag))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    gone = _wait(lambda: not _tagged(tag), 60)
    left = _tagged(tag)
    for pid in left:  # not ours to leave running, whatever the verdict
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert gone, f"processes of the killed harness still alive: {left}"
    # What it left in shared memory and the temporary directory carries its pid; the next harness sweeps it.
    for base, prefix in (("/dev/shm", "harness-spool-"), (tempfile.gettempdir(), "harness-spool-"),
                         (tempfile.gettempdir(), "harness-manifest-")):
        lifeline.sweep(base, prefix)
        if os.path.isdir(base):
            assert not [n for n in os.listdir(base) if n.startswith(f"{prefix}{proc.pid}-")]
