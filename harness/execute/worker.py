"""Worker processes: each runs subjects for the runner, so a crash or a hang costs one run, not the campaign.

A :class:`Worker` is a spawned process (a clean interpreter: no state inherited from the parent)
with a pipe. It imports Chainer once, loads the plug-ins it was given, then answers requests
``(case_json, subject, device, context)`` with a :class:`~harness.subjects.base.RunResult`.
The parent waits at most ``timeout`` seconds for each answer; a worker that dies (segfault,
abort, out of memory) or does not answer in time is killed and reported, and the caller starts
a new one. Environment-level settings (``CUBLAS_WORKSPACE_CONFIG``, ``OMP_NUM_THREADS``,
``PYTHONHASHSEED``) are given to the process at start-up, the only time they take effect.

Memory: each worker's address space is limited (``resource.RLIMIT_AS``, soft limit only) to
``memory_limit`` bytes: the :class:`Worker` argument, else ``$HARNESS_WORKER_MEMORY`` (bytes;
``0`` or ``none`` for no limit), else half the machine's RAM. A subject that allocates beyond it
gets ``MemoryError`` (an ``error`` row) or, if native code aborts, dies (a ``crashed`` row); the
machine never swaps. The limit is lifted before the first GPU run in a worker: CuPy and the CUDA
driver reserve tens of GiB of virtual address space that is never backed by host memory, so
``RLIMIT_AS`` would refuse them for no reason (a cgroup limit would be the tool there).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from typing import Any, Mapping

from harness.core.errors import WorkerError
from harness.subjects.base import ErrorInfo, RunResult

__all__ = ["Worker", "worker_main", "MEMORY_ENV", "default_memory_limit", "parse_memory_limit"]

#: Environment variable for the workers' default memory limit (bytes; 0 or "none": no limit).
MEMORY_ENV = "HARNESS_WORKER_MEMORY"
# How the parent tells the child its limit (internal).
_LIMIT_ENV = "HARNESS_WORKER_RLIMIT_AS"


def parse_memory_limit(text: str, name: str = MEMORY_ENV) -> int | None:
    """Bytes from ``text`` (an int, ``0``/``none`` for no limit); a bad value is one InvalidArgument line."""
    from harness.core.errors import InvalidArgument

    t = text.strip().lower()
    if t in ("", "0", "none", "off"):
        return None
    try:
        value = int(t)
    except ValueError:
        raise InvalidArgument(f"{name}={text!r} must be a number of bytes, or 0/none for no limit") from None
    if value < 0:
        raise InvalidArgument(f"{name}={text!r} must be a number of bytes, or 0/none for no limit")
    return value


def default_memory_limit() -> int | None:
    """``$HARNESS_WORKER_MEMORY`` if set, else half the machine's RAM (None where that is unknown)."""
    if MEMORY_ENV in os.environ:
        return parse_memory_limit(os.environ[MEMORY_ENV])
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) // 2
    except (AttributeError, ValueError, OSError):
        return None


def _apply_memory_limit() -> None:
    """In the child, before anything big is imported: the soft RLIMIT_AS the parent asked for."""
    text = os.environ.pop(_LIMIT_ENV, "")
    if not text:
        return
    try:
        import resource
    except ImportError:  # not POSIX: no limit, said in the module docstring
        return
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = int(text)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        # The soft limit only, so that a GPU run can lift it again (see _lift_memory_limit).
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        pass


def _lift_memory_limit() -> None:
    """Before a GPU run: CuPy/CUDA reserve huge virtual address space, so RLIMIT_AS must not apply."""
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        except (ValueError, OSError):
            pass


def worker_main(conn: Any, plugins: tuple[str, ...]) -> None:
    """The worker's loop (runs in the child)."""
    from harness.core.cases import Case
    from harness.core.compat import import_chainer
    from harness.core.contexts import get_context
    from harness.core.devices import parse_device
    from harness.subjects.base import execute
    from harness.subjects.registry import get_subject, load_entry_points, load_plugin

    try:
        import_chainer()
        load_entry_points()
        for p in plugins:
            load_plugin(p)
        conn.send(("ready", os.getpid()))
    except Exception as exc:  # noqa: BLE001 - report set-up failure, then stop
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    cases: dict[str, Case] = {}
    while True:
        try:
            msg = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if msg is None:
            return
        case_json, subject_name, device_id, context_name = msg
        if not str(device_id).startswith("cpu"):
            _lift_memory_limit()
        case = cases.get(case_json)
        if case is None:
            case = cases[case_json] = Case.from_json(case_json)
        try:
            result = execute(get_subject(subject_name), case, parse_device(device_id), get_context(context_name))
        except Exception as exc:  # noqa: BLE001 - e.g. an unknown subject: still an answer
            result = RunResult(subject_name, case.id, device_id, context_name, "error",
                               error=ErrorInfo(type(exc).__name__, str(exc), "setup"))
        conn.send(result)


class Worker:
    """One spawned worker process with its environment overrides."""

    def __init__(self, env: Mapping[str, str] | None = None, plugins: tuple[str, ...] = (),
                 label: str = "pool", start_timeout: float = 120.0,
                 memory_limit: int | None | str = "default") -> None:
        """``memory_limit``: bytes of address space for the worker (``RLIMIT_AS``), None for no limit,
        ``"default"`` for :func:`default_memory_limit` (``$HARNESS_WORKER_MEMORY``, else half the RAM)."""
        self.env = dict(env or {})
        if memory_limit == "default":
            memory_limit = default_memory_limit()
        if memory_limit is not None and (not isinstance(memory_limit, int) or isinstance(memory_limit, bool)
                                         or memory_limit <= 0):
            from harness.core.errors import InvalidArgument

            raise InvalidArgument(f"memory_limit={memory_limit!r} must be a positive int (bytes) or None")
        self.memory_limit: int | None = memory_limit
        self.plugins = tuple(plugins)
        self.label = label
        self.start_timeout = start_timeout
        self.proc: Any = None
        self.conn: Any = None
        self._send: Any = None
        self.pid: int | None = None
        self.started_at = 0.0
        self.startup_seconds = 0.0

    def start(self) -> "Worker":
        """Start ``python -m harness.execute.worker`` with the environment overrides; returns without waiting.

        A plain subprocess (not multiprocessing's spawn) so the worker never re-imports the
        parent's ``__main__``; requests and answers travel on two private pipes, so anything a
        subject prints cannot corrupt them.
        """
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        env = {**os.environ, **self.env}
        env.pop(_LIMIT_ENV, None)
        if self.memory_limit is not None:
            env[_LIMIT_ENV] = str(self.memory_limit)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        quiet = os.environ.get("HARNESS_WORKER_STDERR") != "1"
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.execute.worker", str(req_r), str(resp_w), json.dumps(list(self.plugins))],
            pass_fds=(req_r, resp_w), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if quiet else None, close_fds=True)
        os.close(req_r)
        os.close(resp_w)
        self._send = Connection(req_w, readable=False)
        self.conn = Connection(resp_r, writable=False)
        self.pid = None
        return self

    def wait_ready(self) -> None:
        """Block until the worker has imported Chainer and its plug-ins."""
        if self.pid is not None:
            return
        if not self.conn.poll(self.start_timeout):
            self.kill()
            raise WorkerError(f"worker {self.label} did not start within {self.start_timeout:.0f} s")
        try:
            kind, info = self.conn.recv()
        except EOFError:
            code = self.proc.wait(5)
            self.kill()
            raise WorkerError(f"worker {self.label} died while starting (exit code {code})") from None
        if kind != "ready":
            self.kill()
            raise WorkerError(f"worker {self.label} failed to start: {info}")
        self.pid = int(info)
        self.startup_seconds = time.perf_counter() - self.started_at

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def run(self, case_json: str, subject: str, device: str, context: str, timeout: float,
            case_id: str = "") -> RunResult:
        """One run; a death or a timeout becomes a ``crashed`` / ``timeout`` result (the worker is gone then).

        ``case_id`` labels those results; the caller knows it, so the JSON is not parsed again here.
        """
        self.wait_ready()
        if not case_id:
            from harness.core.cases import Case

            case_id = Case.from_json(case_json).id
        base = dict(subject=subject, case_id=case_id, device=device, context=context)
        try:
            self._send.send((case_json, subject, device, context))
        except (BrokenPipeError, OSError):
            return self._dead(base, "setup")
        if not self.conn.poll(timeout):
            self.kill()
            return RunResult(**base, status="timeout",
                             error=ErrorInfo("Timeout", f"no answer within {timeout:g} s; worker killed", "run"))
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            return self._dead(base, "run")

    def _dead(self, base: dict[str, str], phase: str) -> RunResult:
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        if code is not None and code < 0:
            try:
                what = signal.Signals(-code).name
            except ValueError:
                what = f"signal {-code}"
            msg = f"worker died with {what}"
        else:
            msg = f"worker exited with code {code}"
        return RunResult(**base, status="crashed", error=ErrorInfo("WorkerCrash", msg, phase))

    def kill(self) -> None:
        """Stop the process now."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for c in (getattr(self, "_send", None), self.conn):
            if c is not None and not c.closed:
                c.close()
        self.pid = None

    def request_stop(self) -> None:
        """Ask the worker to exit, without waiting."""
        if self.proc is not None and self.proc.poll() is None and self._send is not None:
            try:
                self._send.send(None)
            except (BrokenPipeError, OSError):
                pass

    def close(self) -> None:
        """Ask the worker to exit, then make sure it has."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self._send.send(None)
                self.proc.wait(5)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


def _child(argv: list[str]) -> None:
    _apply_memory_limit()
    read_fd, write_fd, plugins = int(argv[0]), int(argv[1]), tuple(json.loads(argv[2]))
    conn = _Duplex(Connection(read_fd, writable=False), Connection(write_fd, readable=False))
    worker_main(conn, plugins)


class _Duplex:
    """Two one-way pipe connections as one (the child's side)."""

    def __init__(self, rx: Connection, tx: Connection) -> None:
        self.rx, self.tx = rx, tx

    def recv(self) -> Any:
        return self.rx.recv()

    def send(self, obj: Any) -> None:
        self.tx.send(obj)


if __name__ == "__main__":
    _child(sys.argv[1:])
