"""The child's side of a named call: a function of the harness run on a JSON request, its JSON answer written
back on a descriptor of its own (never parsed out of what the child printed).

A function is named ``module:qualname`` (:func:`name_of`) and must live in ``harness``; the request and the
answer are plain JSON data. :func:`serve` runs one in the calling process, which is a child made for it (forked
by the workers' zygote, or ``python -m harness.execute.call_child``); the parent's side is
:func:`harness.execute.sandbox.run_call`.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import Any, Callable, Mapping

from harness.core.errors import HarnessError

__all__ = ["name_of", "serve", "ERROR", "ANSWER"]

#: The answer's keys: the function's return value, or one line saying why there is none (exit 2).
ANSWER = "answer"
ERROR = "error"


def name_of(fn: Callable[..., Any]) -> str:
    """``module:qualname`` of a module-level function of the harness (what :func:`serve` finds again)."""
    name = f"{fn.__module__}:{fn.__qualname__}"
    if not fn.__module__.startswith("harness.") or "." in fn.__qualname__ or "<" in fn.__qualname__:
        raise ValueError(f"{name} is not a module-level function of the harness")
    return name


def _function(name: str) -> Callable[[Mapping[str, Any]], Any]:
    module, _, attr = name.partition(":")
    if not module.startswith("harness.") or not attr:
        raise ValueError(f"{name!r} is not a function of the harness")
    fn: Callable[[Mapping[str, Any]], Any] = getattr(importlib.import_module(module), attr)
    return fn


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def serve(name: str, request: Mapping[str, Any], answer_fd: int) -> int:
    """Run function ``name`` on ``request`` here and write ``{"answer": ...}`` (exit code 0) or ``{"error":
    "one line"}`` (exit code 2: a harness error, or a plug-in ending the process) on ``answer_fd``; the exit code.
    Anything else is a traceback on stderr and exit code 1, without an answer."""
    code, out = 1, None
    try:
        out = {ANSWER: _function(name)(request)}
        code = 0
    except HarnessError as exc:
        out, code = {ERROR: f"{type(exc).__name__}: {_first_line(exc)}"}, 2
    except SystemExit as exc:  # a plug-in or library ending "the process": never the function's own answer
        out, code = {ERROR: f"a plug-in or library ended the process (SystemExit({exc.code!r})) while "
                            f"{name.rpartition(':')[2]} ran: nothing it would have written can be trusted"}, 2
    except BaseException:  # noqa: BLE001 - as an interpreter would: the traceback, exit 1
        traceback.print_exc()
    if out is not None:
        data = json.dumps(out).encode()
        while data:
            data = data[os.write(answer_fd, data):]
    os.close(answer_fd)
    return code


if __name__ == "__main__":  # python -m harness.execute.call_child NAME REQUEST_JSON ANSWER_FD
    from harness.core.lifeline import adopt

    adopt()  # dies with the process that asked
    sys.exit(serve(sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])))
