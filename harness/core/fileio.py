"""Atomic file writes: a temporary file in the same directory, then ``os.replace``.

A reader (or an interrupted campaign) sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Mapping

import numpy as np

__all__ = ["atomic_write", "atomic_json", "atomic_npz"]


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


def atomic_npz(path: str, arrays: Mapping[str, np.ndarray]) -> str:
    """Arrays as an uncompressed ``.npz`` (loadable with ``allow_pickle=False``), written atomically."""
    import io

    buf = io.BytesIO()
    np.savez(buf, **{k.replace("/", "_"): np.asarray(v) for k, v in arrays.items()})
    return atomic_write(path, buf.getvalue())
