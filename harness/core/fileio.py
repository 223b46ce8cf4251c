"""Atomic file writes: a temporary file in the same directory, then ``os.replace``.

A reader (or an interrupted campaign) sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
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
    :func:`npz_key`), written atomically.

    What ``np.savez`` writes, member by member (a ``.npy`` file per array in a stored zip), with less work per
    member: each ``.npy`` is one ``writestr`` of its header and bytes, and the header of a dtype and shape is
    made once per process (a campaign writes the same shapes task after task), which matters for a task of
    many small arrays. Arrays of objects go through NumPy's own writer (they pickle)."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for k, v in arrays.items():
            a = np.asarray(v)
            name = npz_key(k) + ".npy"
            if a.dtype.hasobject:
                with zf.open(name, "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, a, allow_pickle=True)
                continue
            if not a.flags.c_contiguous:
                a = a.copy(order="C")  # (not np.ascontiguousarray: it makes a 0-d array 1-d)
            if a.nbytes <= _JOIN_BYTES:
                zf.writestr(name, _npy_header(a) + a.tobytes())
            else:  # a big array is streamed from its own memory, never copied
                with zf.open(name, "w", force_zip64=True) as f:
                    f.write(_npy_header(a))
                    f.write(a.reshape(-1).view(np.uint8).data)
    return atomic_write(path, buf.getvalue())


#: Up to this many bytes an array's ``.npy`` is joined in memory and written in one call; beyond, it is streamed.
_JOIN_BYTES = 1 << 20
_NPY_HEADERS: dict[tuple[str, tuple[int, ...]], bytes] = {}


def _npy_header(a: np.ndarray) -> bytes:
    """The ``.npy`` header of a C-contiguous array of ``a``'s dtype and shape, written by NumPy's own format
    functions (version 1.0, or 2.0 where the header is too long for it), cached by dtype and shape."""
    key = (a.dtype.str, a.shape)
    head = _NPY_HEADERS.get(key)
    if head is None:
        import io

        fmt = np.lib.format
        f = io.BytesIO()
        d = fmt.header_data_from_array_1_0(a)
        try:
            fmt.write_array_header_1_0(f, d)
        except ValueError:  # a header over 64 KiB (a shape of thousands of dimensions)
            f = io.BytesIO()
            fmt.write_array_header_2_0(f, d)
        head = f.getvalue()
        if len(_NPY_HEADERS) < 4096:
            _NPY_HEADERS[key] = head
    return head


def npz_members(path: str) -> set[str] | None:
    """The member names of an ``.npz`` file (its zip directory only: no array is read); None where the file is
    missing or is not an npz."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return set(z.files)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):  # not a zip, or its directory damaged
        return None
