"""Corpus files: cases as JSON lines on disk, written canonically and read back with one-line errors.

A corpus is a file of :meth:`harness.core.cases.Case.to_json` lines: the same cases always give the same bytes
(:func:`write_corpus`), so :func:`corpus_digest` names a corpus wherever it was made. Reading one
(:func:`load_corpus`, and :func:`load_case_file` for ``replay``'s one case) turns every problem, a directory, a
file that is not UTF-8, a bad line, an unknown id, into one :class:`~harness.core.errors.CaseError` naming
``file:line``. The file handling is kept apart from the case record, which knows nothing of paths.
"""

from __future__ import annotations

import hashlib
import os
from typing import Iterable

from harness.core.cases import Case
from harness.core.errors import CaseError, HarnessError

__all__ = ["write_corpus", "load_corpus", "load_case_file", "corpus_digest"]


def write_corpus(cases: Iterable[Case], path: str) -> int:
    """Write cases as JSON lines (canonical bytes; same cases, same file), atomically, mode 0644.
    Returns the count."""
    from harness.core.fileio import atomic_write

    lines = [c.to_json() + "\n" for c in cases]
    atomic_write(path, "".join(lines))
    return len(lines)


def _read_bytes(path: str, what: str) -> bytes:
    if os.path.isdir(path):
        raise CaseError(f"{what}={path!r} is a directory, not a file")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise CaseError(f"{what}={path!r} cannot be read: {exc.strerror or exc}") from exc


def load_corpus(path: str) -> list[Case]:
    """Read a JSON-lines corpus; a bad line (bad JSON, bad type, not UTF-8) raises :class:`CaseError` naming
    file:line."""
    cases: list[Case] = []
    data = _read_bytes(path, "corpus")
    for lineno, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            cases.append(Case.from_json(line))
        except HarnessError as exc:
            raise CaseError(f"{path}:{lineno}: {exc}") from exc
    return cases


def load_case_file(path: str, case_id: str | None = None) -> Case:
    """One case from a file holding one case JSON, or from a corpus (then ``case_id`` picks it).

    For ``replay``: every problem (missing, a directory, not UTF-8, bad JSON, an unknown id) is one line.
    """
    if not os.path.exists(path):
        raise CaseError(f"case file={path!r} does not exist")
    data = _read_bytes(path, "case file")
    if b"\n" in data.strip():
        cases = load_corpus(path)
        if case_id is None:
            if len(cases) == 1:
                return cases[0]
            raise CaseError(f"{path} holds {len(cases)} cases: pick one with --case-id")
        for c in cases:
            if c.id == case_id:
                return c
        raise CaseError(f"case-id={case_id!r} is not in {path}")
    try:
        case = Case.from_json(data)
    except CaseError as exc:
        raise CaseError(f"{path}:1: {exc}") from exc
    if case_id is not None and case.id != case_id:
        raise CaseError(f"case-id={case_id!r} is not in {path} (it holds {case.id})")
    return case


def corpus_digest(cases: Iterable[Case]) -> str:
    """SHA-256 of the corpus's canonical lines, in order."""
    h = hashlib.sha256()
    for c in cases:
        h.update(c.to_json().encode() + b"\n")
    return h.hexdigest()
