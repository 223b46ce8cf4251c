"""What several verbs do the same way: load the subject plug-ins, read a reproducer's case."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Sequence

from harness.core import options
from harness.core.errors import HarnessError, InvalidArgument
from harness.judge.reproducer import OPTION, Reproducer

__all__ = ["reproducer_option", "load_plugins", "subject_case", "note", "check_worker_limits", "check_environment"]


def reproducer_option(flag: str, verb: str, **default: Any) -> Any:
    """A record field declaring the reproducer's option ``flag`` (:data:`harness.judge.reproducer.OPTIONS`, its
    one declaration) as ``verb`` takes it; ``default``: ``default=`` or ``default_factory=``, --help's
    ``none_says`` or ``shown`` where the field's default is None, and ``check`` where the record parses the text."""
    o = OPTION[flag]
    shows = {k: default.pop(k) for k in ("none_says", "shown", "check") if k in default}
    return options.declare(dataclasses.replace(o.flag_for(verb), **shows), o, **default)


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


#: The on/off switches the harness reads from the environment: each is unset, "0" or "1".
_FLAGS = ("HARNESS_GPU", "HARNESS_ALLOW_UNUSABLE_GPU", "HARNESS_ZYGOTE", "HARNESS_WORKER_STDERR",
          "HARNESS_PLUGIN_IN_PROCESS")


def check_environment() -> None:
    """Every environment variable the harness reads, checked before any verb starts: a bad value is one line
    naming the variable (each by the function that reads it, so the rule is that function's)."""
    from harness.core.case_limits import max_case_bytes_default
    from harness.core.vocabulary import PROFILES
    from harness.execute.progress import tick_env
    from harness.execute.settings import default_jobs
    from harness.subjects.manifest import load_timeout

    profile = os.environ.get("HARNESS_PROFILE", "")
    if profile and profile not in PROFILES:
        raise InvalidArgument(f"$HARNESS_PROFILE={profile[:40]!r} is not one of {', '.join(PROFILES)}")
    for flag in _FLAGS:
        value = os.environ.get(flag, "").strip()
        if value not in ("", "0", "1"):
            raise InvalidArgument(f"${flag}={value[:40]!r} must be 0 or 1 (or unset)")
    tick_env()
    default_jobs()
    max_case_bytes_default()
    try:
        load_timeout()
    except HarnessError as exc:
        raise InvalidArgument(str(exc).splitlines()[0]) from None
    check_worker_limits()


def note(text: str) -> None:
    print(f"harness: note: {text}", file=sys.stderr)
