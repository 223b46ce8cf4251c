"""``harness localize``: the first Chainer function node whose outputs differ, for a reproducer.

The subject runs in a child process under the recording hooks, never in the harness's own process: the child
answers the reproducer as a request with a :class:`~harness.execute.localization.Localization` record
(:func:`harness.execute.localization.localize_in_child`), which this verb prints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.core import argcheck
from harness.core.options import like, opt
from harness.execute.settings import LOCALIZE_REPEATS
from harness.judge.reproducer import Reproducer
from harness.verbs.common import load_plugins, subject_case
from harness.verbs.env import EnvOptions
from harness.verbs.report import ReportOptions

__all__ = ["LocalizeOptions", "localize", "REPEATS"]

#: Runs compared where the reproducer names none (one device, one context, no relation): the default --help shows.
REPEATS = LOCALIZE_REPEATS


@dataclass(frozen=True)
class LocalizeOptions:
    """``harness localize``: the reproducer (repeats, two contexts, two devices or a relation), the output form,
    and how long the localizing process may run."""

    reproducer: Reproducer
    json: bool = like(EnvOptions, "json", default=False)
    max_case_bytes: int | None = like(ReportOptions, "max_case_bytes", default=None)
    timeout: float = opt("--timeout", "wall seconds the localizing child process may take in all (its runs and the "
                         "digests of every node) before it is killed, > 0 (default {default})", default=300.0,
                         check=argcheck.duration())


def localize(opts: LocalizeOptions) -> int:
    """0 when it ran (the localization is printed, also when nothing differed); a usage or set-up error raises.
    A relation's localization is one line of text, also with ``json``."""
    from harness.core.devices import resolve_device
    from harness.execute.localization import localize_in_child
    from harness.subjects.registry import get_subject

    r = opts.reproducer
    load_plugins(r.plugins)
    subject = get_subject(r.subject)
    for d in r.devices:  # usable here (the parser checked the names)
        resolve_device(d, "devices" if len(r.devices) > 1 else "device")
    subject_case(r, subject, opts.max_case_bytes)  # a bad, foreign or oversized case: one line, before the child
    # the subject runs there, and nowhere else, under the same case limit
    loc = localize_in_child(r.for_verb("localize"), opts.timeout, opts.max_case_bytes)
    print(json.dumps(loc.to_dict(), indent=2, sort_keys=True) if opts.json and not r.relation else loc.message())
    return 0
