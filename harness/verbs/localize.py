"""``harness localize``: the first Chainer function node whose outputs differ, for a reproducer.

The subject runs in a child process under the recording hooks (:mod:`harness.execute.sandbox`), never in the
harness's own process; the child runs this same verb and prints the localization.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from harness.judge.reproducer import Reproducer
from harness.verbs.common import load_plugins, subject_case

__all__ = ["LocalizeOptions", "localize"]


@dataclass(frozen=True)
class LocalizeOptions:
    """``harness localize``: the reproducer (repeats, two contexts, two devices or a relation), the output form,
    and how long the localizing process may run."""

    reproducer: Reproducer
    json: bool = False
    timeout: float = 300.0
    max_case_bytes: int | None = None


def localize(opts: LocalizeOptions) -> int:
    """0 when it ran (the localization is printed, also when nothing differed); a usage or set-up error raises."""
    from harness.core.devices import resolve_device
    from harness.core.errors import SetupError
    from harness.execute.sandbox import DONE, in_child, run_child
    from harness.subjects.registry import get_subject

    r = opts.reproducer
    load_plugins(r.plugins)
    subject = get_subject(r.subject)
    for d in r.devices:  # usable here (the parser checked the names)
        resolve_device(d, "devices" if len(r.devices) > 1 else "device")
    if in_child():  # the child: the subject runs here, under the hooks, and nowhere else
        from harness.outputs import localize as run

        rc = run.cmd_localize(r, opts.json)  # reads the case with load_case_file, the one case loader
        print(DONE)
        return rc
    subject_case(r, subject, opts.max_case_bytes)  # a bad, foreign or oversized case: one line, before the child
    res = run_child(r.argv("localize", ["--json"] if opts.json else [])[3:], opts.timeout)
    sys.stdout.write(res.stdout)
    if not res.ok:
        raise SetupError(f"localize: {res.reason()}")
    return 0
