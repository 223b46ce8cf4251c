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
from typing import Sequence

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
    """Run ``python -m harness *argv`` in a child (its own process group, killed whole on a timeout)."""
    env = {**os.environ, CHILD_ENV: "1", **(plugins_env or {})}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.Popen([sys.executable, "-m", "harness", *argv], stdin=subprocess.DEVNULL,
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
    if rc < 0:
        status = "crashed"
    elif rc == 2:
        status = "error"
    elif rc == 0 and out.rstrip().endswith(DONE):
        status = "ok"
        out = out.rstrip()[: -len(DONE)]
    else:
        status = "exited"
    return Sandboxed(status, rc, out, err)
