"""A harness verb run in a child process with a timeout, so that subject code never runs in ours.

``localize`` hooks into Chainer's function nodes while a subject runs, which a pooled worker's run protocol does
not offer; it runs as ``python -m harness VERB ...`` in a child instead (:data:`CHILD_ENV` set), and this module
turns whatever happens there into a :class:`Sandboxed` result: an answer, a one-line error (exit 2), a crash (a
signal), a hang (the timeout), or an exit without an answer (a plug-in calling ``sys.exit(0)``). Nothing the
child does can end, hang or mislabel the parent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from harness.core import lifeline

__all__ = ["CHILD_ENV", "Sandboxed", "run_child", "in_child"]

#: Set in the child: "run the verb here" (the parent runs nothing of a subject itself).
CHILD_ENV = "HARNESS_SANDBOX_CHILD"
#: The child's last stdout line when it finished: what tells an answer from an exit before answering.
DONE = "harness: sandbox: done"


def in_child() -> bool:
    return os.environ.get(CHILD_ENV) == "1"


@dataclass(frozen=True)
class Sandboxed:
    """What the child did: ``status`` ok, error (one-line usage or set-up error), crashed, timeout, exited."""

    status: str
    returncode: int | None
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def reason(self) -> str:
        """One line saying why there is no answer."""
        last = next((ln for ln in reversed(self.stderr.strip().splitlines()) if ln.strip()), "")
        if self.status == "error":
            return last.removeprefix("harness: error: ") or f"exit {self.returncode}"
        if self.status == "crashed":
            try:
                name = signal.Signals(-int(self.returncode or 0)).name
            except ValueError:
                name = f"signal {-(self.returncode or 0)}"
            return f"the child process died ({name})" + (f": {last}" if last else "")
        if self.status == "timeout":
            return "the child process did not finish in time (killed)"
        if self.status == "exited":
            return (f"the child process exited (code {self.returncode}) without an answer: a subject or plug-in "
                    f"ended the process" + (f" ({last})" if last else ""))
        return ""


def run_child(argv: Sequence[str], timeout: float, *, plugins_env: dict[str, str] | None = None) -> Sandboxed:
    """Run ``python -m harness *argv`` in a child (its own process group, killed whole on a timeout).

    The child is forked from the workers' zygote where there is one (NumPy and Chainer imported already: a
    fork, not an interpreter's start), else it is a new interpreter. Either way it is a process of its own."""
    extra = {CHILD_ENV: "1", **(plugins_env or {})}
    from harness.execute.worker import worker_env, zygote_for

    zygote = zygote_for(worker_env({}))
    if zygote is not None:
        try:
            return _forked_child(zygote, argv, extra, timeout)
        except (OSError, ValueError, KeyError):
            pass  # the zygote went away: a new interpreter instead
    env = {**os.environ, **extra}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = lifeline.popen([sys.executable, "-m", "harness", *argv], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        out, err = proc.communicate()
        return Sandboxed("timeout", None, out or "", err or "")
    rc = proc.returncode
    status, out = _status(rc, out)
    return Sandboxed(status, rc, out, err)


def _status(rc: int | None, out: str) -> tuple[str, str]:
    """The :class:`Sandboxed` status of an exit code, and stdout without the done line."""
    if rc is None or rc < 0:
        return "crashed", out
    if rc == 2:
        return "error", out
    if rc == 0 and out.rstrip().endswith(DONE):
        return "ok", out.rstrip()[: -len(DONE)]
    return "exited", out


def _forked_child(zygote: Any, argv: Sequence[str], extra: dict[str, str], timeout: float) -> Sandboxed:
    import select
    import time

    from harness.execute.worker import _Forked

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        pid = zygote.verb(argv, extra, os.getcwd(), out_w, err_w)
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    proc = _Forked(pid, zygote)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    open_fds = [out_r, err_r]
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select(open_fds, [], [], left)
            for fd in ready:
                data = os.read(fd, 1 << 16)
                if data:
                    chunks[fd].append(data)
                else:
                    open_fds.remove(fd)
        if not timed_out:  # both pipes closed: the child is ending (or closed them and hangs on)
            try:
                rc = proc.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            try:
                os.killpg(pid, signal.SIGKILL)  # the child and whatever it started
            except OSError:
                proc.kill()
            proc.wait(30)
    finally:
        for fd in (out_r, err_r):
            os.close(fd)
    out = b"".join(chunks[out_r]).decode(errors="replace")
    err = b"".join(chunks[err_r]).decode(errors="replace")
    if timed_out:
        return Sandboxed("timeout", None, out, err)
    status, out = _status(rc, out)
    return Sandboxed(status, rc, out, err)
