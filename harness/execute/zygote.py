"""The zygote: a process that has imported NumPy, Chainer and ESPnet once and forks pooled workers on request.

A pooled :class:`~harness.execute.worker.Worker` (``fork=True``) is forked from the :class:`Zygote` of its
start-up environment rather than spawned: it then costs a fork, not an import. It shares the zygote's hash
seed and its imported modules (their import-time state, never a subject's run: the zygote never runs one);
NumPy's global random state is re-seeded after the fork. Where a zygote cannot be had (no
``os.pidfd_open``, or it failed to start) :func:`zygote_for` says None and the worker is spawned. The zygote
also forks the children of named calls (:mod:`harness.execute.sandbox`, :mod:`harness.execute.call_child`).

The zygote is started as ``python -m harness.execute.worker --zygote`` (:func:`zygote_main` runs in it).
Environment-level settings (``CUBLAS_WORKSPACE_CONFIG``, ``OMP_NUM_THREADS``, ``PYTHONHASHSEED``) are given
to a worker's process at start-up (for a forked worker: to its zygote), the only time they take effect;
:func:`worker_env` builds that environment.

Apart from the parent's handle (:mod:`harness.execute.worker`): the handle asks a zygote for its process,
and the zygote runs the worker's loop (:mod:`harness.execute.worker_loop`) in what it forks.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from harness.core import lifeline
from harness.core.errors import WorkerError
from harness.execute.memory_limits import LIMIT_ENV, apply_memory_limit
from harness.execute.worker_loop import leave, worker_main

__all__ = ["Zygote", "Forked", "zygote_main", "worker_env", "zygote_for", "prestart_zygote", "close_zygotes"]


def zygote_main(sock_fd: int) -> None:
    """The zygote (runs in its own process): import once, then fork a worker for each request."""
    import numpy  # noqa: F401

    from harness.core.compat import import_chainer

    try:
        import_chainer()
        try:
            import espnet.nets.chainer_backend.deterministic_embed_id  # noqa: F401
        except Exception:  # noqa: BLE001 - ESPnet is optional to a worker: its subjects say so themselves
            pass
        import harness.core.cases  # noqa: F401
        import harness.core.contexts  # noqa: F401
        import harness.core.devices  # noqa: F401
        import harness.judge.comparator  # noqa: F401 - and with it judge.ulp and judge.digest
        import harness.subjects.registry  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        sock = socket.socket(fileno=sock_fd)
        sock.send(json.dumps({"failed": f"{type(exc).__name__}: {exc}"}).encode())
        return
    sock = socket.socket(fileno=sock_fd)
    sock.send(json.dumps({"ready": os.getpid()}).encode())
    codes: dict[int, int] = {}

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            codes[pid] = os.waitstatus_to_exitcode(status)

    while True:
        ready, _, _ = select.select([sock], [], [], 0.5)
        reap()
        if not ready:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 4)
        except OSError:
            return
        if not data:
            return  # the parent is gone: so is the zygote (its workers see their pipes close)
        req = json.loads(data)
        if req["op"] == "fork":
            pid = lifeline.fork()
            if pid == 0:
                code = 0
                try:
                    sock.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    apply_memory_limit(req.get("memory_limit"))
                    np.random.seed()  # a forked worker must not repeat its zygote's global random stream
                    worker_main(Connection(fds[0], writable=False), fds[1], tuple(req["plugins"]), req["spool"])
                except BaseException:  # noqa: BLE001 - never return into the zygote's loop
                    code = 1
                finally:
                    leave(code)
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"pid": pid}).encode())
        elif req["op"] == "call":
            pid = lifeline.fork()
            if pid == 0:
                sock.close()
                _call_child(req, fds)  # never returns
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"pid": pid}).encode())
        elif req["op"] == "status":
            pid, end = int(req["pid"]), time.monotonic() + float(req.get("wait", 5.0))
            while pid not in codes and time.monotonic() < end:
                try:
                    got, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    break
                if got:
                    codes[pid] = os.waitstatus_to_exitcode(status)
                    break
                time.sleep(0.01)
            sock.send(json.dumps({"code": codes.pop(pid, None)}).encode())


def _call_child(req: dict[str, Any], fds: list[int]) -> None:
    """In a process forked by the zygote: the named call ``req`` asks for (:func:`harness.execute.call_child.serve`),
    in its own session (so a timeout kills its whole group), stdout and stderr on the first two pipes passed,
    the answer on the third, then exit."""
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in (null, fds[0], fds[1]):
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.update(req["env"])
        np.random.seed()  # not the zygote's global random stream
        from harness.execute.call_child import serve

        code = serve(req["function"], req["request"], fds[2])
    except BaseException:  # noqa: BLE001 - as an interpreter would: the traceback, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        leave(code)


class Zygote:
    """A process that has imported NumPy, Chainer and ESPnet once and forks pooled workers on request.

    One per start-up environment (:func:`zygote_for`); it never runs a subject, so a forked worker starts
    from imported modules only. Requests travel on a Unix ``SOCK_SEQPACKET`` pair, the new worker's pipe
    ends passed as file descriptors; the zygote reaps its workers and reports their exit codes."""

    def __init__(self, env: Mapping[str, str], start_timeout: float = 120.0) -> None:
        """Start the zygote process; it is waited for at its first :meth:`fork` (or :meth:`wait_ready`)."""
        self.env = dict(env)
        self.lock = threading.Lock()
        self.start_timeout = start_timeout
        self.ready = False
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        quiet = os.environ.get("HARNESS_WORKER_STDERR") != "1"
        self.proc = lifeline.popen(
            [sys.executable, "-m", "harness.execute.worker", "--zygote", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if quiet else None, close_fds=True)
        theirs.close()
        self.sock = ours

    def wait_ready(self) -> None:
        """Block until the zygote has imported everything; WorkerError if it cannot."""
        with self.lock:
            if self.ready:
                return
            self.sock.settimeout(self.start_timeout)
            try:
                msg = json.loads(self.sock.recv(1 << 16) or b"{}")
            except (OSError, ValueError):
                msg = {}
            self.sock.settimeout(30.0)
            self.ready = "ready" in msg
        if not self.ready:
            self.close()
            raise WorkerError(f"the worker zygote did not start: {msg.get('failed', 'no answer')}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _ask(self, req: dict[str, Any], fds: tuple[int, ...] = ()) -> dict[str, Any]:
        with self.lock:
            data = json.dumps(req).encode()
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.send(data)
            reply = self.sock.recv(1 << 16)
        if not reply:
            raise OSError("the worker zygote closed its socket")
        return json.loads(reply)

    def fork(self, rx_fd: int, tx_fd: int, plugins: tuple[str, ...], memory_limit: int | None,
             spool: str) -> int:
        """A new worker reading requests on ``rx_fd`` and answering on ``tx_fd``; its pid."""
        self.wait_ready()
        return int(self._ask({"op": "fork", "plugins": list(plugins), "memory_limit": memory_limit,
                              "spool": spool}, (rx_fd, tx_fd))["pid"])

    def call(self, function: str, request: Mapping[str, Any], env: Mapping[str, str], cwd: str,
             fds: Sequence[int]) -> int:
        """A new process running the named call ``function(request)`` (forked: the imports are done) with
        ``env`` added and ``cwd``, its stdout, stderr and answer on the three descriptors ``fds``; its pid
        (the leader of its own session)."""
        self.wait_ready()
        return int(self._ask({"op": "call", "function": function, "request": dict(request), "env": dict(env),
                              "cwd": cwd}, tuple(fds))["pid"])

    def exit_code(self, pid: int, wait: float = 5.0) -> int | None:
        """The exit code of worker ``pid`` (negative: the signal), waiting up to ``wait`` s; None if unknown."""
        try:
            code = self._ask({"op": "status", "pid": pid, "wait": wait})["code"]
        except (OSError, ValueError, KeyError):
            return None
        return None if code is None else int(code)

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            if self.proc.poll() is None:
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)


_ZYGOTES: dict[tuple[tuple[str, str], ...], Zygote] = {}
#: The most zygotes one process keeps (least recently used closed first): one per start-up environment of a
#: campaign is three on the CPU (default, omp1, hashseed), four with the GPU's cublas_ws.
_MAX_ZYGOTES = 4
#: Variables that change while a process runs without changing what a worker is (pytest sets this one).
_VOLATILE_ENV = frozenset({"PYTEST_CURRENT_TEST"})
_ZYGOTE_LOCK = threading.Lock()


def worker_env(overrides: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The environment a worker of these overrides starts with: the worker defaults
    (:data:`~harness.core.worker_defaults.WORKER_ENV_DEFAULTS`) under this process's environment, under the
    overrides; the harness's checkout first on PYTHONPATH; the folder of this process's shared draws
    (:func:`harness.core.array_draws.shared_folder`)."""
    from harness.core.array_draws import SHARED_ENV, shared_folder
    from harness.core.worker_defaults import WORKER_ENV_DEFAULTS

    env = {**WORKER_ENV_DEFAULTS, **os.environ, **dict(overrides)}
    env.pop(LIMIT_ENV, None)
    shared = shared_folder()  # the large draws of a case: drawn once, mapped by every worker
    if shared is not None:
        env[SHARED_ENV] = shared
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def zygote_for(env: Mapping[str, str], wait: bool = True) -> Zygote | None:
    """The zygote of this full environment (started on first use, kept for the process's life), ready unless
    ``wait`` is False; None where workers cannot be forked here (no ``os.pidfd_open``, ``HARNESS_ZYGOTE=0``,
    or the zygote failed to start: workers are spawned then)."""
    if not hasattr(os, "pidfd_open") or not hasattr(socket, "send_fds") or os.environ.get("HARNESS_ZYGOTE") == "0":
        return None
    key = tuple(sorted((k, v) for k, v in env.items() if k not in _VOLATILE_ENV))
    old: list[Zygote] = []
    with _ZYGOTE_LOCK:
        z = _ZYGOTES.pop(key, None)
        if z is None or not z.alive:
            if z is not None:
                old.append(z)
            try:
                z = Zygote(env)
            except OSError:
                return None
        _ZYGOTES[key] = z  # the most recently used last
        while len(_ZYGOTES) > _MAX_ZYGOTES:  # each holds Chainer's imports in memory: keep a few
            old.append(_ZYGOTES.pop(next(iter(_ZYGOTES))))
    for gone in old:
        gone.close()
    if wait:
        try:
            z.wait_ready()
        except WorkerError:
            with _ZYGOTE_LOCK:
                if _ZYGOTES.get(key) is z:
                    del _ZYGOTES[key]
            return None
    return z


def prestart_zygote(overrides: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
    """Start the zygote of a worker environment without waiting for it (it imports while the caller works)."""
    zygote_for(worker_env(overrides), wait=False)


def close_zygotes() -> None:
    """Stop every zygote this process started (at exit, or where a caller wants the processes gone)."""
    with _ZYGOTE_LOCK:
        zs = list(_ZYGOTES.values())
        _ZYGOTES.clear()
    for z in zs:
        z.close()


atexit.register(close_zygotes)


class Forked:
    """The parts of ``subprocess.Popen`` a :class:`~harness.execute.worker.Worker` uses, for a process forked
    by a zygote."""

    def __init__(self, pid: int, zygote: Zygote) -> None:
        self.pid, self.zygote = pid, zygote
        self.pidfd = os.pidfd_open(pid)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self.pidfd], [], [], 0)[0]:
            self.returncode = self.zygote.exit_code(self.pid)
            if self.returncode is None:
                self.returncode = -signal.SIGKILL  # gone, its status lost with its zygote
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self.pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            self.poll()
        return int(self.returncode)  # type: ignore[arg-type]

    def kill(self) -> None:
        if self.returncode is None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __del__(self) -> None:
        try:
            os.close(self.pidfd)
        except (OSError, AttributeError):
            pass

