"""harness.core.lifeline: children tied to their parent, and what a killed process left swept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from harness.core import lifeline

_SLEEPER = "import time; from harness.core.lifeline import adopt; adopt(); print('up', flush=True); time.sleep(600)"


def _dead(pid: int) -> bool:
    """Gone, or a zombie: it died, and only its reaping is left (to this machine's init, whenever that reaps)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


def _gone(pid: int, bound: float = 30.0) -> bool:
    end = time.monotonic() + bound
    while time.monotonic() < end and not _dead(pid):
        time.sleep(0.05)
    return _dead(pid)


_ECHO = ("import sys; from harness.core.lifeline import adopt; adopt(); print('up', flush=True); "
         "[print(line.strip(), flush=True) for line in sys.stdin]")


def test_a_child_started_from_a_thread_outlives_the_thread() -> None:
    # The kernel ties a child to the thread that forked it: a child started from a lane thread must not die
    # when that lane ends. Once the thread has left /proc/self/task, its exit is over (and any signal sent).
    box: list[subprocess.Popen] = []
    tid: list[int] = []

    def lane() -> None:
        tid.append(threading.get_native_id())
        proc = lifeline.popen([sys.executable, "-c", _ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
        box.append(proc)
        assert proc.stdout.readline().strip() == b"up"  # adopted: the death signal is set

    t = threading.Thread(target=lane)
    t.start()
    t.join()
    end = time.monotonic() + 30
    while os.path.exists(f"/proc/self/task/{tid[0]}") and time.monotonic() < end:
        time.sleep(0.01)
    proc = box[0]
    try:
        proc.stdin.write(b"ping\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == b"ping"
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()


def test_a_child_dies_when_its_parent_is_killed(tmp_path) -> None:
    # parent: a Python process that starts a tied child, says its pid, then waits to be killed
    parent_code = ("import subprocess, sys, time; from harness.core import lifeline; "
                   f"p = lifeline.popen([sys.executable, '-c', {_SLEEPER!r}], stdout=subprocess.PIPE); "
                   "p.stdout.readline(); print(p.pid, flush=True); time.sleep(600)")
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    child = int(parent.stdout.readline())
    assert lifeline.pid_alive(child)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    parent.stdout.close()
    try:
        assert _gone(child)
    finally:
        if lifeline.pid_alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_forked_child_dies_with_its_parent() -> None:
    r, w = os.pipe()
    parent = os.fork()
    if parent == 0:  # the middle process: fork a tied child, say its pid, wait to be killed
        try:
            os.close(r)
            child = lifeline.fork()
            if child == 0:
                time.sleep(600)
                os._exit(0)
            os.write(w, f"{child}\n".encode())
            time.sleep(600)
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        child = int(f.readline())
    assert lifeline.pid_alive(child)
    os.kill(parent, signal.SIGKILL)
    os.waitpid(parent, 0)
    try:
        assert _gone(child)
    finally:
        if lifeline.pid_alive(child):
            os.kill(child, signal.SIGKILL)


def _adopting(parent: str) -> subprocess.CompletedProcess:
    code = (f"import os; os.environ['HARNESS_PARENT_PID'] = {parent!r}; "
            "from harness.core.lifeline import adopt; adopt(); print('survived')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})


def test_adopt_exits_where_the_parent_is_already_gone() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid names no process now
    out = _adopting(str(gone.pid))
    assert out.returncode == 1 and "survived" not in out.stdout
    assert out.stderr.strip() == f"harness: error: $HARNESS_PARENT_PID={gone.pid}: the process that started this " \
                                 f"one is gone; nobody waits for it"


@pytest.mark.parametrize("value, cause", [("1", "names process 1, which is not this process's parent"),
                                          ("x12", "is not a process id")])
def test_a_stale_parent_variable_is_one_line_naming_it_exit_2(value: str, cause: str) -> None:
    out = _adopting(value)
    assert out.returncode == 2 and "survived" not in out.stdout
    [line] = out.stderr.splitlines()
    assert line.startswith("harness: error: $HARNESS_PARENT_PID=") and cause in line, line


def test_sweep_removes_only_what_dead_processes_left(tmp_path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f"harness-x-{dead.pid}-abc").mkdir()
    (tmp_path / f"harness-x-{dead.pid}-f.jsonl").write_text("x")
    (tmp_path / f"harness-x-{os.getpid()}-mine").mkdir()
    (tmp_path / "harness-x-notapid-1").mkdir()
    assert lifeline.sweep(str(tmp_path), "harness-x-") == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"harness-x-{os.getpid()}-mine",
                                                                 "harness-x-notapid-1"])
