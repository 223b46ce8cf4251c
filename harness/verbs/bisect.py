"""``harness bisect``: which package, and which release of it, changes a case's bits (the engine is
:mod:`harness.upstream.bisect`).

The verb reads and checks the case and the subject (registered, of the case's family) before anything else,
then hands the question to the engine. Exit codes: 0 the two ends agree, 1 a package named, 2 bad input, an end
that cannot be probed, or an error at both ends; 130 interrupted (the probes that finished stay in the log,
and the same command goes on from them).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

from harness.upstream.bisect import Bisection, Writer, check_ends
from harness.upstream.bisect import bisect as run_bisection
from harness.verbs.common import load_plugins

__all__ = ["BisectOptions", "bisect"]


@dataclass(frozen=True)
class BisectOptions(Bisection):
    """One bisection: the engine's question (:class:`harness.upstream.bisect.Bisection`: the case and subject,
    the two ends as pins, where environments come from, the conditions the user pins) and how much it says."""

    quiet: bool = False


def bisect(opts: BisectOptions, say: Callable[[str], None] | None = None, write_script: Writer | None = None) -> int:
    """Check the case and subject, then bisect (:func:`harness.upstream.bisect.bisect`); the exit code.
    ``write_script``: what writes the probe's script (the exported reproducer's writer where None)."""
    from harness.subjects.registry import get_subject, load_case_for_subject

    check_ends(opts.good, opts.bad)
    load_plugins(opts.plugins)
    load_case_for_subject(opts.case, opts.case_id or None, get_subject(opts.subject), None)
    out = say or (lambda s: None if opts.quiet else print(f"bisect: {s}", file=sys.stderr, flush=True))
    try:
        return run_bisection(opts, out, write_script)
    except KeyboardInterrupt:
        print("harness: interrupted; the probes that finished are in bisect's log: the same command goes on from "
              "them", file=sys.stderr)
        return 130
