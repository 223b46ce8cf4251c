"""Worker processes: each runs subjects for the runner, so a crash or a hang costs one run, not the campaign.

A :class:`Worker` is the parent's handle on a separate process with two private pipes. The process imports
Chainer, loads the plug-ins it was given, then answers requests (:mod:`harness.execute.worker_loop`); each
run's answer is a :class:`~harness.execute.answers.Answer` (:mod:`harness.execute.answers`: framed JSON and
raw arrays, big ones in a spool file, never a pickle). The parent waits for each answer while the worker has
used less than ``timeout`` seconds of CPU and slept less than a generous wall limit
(:mod:`harness.execute.run_clock`: a busy machine slows a run, it does not end it); a worker that dies
(segfault, abort, out of memory), does not answer within those limits or answers something that is not a
well-formed answer is killed and reported (``crashed`` / ``timeout``), and the caller starts a new one.

Two ways to start one (``fork``):

- *spawned* (``fork=False``, the default and what fresh-process runs use): ``python -m
  harness.execute.worker``, a brand-new interpreter with its own hash seed and its own imports;
- *forked* (``fork=True``, the campaign's pooled worker): forked from the
  :class:`~harness.execute.zygote.Zygote` of its start-up environment, which imported NumPy, Chainer and
  ESPnet once (:mod:`harness.execute.zygote`). Where a zygote cannot be had the worker is spawned.

Each worker's address space is limited to ``memory_limit`` bytes (:mod:`harness.execute.memory_limits`).

This module is also the program both kinds of process run: ``python -m harness.execute.worker`` is a
spawned worker, ``python -m harness.execute.worker --zygote FD`` a zygote (the plug-in registry takes this
name as a process that runs subject code).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from typing import Any, Callable, Iterator, Mapping

from harness.core import lifeline
from harness.core.errors import WorkerError
from harness.execute.answers import Answer, Malformed, NoAnswer, decode_answer, read_frame, widen_pipe
from harness.execute.memory_limits import LIMIT_ENV, MEMORY_ENV, default_memory_limit, output_limit
from harness.execute.run_clock import CHECK_SECONDS, WALL_FACTOR, ProcessClock, RunBudget, RunTime
from harness.execute.worker_loop import child_main
from harness.execute.zygote import Forked, worker_env, zygote_for, zygote_main
from harness.subjects.base import ErrorInfo, RunKeys, RunResult

__all__ = ["Worker"]


_SPOOL_PREFIX = "harness-spool-"
_swept: set[str] = set()


def _spool_base() -> str:
    """``/dev/shm`` where it exists with at least 1 GiB free (arrays then never touch a disk), else the temp dir.

    The first call in a process removes the spool folders of harness processes that no longer exist (one
    killed with SIGKILL cannot clean up after itself; each folder's name carries its owner's pid)."""
    base = tempfile.gettempdir()
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= (1 << 30) and os.access("/dev/shm", os.W_OK):
            base = "/dev/shm"
    except OSError:
        pass
    if base not in _swept:
        _swept.add(base)
        lifeline.sweep(base, _SPOOL_PREFIX)
    return base


class Worker:
    """One worker process (spawned, or forked from a :class:`Zygote`) with its environment overrides."""

    def __init__(self, env: Mapping[str, str] | None = None, plugins: tuple[str, ...] = (),
                 label: str = "pool", start_timeout: float = 120.0,
                 memory_limit: int | None | str = "default", fork: bool = False) -> None:
        """``memory_limit``: bytes of address space for the worker (``RLIMIT_AS``), None for no limit,
        ``"default"`` for :func:`default_memory_limit` (``$HARNESS_WORKER_MEMORY``, else half the RAM).
        ``fork``: fork the worker from this environment's zygote (a pooled worker) rather than spawn a
        brand-new interpreter (what a fresh-process run needs)."""
        self.env = dict(env or {})
        if memory_limit == "default":
            memory_limit = default_memory_limit()
        if memory_limit is not None and (not isinstance(memory_limit, int) or isinstance(memory_limit, bool)
                                         or memory_limit <= 0):
            from harness.core.errors import InvalidArgument

            raise InvalidArgument(f"memory_limit={memory_limit!r} must be a positive int (bytes) or None")
        self.memory_limit: int | None = memory_limit
        self.output_limit = output_limit()  # (a bad $HARNESS_MAX_OUTPUT_BYTES: one line, before the worker starts)
        self.plugins = tuple(plugins)
        self.label = label
        self.start_timeout = start_timeout
        self.fork = fork
        self.forked = False
        self.proc: Any = None
        self._rx_fd: int | None = None
        self._send: Any = None
        self.pid: int | None = None
        self.started_at = 0.0
        self.startup_seconds = 0.0
        self.spool: str | None = None
        self._seq = 0
        #: called between two looks at a long run's clock (a lowered lane's priority follows the machine's load:
        #: :meth:`harness.execute.worker_sets.WorkerSet.follow`); None: nothing
        self.watch: Callable[[], None] | None = None

    def start(self) -> "Worker":
        """Start the worker (fork it from the zygote, or spawn ``python -m harness.execute.worker``); returns
        without waiting for it to be ready. Requests and answers travel on two private pipes, so anything a
        subject prints cannot corrupt them."""
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        widen_pipe(resp_w)
        self.spool = tempfile.mkdtemp(prefix=lifeline.owned_prefix(_SPOOL_PREFIX), dir=_spool_base())
        self.started_at = time.perf_counter()
        env = worker_env(self.env)
        zygote = zygote_for(env) if self.fork else None
        self.proc = None
        if zygote is not None:
            try:
                pid = zygote.fork(req_r, resp_w, self.plugins, self.memory_limit, self.spool)
                self.proc = Forked(pid, zygote)
                self.forked = True
            except (OSError, ValueError, KeyError, WorkerError):
                self.proc = None
        if self.proc is None:
            if self.memory_limit is not None:
                env[LIMIT_ENV] = str(self.memory_limit)
            quiet = os.environ.get("HARNESS_WORKER_STDERR") != "1"
            self.proc = lifeline.popen(
                [sys.executable, "-m", "harness.execute.worker", str(req_r), str(resp_w),
                 json.dumps(list(self.plugins)), self.spool],
                pass_fds=(req_r, resp_w), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL if quiet else None, close_fds=True)
            self.forked = False
        os.close(req_r)
        os.close(resp_w)
        self._send = Connection(req_w, readable=False)
        self._rx_fd = resp_r
        self.pid = None
        return self

    def wait_ready(self) -> None:
        """Block until the worker has imported Chainer and its plug-ins."""
        if self.pid is not None:
            return
        assert self._rx_fd is not None, "start() opens the answer pipe"
        try:
            msg = json.loads(read_frame(self._rx_fd, time.monotonic() + self.start_timeout))
        except NoAnswer:
            self.kill()
            raise WorkerError(f"worker {self.label} did not start within {self.start_timeout:.0f} s") from None
        except EOFError:
            try:
                code = self.proc.wait(5)
            except subprocess.TimeoutExpired:
                code = None
            self.kill()
            limit = (f"; its address space was limited to {self.memory_limit:,} bytes (${MEMORY_ENV}, else half "
                     f"the RAM): too little?" if self.memory_limit is not None and code not in (None, 0) else "")
            raise WorkerError(f"worker {self.label} died while starting (exit code {code}){limit}") from None
        except (Malformed, ValueError, RecursionError) as exc:
            self.kill()
            raise WorkerError(f"worker {self.label} answered garbage while starting: {exc}") from None
        if not isinstance(msg, dict) or type(msg.get("ready")) is not int:
            self.kill()
            failed = msg.get("failed") if isinstance(msg, dict) else None
            raise WorkerError(f"worker {self.label} failed to start: {str(failed)[:300]}")
        self.pid = int(msg["ready"])
        self.startup_seconds = time.perf_counter() - self.started_at

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def run(self, case_json: str, subject: str, device: str, context: str, timeout: float,
            case_id: str = "") -> RunResult:
        """One run; a death, a timeout or a malformed answer becomes a ``crashed`` / ``timeout`` result (the
        worker is gone then). ``case_id`` labels those results; the caller knows it, so the JSON is not
        parsed again here."""
        return self.run_answer(case_json, subject, device, context, timeout, case_id).result

    def run_answer(self, case_json: str, subject: str, device: str, context: str, timeout: float,
                   case_id: str = "") -> Answer:
        """:meth:`run`, with what the worker measured of each array (digest, NaN/Inf counts)."""
        return next(self.run_answers(case_json, subject, device, context, timeout, 1, case_id))

    def run_answers(self, case_json: str, subject: str, device: str, context: str, timeout: float,
                    count: int, case_id: str = "") -> Iterator[Answer]:
        """``count`` runs asked for at once: the worker runs them one after another and answers each as it
        ends, so it never waits on this process between them. Each answer is due once the worker has used
        ``timeout`` seconds of CPU since this process started waiting for it, or slept past the wall limit
        (:class:`~harness.execute.run_clock.RunBudget`); a ``timeout`` answer carries what the run got
        (:attr:`Answer.timing`). The answers stop early after the first ``skipped`` one (the
        worker stops there too) and after one that ends the worker (``crashed``, ``timeout``): the caller asks
        a new worker for the rest."""
        self.wait_ready()
        assert self._rx_fd is not None, "start() opens the answer pipe"
        if not case_id:
            from harness.core.cases import Case

            case_id = Case.from_json(case_json).id
        base: RunKeys = dict(subject=subject, case_id=case_id, device=device, context=context)
        first = self._seq + 1
        self._seq += count
        try:
            self._send.send((case_json, subject, device, context, first, count))
        except (BrokenPipeError, OSError):
            yield Answer(self._dead(base, "setup"), {})
            return
        ended: RunTime | None
        previous: Answer | None = None  # the last ok answer: a repeat of its bits comes without arrays
        for seq in range(first, first + count):
            path = os.path.join(self.spool or "", f"{seq}.bin")
            spooled = True  # until the answer says it came whole in the frame: a file may be there
            ended = None
            try:
                ended = self._await(timeout)
                if ended is not None:
                    raise NoAnswer()
                payload = read_frame(self._rx_fd, time.monotonic() + timeout * WALL_FACTOR)
                answer = decode_answer(payload, base, path, self.output_limit, previous)
                spooled = answer.spooled
                if answer.sent_ok:
                    previous = answer
            except NoAnswer:
                self.kill()
                yield Answer(RunResult(**base, status="timeout", error=ErrorInfo(
                    "Timeout", f"no answer within {timeout:g} s"
                               + (f" of CPU time: {ended.describe()}" if ended is not None else "")
                               + "; worker killed", "run")), {}, timing=ended)
                return
            except (EOFError, OSError):
                yield Answer(self._dead(base, "run"), {})
                return
            except Malformed as exc:
                self.kill()
                yield Answer(RunResult(**base, status="crashed", error=ErrorInfo(
                    "MalformedAnswer", f"{exc}; worker killed", "transfer")), {})
                return
            finally:
                if spooled:  # (most answers come whole in the frame: no file, and no system call for one)
                    try:
                        os.unlink(path)  # mapped already where it exists: the mapping outlives the name
                    except OSError:
                        pass
            try:
                yield answer
            except GeneratorExit:
                if seq < first + count - 1 and answer.result.status != "skipped":
                    self.kill()  # answers still on their way would be read as the next request's: no worker
                raise
            if answer.result.status == "skipped":
                return

    def _await(self, limit: float) -> RunTime | None:
        """Wait until the answer pipe has something to read: None then; the :class:`RunTime` that ended the wait
        where the worker used ``limit`` seconds of CPU, or slept past the wall limit (:mod:`harness.execute.
        run_clock`). Most runs answer within the first look; only a longer one reads the worker's clock."""
        assert self._rx_fd is not None, "start() opens the answer pipe"
        t0 = time.monotonic()
        if select.select([self._rx_fd], [], [], CHECK_SECONDS)[0]:
            return None
        budget = RunBudget(limit, ProcessClock(self.pid) if self.pid is not None else lambda: None, t0=t0)
        while True:
            ended = budget.check()
            if ended is not None:
                return ended
            if self.watch is not None:
                self.watch()
            wait = budget.deadline() - time.monotonic()
            if select.select([self._rx_fd], [], [], max(wait, 0.0))[0]:
                return None

    def _dead(self, base: RunKeys, phase: str) -> RunResult:
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
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self._send is not None and not self._send.closed:
            self._send.close()
        if self._rx_fd is not None:
            os.close(self._rx_fd)
            self._rx_fd = None
        if self.spool is not None:
            shutil.rmtree(self.spool, ignore_errors=True)
            self.spool = None
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


if __name__ == "__main__":
    lifeline.adopt()  # dies with the process that started it
    if sys.argv[1:2] == ["--zygote"]:
        zygote_main(int(sys.argv[2]))
    else:
        child_main(sys.argv[1:])
