"""Validators for command-line values: each a small function that returns the checked value or raises
:class:`~harness.core.errors.InvalidArgument` with one line naming the argument and the value.

The command line runs them all before any work starts, so a typo costs a second, not a campaign.
The file-system checks touch nothing that stays: a writability check creates and removes one probe
file in the nearest existing directory.
"""

from __future__ import annotations

import json
import math
import os
import tempfile

from harness.core.errors import InvalidArgument

__all__ = ["positive_seconds", "int_at_least", "name_list", "readable_file", "writable_dir", "writable_file",
           "run_dir_for_output", "baseline_dir", "jsonl_records"]


def positive_seconds(name: str, value: float) -> float:
    """A finite number of seconds > 0 (``nan``, ``inf``, 0 and negatives are refused)."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidArgument(f"{name}={value!r} must be a finite number of seconds > 0")
    return float(value)


def int_at_least(name: str, value: int | None, minimum: int) -> int | None:
    """An int >= ``minimum`` (None passes through: the option was not given)."""
    if value is None:
        return None
    if value < minimum:
        raise InvalidArgument(f"{name}={value} must be >= {minimum}")
    return value


def name_list(name: str, text: str | None) -> list[str] | None:
    """A comma list of names; None passes through, but an empty list (``''``, ``','``) is refused."""
    if text is None:
        return None
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise InvalidArgument(f"{name}={text!r} names nothing: give a comma list, or leave the option out")
    return list(dict.fromkeys(names))


def readable_file(name: str, path: str) -> str:
    """An existing regular file this process can open for reading."""
    if not os.path.exists(path):
        raise InvalidArgument(f"{name}={path!r} does not exist")
    if os.path.isdir(path):
        raise InvalidArgument(f"{name}={path!r} is a directory, not a file")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as exc:
        raise InvalidArgument(f"{name}={path!r} cannot be read: {exc.strerror}") from None
    return path


def _nearest_existing(path: str) -> str:
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p


def _probe(name: str, path: str, directory: str) -> None:
    # os.access is fooled by root, read-only mounts and ACLs; a real create-and-remove is not.
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".harness-probe-")
    except OSError as exc:
        raise InvalidArgument(f"{name}={path!r} cannot be written: {directory}: {exc.strerror}") from None
    os.close(fd)
    os.unlink(tmp)


def writable_dir(name: str, path: str) -> str:
    """A directory that exists and is writable, or that can be created (nothing is created here)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise InvalidArgument(f"{name}={path!r} is an existing file, not a directory")
    base = _nearest_existing(path)
    if not os.path.isdir(base):
        raise InvalidArgument(f"{name}={path!r} cannot be created: {base!r} is a file")
    _probe(name, path, base)
    return path


def writable_file(name: str, path: str) -> str:
    """A file path that can be written: not a directory, its directory exists-and-is-writable or can be made."""
    if os.path.isdir(path):
        raise InvalidArgument(f"{name}={path!r} is a directory, not a file")
    parent = os.path.dirname(os.path.abspath(path))
    base = _nearest_existing(parent)
    if not os.path.isdir(base):
        raise InvalidArgument(f"{name}={path!r} cannot be created: {base!r} is a file")
    _probe(name, path, base)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise InvalidArgument(f"{name}={path!r} exists and is not writable")
    return path


def run_dir_for_output(name: str, path: str) -> str:
    """A new run directory: writable, and either absent or empty (an existing run is never mixed into)."""
    writable_dir(name, path)
    if os.path.isdir(path) and os.listdir(path):
        raise InvalidArgument(f"{name}={path!r} is an existing non-empty directory: choose a new one, "
                              f"or continue it with --resume {path}")
    return path


def jsonl_records(name: str, path: str, required: tuple[str, ...] = ()) -> int:
    """Check a JSON-lines file line by line: every line an object holding ``required`` keys. A torn
    *last* line (an interrupted write) is allowed, as the campaign allows it. Returns the record count."""
    n = 0
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError as exc:
        raise InvalidArgument(f"{name}={path!r} cannot be read: {exc.strerror}") from None
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            if i == last:
                continue  # a torn last line
            raise InvalidArgument(f"{name}: {path}:{i + 1} is not a JSON object line") from None
        if not isinstance(rec, dict):
            raise InvalidArgument(f"{name}: {path}:{i + 1} is not a JSON object line")
        missing = [k for k in required if k not in rec]
        if missing:
            raise InvalidArgument(f"{name}: {path}:{i + 1} lacks {', '.join(map(repr, missing))}")
        n += 1
    return n


def baseline_dir(name: str, path: str) -> str:
    """A stored report directory that ``gate --baseline`` can read: a directory with a non-empty,
    well-formed ``tasks.jsonl`` (checked in well under a second, before any campaign runs)."""
    if not os.path.exists(path):
        raise InvalidArgument(f"{name}={path!r} does not exist")
    if not os.path.isdir(path):
        raise InvalidArgument(f"{name}={path!r} is not a directory (give a report directory)")
    tasks = os.path.join(path, "tasks.jsonl")
    if not os.path.isfile(tasks):
        raise InvalidArgument(f"{name}={path!r} holds no tasks.jsonl: not a report directory")
    if jsonl_records(name, tasks, ("key", "subject", "device", "context", "status")) == 0:
        raise InvalidArgument(f"{name}={path!r}: tasks.jsonl holds no task records")
    return path
