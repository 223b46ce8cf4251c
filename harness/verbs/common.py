"""What several verbs do the same way: load the subject plug-ins, read a reproducer's case."""

from __future__ import annotations

import sys
from typing import Any, Sequence

from harness.judge.reproducer import Reproducer

__all__ = ["load_plugins", "subject_case", "note", "check_worker_limits"]


def load_plugins(specs: Sequence[str] | None) -> None:
    """Register the installed plug-ins' subjects (entry points), then each ``MOD:OBJ`` given (idempotent)."""
    from harness.subjects.registry import load_entry_points, load_plugin

    load_entry_points()
    for s in specs or ():
        load_plugin(s)


def subject_case(r: Reproducer, subject: Any, max_case_bytes: int | None) -> Any:
    """The case of a reproducer (its file, or ``case_id`` of a corpus), refused in one line before any work
    where it is bad, foreign to ``subject`` or over ``max_case_bytes``."""
    from harness.subjects.registry import load_case_for_subject

    return load_case_for_subject(r.case, r.case_id or None, subject, max_case_bytes)


def check_worker_limits() -> None:
    """The environment's limits on worker processes (``$HARNESS_WORKER_MEMORY``, ``$HARNESS_MAX_OUTPUT_BYTES``),
    read before any work or output of a verb that starts workers: a bad value is one line naming the variable."""
    from harness.execute.memory_limits import default_memory_limit, output_limit

    default_memory_limit()
    output_limit()


def note(text: str) -> None:
    print(f"harness: note: {text}", file=sys.stderr)
