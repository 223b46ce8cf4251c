"""What runs inside a worker process: import Chainer and the plug-ins, then answer requests until told to stop.

A request is ``(case_json, subject, device, context, seq, count)``: ``count`` runs one after another, each
answered (:mod:`harness.execute.answers`) as it ends, so the worker never waits on the parent between a
task's pooled repetitions. The loop is the same in a spawned worker (:func:`child_main`, started as ``python
-m harness.execute.worker``) and in one forked by a zygote (:mod:`harness.execute.zygote`); both leave with
:func:`leave`, without the interpreter's finalization.

Apart from the parent's handle (:mod:`harness.execute.worker`) so that the zygote, which forks workers, can
import the loop without importing the handle that asks the zygote for them.
"""

from __future__ import annotations

import json
import os
import sys
from multiprocessing.connection import Connection

from harness.execute.answers import encode_answer, transfer_error, write_frame
from harness.execute.memory_limits import LIMIT_ENV, apply_memory_limit, lift_memory_limit, release_free_heap
from harness.subjects.base import ErrorInfo, RunResult

__all__ = ["worker_main", "child_main", "leave"]


def worker_main(rx: Connection, tx_fd: int, plugins: tuple[str, ...], spool: str) -> None:
    """The worker's loop (runs in the child): requests on ``rx``, framed JSON answers on ``tx_fd``."""
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
        write_frame(tx_fd, json.dumps({"ready": os.getpid()}).encode())
    except Exception as exc:  # noqa: BLE001 - report set-up failure, then stop
        write_frame(tx_fd, json.dumps({"failed": f"{type(exc).__name__}: {exc}"}).encode())
        return
    cases: dict[str, Case] = {}
    while True:
        try:
            msg = rx.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if msg is None:
            return
        case_json, subject_name, device_id, context_name, seq, count = msg
        if not str(device_id).startswith("cpu"):
            lift_memory_limit()
        case = cases.get(case_json)
        if case is None:  # the campaign's own Case.to_json: checked when the parent built the case
            case = cases[case_json] = Case.from_own_json(case_json)
        previous = None  # the meta of this request's last ok answer: a run with the same bits sends none
        for k in range(count):  # the runs one after another, each answered as soon as it ends
            try:
                result = execute(get_subject(subject_name), case, parse_device(device_id), get_context(context_name))
            except Exception as exc:  # noqa: BLE001 - e.g. an unknown subject: still an answer
                result = RunResult(subject_name, case.id, device_id, context_name, "error",
                                   error=ErrorInfo(type(exc).__name__, str(exc), "setup"))
            path = os.path.join(spool, f"{seq + k}.bin")
            try:
                payload, meta = encode_answer(result, path, previous)
                if meta is not None:
                    previous = meta
            except Exception as exc:  # noqa: BLE001 - a full spool, an unwritable array: the parent says so
                payload = transfer_error(exc)
            write_frame(tx_fd, payload)
            if result.status == "skipped":  # decided before anything ran: the runs after it would say the same
                break
        # The runs' arrays are freed: their pages go back to the system before the worker waits, as it may for
        # a long while (a pooled worker kept for its lane's next task), so that its memory is what it holds.
        if count:  # (none asked: nothing was held)
            del result, payload
        release_free_heap()


def child_main(argv: list[str]) -> None:
    """A spawned worker's life: ``argv`` is what the parent passed (its request and answer pipes, the
    plug-ins as JSON, the spool directory); the memory limit comes in the environment."""
    read_fd, write_fd, plugins, spool = int(argv[0]), int(argv[1]), tuple(json.loads(argv[2])), argv[3]
    apply_memory_limit(int(os.environ.pop(LIMIT_ENV, "0") or 0) or None)
    worker_main(Connection(read_fd, writable=False), write_fd, plugins, spool)
    # Asked to stop (or its pipe closed): every answer is written and nothing of a run is left to finish.
    # The interpreter's own finalization (tearing down Chainer's and NumPy's modules) is time the campaign
    # would wait for at the end of each group of tasks; a zygote's worker leaves the same way.
    leave(0)


def leave(code: int) -> None:
    """Exit now, without the interpreter's finalization, once what the process printed is flushed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stream: nothing left to keep
            pass
    os._exit(code)

