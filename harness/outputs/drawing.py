"""The report's figures, drawn by a child forked before the campaign (:class:`FigureServer`).

The child imports the plotting library while the runs go, below this process's priority, so on what the runs
leave of the cores; at report time it is sent the figures' data (a few small frames) and draws each figure in
a child of its own while the report's process builds the tables. The report's process never imports
matplotlib, and no thread of it holds the lanes' threads back while something imports it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import signal
import struct
from typing import Any, Callable, Sequence

from harness.core import lifeline
from harness.core.forking import BEHIND, Forked, fork_safe, lower_priority

__all__ = ["DRAWERS", "Job", "draw", "draw_all", "draw_forked", "FigureServer"]

#: A figure's kind, and the function of :mod:`harness.outputs.figures` (or ``module.function`` of another
#: module of :mod:`harness.outputs`) that draws it from its arguments.
DRAWERS = {"matrix": "plot_matrix", "divergence": "plot_divergence", "error_ratio": "plot_error_ratio",
           "trajectory": "trajectory_files.plot_trajectory"}

#: One figure to draw: its file name, its kind (:data:`DRAWERS`), the drawing function's arguments.
Job = tuple[str, str, tuple[Any, ...]]


def draw(kind: str, args: Sequence[Any]) -> bytes:
    """The PNG of one figure of ``kind`` drawn from ``args``."""
    import importlib

    module, _, name = DRAWERS[kind].rpartition(".")
    return getattr(importlib.import_module(f"harness.outputs.{module or 'figures'}"), name)(*args)


def draw_all(jobs: Sequence[Job]) -> list[tuple[str, bytes]]:
    """``[(file name, PNG bytes)]`` of ``jobs``, drawn here, one after another."""
    return [(name, draw(kind, args)) for name, kind, args in jobs]


def draw_forked(jobs: Sequence[Job], nice: int = 0) -> Callable[[], list[tuple[str, bytes]]]:
    """Each of ``jobs`` drawn in a child forked from here, ``nice`` below this process, side by side (each
    where its child could not: :class:`~harness.core.forking.Forked`); the returned callable waits for
    ``[(file name, PNG bytes)]`` in their order."""
    children = [(name, Forked(functools.partial(draw, kind, args), nice=nice).start()) for name, kind, args in jobs]
    return lambda: [(name, child.result()) for name, child in children]


_LEN = struct.Struct("!Q")


def _send(fd: int, data: bytes) -> None:
    """``data`` with its length in front, and ``fd`` closed."""
    with os.fdopen(fd, "wb") as f:
        f.write(_LEN.pack(len(data)))
        f.write(data)


def _receive(fd: int) -> bytes:
    """What :func:`_send` sent (``fd`` closed), or ``b""`` where the sender left first. Framed by its length,
    not by the end of the pipe: a child forked from the sender's process meanwhile holds a copy of the write
    end, and the end would not come until that child exits."""
    with os.fdopen(fd, "rb") as f:
        head = f.read(_LEN.size)
        if len(head) < _LEN.size:
            return b""
        (n,) = _LEN.unpack(head)
        data = f.read(n)
    return data if len(data) == n else b""


class FigureServer:
    """A forked child that imports matplotlib at once and draws figures when asked (:meth:`draw`), at most
    once. Not started where forking is not safe (:func:`~harness.core.forking.fork_safe`); :attr:`running`
    says whether it was. Whatever goes wrong in it, :meth:`draw`'s waiter returns None and the caller draws
    the figures itself: the bytes are the same either way."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self._tx = -1
        self._rx = -1

    @property
    def running(self) -> bool:
        return self.pid is not None

    def beside_runs(self) -> Callable[[], None]:
        """What the report's process does beside a campaign's first runs: compile the page's templates, and,
        where this server is not running, import matplotlib for the figures' children
        (:func:`harness.outputs.render.preload`)."""
        from harness.outputs.render import compile_templates, preload

        return compile_templates if self.running else preload

    def start(self) -> "FigureServer":
        if not fork_safe():
            return self
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        try:
            pid = lifeline.fork()  # the server dies with this process
        except OSError:
            for fd in (req_r, req_w, ans_r, ans_w):
                os.close(fd)
            return self
        if pid == 0:  # the server: import, wait for the jobs, draw each in a child, answer, and leave
            code = 1
            try:
                os.close(req_w)
                os.close(ans_r)
                lower_priority(BEHIND)  # its children draw at its priority
                from harness.outputs.figures import preload_figures

                preload_figures()
                request = _receive(req_r)
                if request:  # (nothing: closed unsent, :meth:`close`)
                    out = draw_forked(pickle.loads(request))()
                    _send(ans_w, pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
                    code = 0
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(ans_w)
        self.pid, self._tx, self._rx = pid, req_w, ans_r
        return self

    def draw(self, jobs: Sequence[Job]) -> Callable[[], list[tuple[str, bytes]] | None]:
        """Send ``jobs``; the returned callable waits for ``[(file name, PNG bytes)]`` in their order, or None
        where the server is not running or failed. The send waits while the server is still importing."""
        if self.pid is None:
            return lambda: None
        try:
            _send(self._tx, pickle.dumps(list(jobs), protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:  # the server is gone
            self._tx = -1
            self.close()
            return lambda: None
        self._tx = -1

        def result() -> list[tuple[str, bytes]] | None:
            if self.pid is None:
                return None
            try:
                data = _receive(self._rx)
            except OSError:
                data = b""
            self._rx = -1
            _, status = os.waitpid(self.pid, 0)
            self.pid = None
            if os.waitstatus_to_exitcode(status) != 0 or not data:
                return None
            try:
                return pickle.loads(data)
            except Exception:  # noqa: BLE001 - a torn answer: the caller draws the figures itself
                return None

        return result

    def close(self) -> None:
        """Stop a server that was never asked (or whose answer is not wanted) and reap it."""
        for name in ("_tx", "_rx"):
            fd = getattr(self, name)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, -1)
        if self.pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = None
