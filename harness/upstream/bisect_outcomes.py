"""What a bisection probe found, and the log that keeps it.

An outcome is what the exported script's ``--save-outputs`` file holds: the digest of every tensor by name, in
the file's order (:func:`harness.judge.digest.digest`: dtype, shape and bits), or the error the call raised
(its ``__error__`` entry), compared as a whole. The log of one question is JSON lines, one per finished probe:
its pins and its outcome (or why it could not be probed, kept for the record and probed again on a rerun). A
line that cannot be read (cut short by a killed run, not UTF-8, not the shape written here) is dropped and the
log rewritten without it.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from typing import Any, Callable, Union

from harness.core.errors import InvalidArgument
from harness.upstream import bisect_envs as envs

__all__ = ["Outcome", "read_outputs", "first_difference", "Log", "ERROR_ENTRY"]

#: The tensors' digests by name, in order; or the error the call raised.
Outcome = Union[list[tuple[str, str]], str]
#: The entry of a ``--save-outputs`` file that holds the call's error instead of its outputs.
ERROR_ENTRY = "__error__"


def read_outputs(path: str) -> Outcome:
    """The outcome a script saved at ``path``; :class:`~harness.upstream.bisect_envs.InstallFailed` (the probe
    cannot be judged) where there is no readable file."""
    import numpy as np

    from harness.judge.digest import digest

    try:
        with np.load(path, allow_pickle=False) as data:
            names = list(data.files)
            if ERROR_ENTRY in names:
                return str(data[ERROR_ENTRY][()])
            if not names:
                raise envs.InstallFailed("the script saved no outputs")
            return [(name, digest(np.asarray(data[name]))) for name in names]
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise envs.InstallFailed(f"the script's outputs cannot be read: {type(exc).__name__}: {exc}") from None


def first_difference(a: Outcome, b: Outcome) -> str:
    """The first tensor whose digest differs (in ``b``'s order), ``error`` where one of them raised, or what
    differs."""
    if isinstance(a, list) and isinstance(b, list):
        da = dict(a)
        for name, d in b:
            if da.get(name) != d:
                return name
        return next((n for n, _ in a if n not in dict(b)), "outputs")
    return "error" if isinstance(a, str) != isinstance(b, str) else "error message"


def _outcome(value: Any) -> Outcome | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
                                       for p in value):
        return [(p[0], p[1]) for p in value]
    return None


def _record(line: bytes) -> dict[str, Any] | None:
    """A log line as written by :meth:`Log.add`, or None where it is not one."""
    try:
        rec = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(rec, dict):
        return None
    pins = rec.get("pins")
    if not (isinstance(pins, dict) and pins and all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in pins.items())):
        return None
    if "outcome" in rec:
        return rec if _outcome(rec["outcome"]) is not None else None
    return rec if isinstance(rec.get("failed"), str) else None


def _key(pins: dict[str, str]) -> str:
    return " ".join(f"{n}=={v}" for n, v in sorted(pins.items()))


class Log:
    """The JSON-lines log of one question, read back (and repaired) on a rerun."""

    def __init__(self, path: str, say: Callable[[str], None]) -> None:
        self.path = path
        self.done: dict[str, Outcome] = {}
        try:
            with open(path, "rb") as fh:
                lines = [ln for ln in fh.read().split(b"\n") if ln.strip()]
        except FileNotFoundError:
            lines = []
        except OSError as exc:
            raise InvalidArgument(f"cache: cannot read its log {path!r} ({exc.strerror})") from None
        good = [(ln, rec) for ln in lines for rec in (_record(ln),) if rec is not None]
        for _, rec in good:
            if "outcome" in rec:  # (a failure is kept for the record, never replayed: its cause may be fixed)
                self.done[_key(rec["pins"])] = _outcome(rec["outcome"])  # type: ignore[assignment]
        if len(good) < len(lines):
            self._rewrite([ln for ln, _ in good])
            say(f"log {path}: {len(lines) - len(good)} damaged line(s) dropped")

    def _rewrite(self, lines: list[bytes]) -> None:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.path), prefix=".log-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"".join(ln + b"\n" for ln in lines))
        os.replace(tmp, self.path)

    def get(self, key: str) -> Outcome | None:
        return self.done.get(key)

    def add(self, rec: dict[str, Any]) -> None:
        """Append one finished probe's line (whole, with its newline, in one write)."""
        if "outcome" in rec:
            out = rec["outcome"]
            rec = {**rec, "outcome": out if isinstance(out, str) else [list(p) for p in out]}
            self.done[_key(rec["pins"])] = out
        with open(self.path, "ab") as fh:
            fh.write((json.dumps(rec, sort_keys=True) + "\n").encode())
