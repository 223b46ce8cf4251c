"""Where a record file (``tasks.jsonl``, ``runs.jsonl``, ``measures.jsonl``) is on disk, plain or packed.

A campaign appends to the plain file as it runs; a finished report packs each one into ``<name>.xz``
(:func:`compress_jsonl`); a resumed campaign writes the plain file back as it repairs it
(:func:`harness.core.records.repair_jsonl`). Report directories
written before the records were packed with xz hold ``<name>.gz``: every reader still finds and reads those.

Why xz: the records repeat themselves far apart (a tensor's digest and sketch in every context of a case,
the same contract and rule text in every measure), beyond gzip's 32 KiB window; LZMA2 with a dictionary of
:data:`PACK_DICT` bytes finds those repeats at a fast preset. The standard library's :mod:`lzma` reads and
writes it; ``xz -d``, ``xzcat`` and pandas (``compression="infer"``) read it as they read gzip.

A packed file cut short (an interrupted copy, a full disk) reads up to the cut, its last line torn (its task
runs again); a packed file that is not xz/gzip, fails its checksum or has data after its end is a
:class:`~harness.core.errors.RecordError` (its content cannot be trusted).
"""

from __future__ import annotations

import os

from harness.core.errors import RecordError

__all__ = ["RECORD_FILES", "PACKED_SUFFIXES", "PACK_SUFFIX", "PACK_DICT", "record_file", "record_file_names",
           "record_lines", "unpack_parts", "unpack_record", "raw_lines", "compress_jsonl",
           "remove_packed"]

#: A campaign's record files, as it appends to them; a finished report packs each one (:func:`compress_jsonl`).
RECORD_FILES = ("tasks.jsonl", "runs.jsonl", "measures.jsonl")

#: The suffix a finished report packs its record files with.
PACK_SUFFIX = ".xz"
#: Every packed form a reader accepts, the current one first (``.gz``: reports written before xz).
PACKED_SUFFIXES = (PACK_SUFFIX, ".gz")
#: The LZMA2 dictionary of a packed record file: larger than the distance between a tensor's contexts in the
#: default report's records (the encoder needs about seven times this in memory while it packs).
PACK_DICT = 16 << 20
#: The LZMA2 preset (the match finder's effort): 2, a fast one with the hash-chain finder; the bench's
#: "report bytes per run" rows show what it leaves.
PACK_PRESET = 2
_XZ_MAGIC = b"\xfd7zXZ\x00"


def record_file(path: str) -> str | None:
    """The one rule for finding a record file: ``path`` itself, else its packed form (``path.xz``, or the
    ``path.gz`` of an older report); None where none exists. Every reader asks here: the campaign, the measure
    pass, the gate, the baseline check, resume.

    >>> record_file("/nonexistent/tasks.jsonl") is None
    True
    """
    if os.path.exists(path):
        return path
    return next((path + s for s in PACKED_SUFFIXES if os.path.exists(path + s)), None)


def record_file_names() -> tuple[str, ...]:
    """Every name a record file takes in a run directory: each of :data:`RECORD_FILES`, plain and packed."""
    return tuple(name + s for name in RECORD_FILES for s in ("", *PACKED_SUFFIXES))


def remove_packed(path: str) -> None:
    """Remove every packed form of ``path`` (the plain file, written again, is the current one)."""
    for s in PACKED_SUFFIXES:
        if os.path.exists(path + s):
            os.remove(path + s)


def unpack_parts(path: str) -> tuple[bytes, bool]:
    """``(text, cut)`` of a packed record file (``.xz`` or ``.gz``): one cut short gives the text up to the cut
    and ``cut`` True (its last line is then torn: its task runs again); a file that is not of its format, has a
    bad checksum or data after its end is a :class:`RecordError` naming it."""
    import lzma
    import zlib

    with open(path, "rb") as f:
        raw = f.read()
    xz = path.endswith(".xz")
    d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ) if xz else zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        if xz and not _XZ_MAGIC.startswith(raw[:len(_XZ_MAGIC)]):  # (liblzma waits for a whole header)
            raise lzma.LZMAError("no xz header")
        data = d.decompress(raw)
    except (lzma.LZMAError, zlib.error) as exc:
        kind = "xz" if xz else "gzip"
        raise RecordError(f"{path}: not a readable {kind} file ({exc}): damaged, not cut short") from None
    if d.eof and d.unused_data:
        raise RecordError(f"{path}: {len(d.unused_data)} bytes after the end of its packed data: damaged")
    return data, not d.eof


def unpack_record(path: str) -> bytes:
    """The text of a packed record file that must be whole (:func:`unpack_parts`; cut short: RecordError)."""
    data, cut = unpack_parts(path)
    if cut:
        raise RecordError(f"{path}: the packed data is cut short: damaged")
    return data


def record_lines(path: str) -> list[str]:
    """The text lines of the record file :func:`record_file` finds for ``path`` (none where there is none)."""
    found = record_file(path)
    if found is None:
        return []
    if found != path:
        return unpack_record(found).decode("utf-8", errors="strict").splitlines(keepends=True)
    with open(found, encoding="utf-8", errors="strict") as f:
        return f.readlines()


def raw_lines(path: str) -> list[bytes] | None:
    """The lines of ``path`` (or its packed form, where a finished report packed it) as bytes; None: no file."""
    found = record_file(path)
    if found is None:
        return None
    if found != path:  # cut short: the lines up to the cut (the last one torn: its task reruns)
        return unpack_parts(found)[0].split(b"\n")
    with open(found, "rb") as f:
        return f.read().split(b"\n")


def pack(data: bytes) -> bytes:
    """``data`` packed as :func:`compress_jsonl` packs a record file (xz, CRC64 checked; the same bytes for the
    same data)."""
    import lzma

    return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                         filters=[{"id": lzma.FILTER_LZMA2, "preset": PACK_PRESET, "dict_size": PACK_DICT}])


def compress_jsonl(path: str) -> str | None:
    """Replace a finished JSONL file by its packed form ``path.xz`` (written atomically before the plain file
    goes, so an interruption loses nothing); returns the new path, None where there was no file."""
    from harness.core.fileio import atomic_write

    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        data = f.read()
    atomic_write(path + PACK_SUFFIX, pack(data))
    os.remove(path)
    return path + PACK_SUFFIX
