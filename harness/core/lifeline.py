"""Every process the harness starts dies with the process that started it: one rule, used by every fork and spawn.

A child is tied to its parent by the parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``): the kernel
kills it when its parent ends, whatever way the parent ended (SIGKILL included, where no ``atexit`` runs). The
signal is set in the child, so a parent that died before it was set is caught by checking ``getppid()`` after
setting it. Three ways in, all here:

- :func:`fork`: ``os.fork`` whose child is tied to this process (the measure pass's and the figures' children, the
  figure server, the zygote's workers and verb children);
- :func:`popen`: ``subprocess.Popen`` of a Python child (workers, zygotes, sandboxed ``python -m harness``, plug-in
  manifest children) told this process's pid in :data:`PARENT_ENV`; the child calls :func:`adopt` first thing;
- :func:`die_with_parent`: for a child started another way (``multiprocessing``), given the parent's pid;
- :func:`run_guarded`: any program (an exported script, pip, a throwaway environment's python) under a small
  guard that dies with this process and takes the program's whole process group with it.

The kernel's "parent" is the *thread* that forked: a child forked from a lane thread would be killed when that
lane ends, though the process lives on (zygotes outlive campaigns). So :func:`popen` starts children from the
main thread, or else from one helper thread that lives as long as this process.

A process killed with SIGKILL cannot remove what it left in shared memory or the temporary directory: every such
name carries its owner's pid (:func:`owned_prefix`), and :func:`sweep` removes those whose owner is gone (called on
a process's first use of that folder).
"""

from __future__ import annotations

import ctypes
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

__all__ = ["PARENT_ENV", "die_with_parent", "adopt", "fork", "popen", "run_guarded", "Ran", "GUARD", "child_env",
           "helper_threads",
           "owned_prefix", "sweep", "pid_alive"]

#: The pid a spawned child checks its parent against (set by :func:`popen`, removed by :func:`adopt`).
PARENT_ENV = "HARNESS_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def _set_death_signal() -> bool:
    """Ask the kernel to SIGKILL this process when its parent ends; False where there is no such call."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def die_with_parent(parent: int | None) -> None:
    """In a child: die when ``parent`` (its parent's pid) ends, and now where it has already ended."""
    _set_death_signal()
    if parent is not None and os.getppid() != parent:
        os._exit(1)  # the parent died before the signal was set: nobody waits for this process


def adopt() -> None:
    """First thing in a spawned child's main: tie it to the parent named by :data:`PARENT_ENV`, if any. The
    variable is removed, so the child's own children are told their own parent."""
    value = os.environ.pop(PARENT_ENV, "")
    if value.isdigit():
        die_with_parent(int(value))


def fork() -> int:
    """``os.fork()``; the child is tied to this process. Call it only where no other thread runs (the kernel ties
    the child to the forking thread): :func:`harness.core.forking.fork_safe`, or a single-threaded process."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with_parent(parent)
    return pid


def child_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """``env`` (this process's environment where None) with :data:`PARENT_ENV` naming this process."""
    return {**(os.environ if env is None else env), PARENT_ENV: str(os.getpid())}


_helper: tuple[int, "queue.Queue[Any]", threading.Thread] | None = None
_helper_lock = threading.Lock()
_HELPER_NAME = "harness-spawner"


def _serve(q: "queue.Queue[Any]") -> None:
    while True:
        fn, box, done = q.get()
        try:
            box.append((True, fn()))
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller, raised there
            box.append((False, exc))
        done.set()


def _on_lasting_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` on the main thread where called there, else on the helper thread (started on first use)."""
    global _helper
    if threading.current_thread() is threading.main_thread():
        return fn()
    with _helper_lock:
        if _helper is None or _helper[0] != os.getpid() or not _helper[2].is_alive():
            q: "queue.Queue[Any]" = queue.Queue()
            t = threading.Thread(target=_serve, args=(q,), name=_HELPER_NAME, daemon=True)
            t.start()
            _helper = (os.getpid(), q, t)
        q = _helper[1]
    box: list[tuple[bool, Any]] = []
    done = threading.Event()
    q.put((fn, box, done))
    done.wait()
    ok, value = box[0]
    if not ok:
        raise value
    return value


def helper_threads() -> int:
    """How many of this process's threads are the helper's (0 or 1): it holds no lock while it waits, so a fork
    beside it is safe (:func:`harness.core.forking.fork_safe` does not count it)."""
    h = _helper
    return int(h is not None and h[0] == os.getpid() and h[2].is_alive())


def popen(args: list[str], **kwargs: Any) -> "subprocess.Popen[Any]":
    """``subprocess.Popen(args, **kwargs)`` of a Python child that calls :func:`adopt`: its environment (``env``,
    else this process's) names this process, and it is started from a thread that lasts as long as this process."""
    kwargs["env"] = child_env(kwargs.get("env"))
    proc: subprocess.Popen[Any] = _on_lasting_thread(lambda: subprocess.Popen(args, **kwargs))
    return proc


def owned_prefix(prefix: str) -> str:
    """A name prefix for a file or folder this process owns: ``prefix`` then its pid then ``-``."""
    return f"{prefix}{os.getpid()}-"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive, and not ours to judge
    return True


def sweep(base: str, prefix: str) -> int:
    """Remove the entries of ``base`` named ``prefix<pid>-...`` whose process no longer exists; how many."""
    try:
        names = os.listdir(base)
    except OSError:
        return 0
    gone = 0
    for name in names:
        if not name.startswith(prefix):
            continue
        owner = name[len(prefix):].split("-", 1)[0]
        if owner.isdigit() and int(owner) != os.getpid() and not pid_alive(int(owner)):
            path = os.path.join(base, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    continue
            gone += 1
    return gone



# ---- any program (a script, pip, a venv's python), with its own children -------------------------------
#: The guard every child runs under (``python -I -c GUARD ARGV...``): it dies with the harness (SIGTERM from the
#: kernel's parent-death signal, set here first; SIGINT and SIGHUP too) and takes the command's process group
#: with it; on the command's own end it clears the group too, so nothing the command left runs on.
GUARD = r"""
import ctypes, os, signal, subprocess, sys
parent = os.environ.pop("HARNESS_PARENT_PID", "")
child = None
SIGS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
def stop(signum, frame):
    if child is not None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(128 + signum)
for s in SIGS:
    signal.signal(s, stop)
try:
    ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)
except Exception:
    pass
if parent.isdigit() and os.getppid() != int(parent):
    sys.exit(1)
signal.pthread_sigmask(signal.SIG_BLOCK, SIGS)
try:
    child = subprocess.Popen(sys.argv[1:], start_new_session=True,
                             preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGS))
except OSError as exc:
    print(f"cannot start {sys.argv[1]}: {exc}", file=sys.stderr)
    sys.exit(127)
finally:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGS)
code = child.wait()
try:
    os.killpg(child.pid, signal.SIGKILL)
except OSError:
    pass
sys.exit(code if code >= 0 else 128 - code)
"""



@dataclass(frozen=True)
class Ran:
    """What a guarded command did: its exit code (None: killed past its timeout) and its output."""

    code: int | None
    stdout: str
    stderr: str



def run_guarded(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> Ran:
    """``argv`` under the guard, its output captured; past ``timeout`` seconds the guard is told to end it (and
    its process group), and ``code`` is None. An interrupt ends the guard (and so the command) before it goes
    on up."""
    proc = popen([sys.executable, "-I", "-c", GUARD, *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, errors="replace", env=dict(env or os.environ), cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate()
        return Ran(None, out, err)
    except BaseException:
        proc.send_signal(signal.SIGTERM)  # the guard takes the command's group with it
        proc.wait()
        raise
    return Ran(proc.returncode, out, err)
