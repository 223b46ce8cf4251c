"""A named function of the harness run on a JSON request in a child process with a timeout, so that subject
code never runs in ours.

Localization hooks into Chainer's function nodes while a subject runs, which a pooled worker's run protocol does
not offer; it runs as a named call instead (:func:`run_call`, the child's side in :mod:`harness.execute.call_child`,
:data:`CHILD_ENV` set there), and this module turns whatever happens there into a :class:`Sandboxed` result: an
answer, a one-line error (a harness error, or a plug-in ending the process), a crash (a signal), a hang (the
timeout), or an exit without an answer (a plug-in calling ``os._exit(0)``). Nothing the child does can end, hang
or mislabel the parent.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from harness.core import lifeline
from harness.execute.call_child import ANSWER, ERROR, name_of

__all__ = ["CHILD_ENV", "Sandboxed", "run_call", "in_child"]

#: Set in the child: "subject code runs here" (the parent runs nothing of a subject itself).
CHILD_ENV = "HARNESS_SANDBOX_CHILD"


def in_child() -> bool:
    return os.environ.get(CHILD_ENV) == "1"


@dataclass(frozen=True)
class Sandboxed:
    """What the child did: ``status`` ok, error (a one-line harness error), crashed, timeout, exited; the
    function's ``answer`` when ok, the ``error`` line when error."""

    status: str
    returncode: int | None
    stdout: str
    stderr: str
    answer: Any = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def reason(self) -> str:
        """One line saying why there is no answer."""
        last = next((ln for ln in reversed(self.stderr.strip().splitlines()) if ln.strip()), "")
        if self.status == "error":
            return self.error or f"exit {self.returncode}"
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


def run_call(fn: Callable[[Mapping[str, Any]], Any], request: Mapping[str, Any], timeout: float,
             env: Mapping[str, str] | None = None) -> Sandboxed:
    """``fn(request)`` in a child (its own process group, killed whole on a timeout); ``fn`` is a module-level
    function of the harness taking and returning JSON data; ``env`` is added to the child's environment (a
    user's limits the child must hold to, e.g. ``$HARNESS_MAX_CASE_BYTES``).

    The child is forked from the workers' zygote where there is one (NumPy and Chainer imported already: a
    fork, not an interpreter's start), else it is a new interpreter. Either way it is a process of its own."""
    from harness.execute.zygote import Forked, worker_env, zygote_for

    name, extra = name_of(fn), {**(env or {}), CHILD_ENV: "1"}
    fds = [*os.pipe(), *os.pipe(), *os.pipe()]  # stdout, stderr, answer: (read, write) each
    reads, writes = fds[0::2], fds[1::2]
    proc: Any = None
    try:
        zygote = zygote_for(worker_env({}))
        if zygote is not None:
            try:
                pid = zygote.call(name, dict(request), extra, os.getcwd(), writes)
                proc = Forked(pid, zygote)
            except (OSError, ValueError, KeyError):
                proc = None  # the zygote went away: a new interpreter instead
        if proc is None:
            env = {**os.environ, **extra}
            root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            proc = lifeline.popen(
                [sys.executable, "-m", "harness.execute.call_child", name, json.dumps(dict(request)), str(writes[2])],
                stdin=subprocess.DEVNULL, stdout=writes[0], stderr=writes[1], pass_fds=(writes[2],), env=env,
                start_new_session=True)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    for fd in writes:
        os.close(fd)
    return _collect(proc, reads, timeout)


def _collect(proc: Any, reads: list[int], timeout: float) -> Sandboxed:
    """Read the child's stdout, stderr and answer until it ends or ``timeout`` seconds pass (then kill its
    process group); what it did."""
    chunks: dict[int, list[bytes]] = {fd: [] for fd in reads}
    open_fds = list(reads)
    deadline = time.monotonic() + timeout
    timed_out = False
    rc: int | None = None
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
        if not timed_out:  # every pipe closed: the child is ending (or closed them and hangs on)
            try:
                rc = proc.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the child and whatever it started
            except OSError:
                proc.kill()
            proc.wait(30)
    finally:
        for fd in reads:
            os.close(fd)
    out, err, raw = (b"".join(chunks[fd]) for fd in reads)
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    if timed_out:
        return Sandboxed("timeout", None, stdout, stderr)
    try:
        answer = json.loads(raw) if raw else None
    except ValueError:  # a torn answer: the child died while writing it
        answer = None
    if rc is None or rc < 0:
        return Sandboxed("crashed", rc, stdout, stderr)
    if isinstance(answer, dict) and rc == 2 and ERROR in answer:
        return Sandboxed("error", rc, stdout, stderr, error=str(answer[ERROR]))
    if isinstance(answer, dict) and rc == 0 and ANSWER in answer:
        return Sandboxed("ok", rc, stdout, stderr, answer=answer[ANSWER])
    return Sandboxed("exited", rc, stdout, stderr)
