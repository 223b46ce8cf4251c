"""Atomic file writes: a temporary file in the same directory, then ``os.replace``.

A reader (or an interrupted campaign) sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Mapping

import numpy as np

__all__ = ["atomic_write", "atomic_json", "atomic_npz", "npz_key", "npz_members"]


def atomic_write(path: str, data: str | bytes) -> str:
    """Write text or bytes to ``path`` atomically; returns ``path``."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; reports are for reading
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_json(path: str, data: Any) -> str:
    """``data`` as indented, key-sorted JSON, written atomically."""
    return atomic_write(path, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def npz_key(name: str) -> str:
    """A tensor name as an npz member name (``/`` is not allowed there)."""
    return name.replace("/", "_")


def atomic_npz(path: str, arrays: Mapping[str, np.ndarray]) -> str:
    """Arrays as an uncompressed ``.npz`` (loadable with ``allow_pickle=False``; members named by
    :func:`npz_key`), written atomically."""
    import io

    buf = io.BytesIO()
    np.savez(buf, **{npz_key(k): np.asarray(v) for k, v in arrays.items()})
    return atomic_write(path, buf.getvalue())


def npz_members(path: str) -> set[str] | None:
    """The member names of an ``.npz`` file (its zip directory only: no array is read); None where the file is
    missing or is not an npz."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return set(z.files)
    except (OSError, ValueError, EOFError):
        return None
