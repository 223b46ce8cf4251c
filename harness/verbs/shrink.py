"""``harness shrink``: reduce a reproducer's case while the same finding still reproduces."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from harness.core import argcheck
from harness.core.argcheck import int_at_least, positive_seconds, same_file, writable_dir
from harness.core.errors import InvalidArgument
from harness.core.options import like, opt
from harness.execute.settings import CampaignOptions
from harness.judge.reproducer import Reproducer
from harness.verbs.cases import CasesOptions
from harness.verbs.common import check_worker_limits, load_plugins, subject_case
from harness.verbs.report import ReportOptions

__all__ = ["ShrinkOptions", "shrink"]


@dataclass(frozen=True)
class ShrinkOptions:
    """``harness shrink``: the reproducer (its kind, tensor kind, error and flakiness say what must still
    reproduce) and what the shrinking may spend."""

    reproducer: Reproducer
    budget: float = opt("--budget", "seconds to spend at most (default {default})", default=120.0,
                        check=argcheck.duration())
    max_runs: int = opt("--max-runs", "worker runs to spend at most (default {default})", default=400,
                        check=argcheck.count(1))
    #: None: scaled with the case's estimated work
    timeout: float | None = like(ReportOptions, "timeout", default=CampaignOptions.timeout)
    #: the minimal case's file (None: beside the case, named by its id)
    out: str | None = like(CasesOptions, "out", default=None, check=argcheck.kept(argcheck.writable_file))
    quiet: bool = like(ReportOptions, "quiet", default=False)
    max_case_bytes: int | None = like(ReportOptions, "max_case_bytes", default=None)

    def __post_init__(self) -> None:
        positive_seconds("budget", self.budget)
        int_at_least("max-runs", self.max_runs, 1)
        if self.reproducer.baseline:
            raise InvalidArgument(f"baseline={self.reproducer.baseline!r}: a baseline finding cannot shrink (the "
                                  f"baseline holds digests of its own cases only); replay it with --baseline "
                                  f"instead")


def shrink(opts: ShrinkOptions) -> int:
    """0 a minimal case was written (or the case is already minimal), 1 the finding does not reproduce on the
    case given; a usage or set-up error raises (exit 2)."""
    check_worker_limits()
    from harness.core.contexts import get_context
    from harness.core.devices import Device, resolve_device
    from harness.core.fileio import atomic_write
    from harness.execute.isolated import Runner
    from harness.execute.shrink import Target, case_sizes, reproduces
    from harness.execute.shrink import shrink as run
    from harness.judge.contracts import load_contracts
    from harness.judge.finding_kinds import FindingKind, finding_kind
    from harness.subjects.registry import get_subject

    r = opts.reproducer
    if opts.out is None:  # the minimal case goes beside CASE.json: that folder must take it, known before work
        writable_dir("out (default: beside CASE.json)", os.path.dirname(os.path.abspath(r.case)))
    load_plugins(r.plugins)
    contracts = load_contracts(r.contracts or None)
    subject = get_subject(r.subject)
    case = subject_case(r, subject, opts.max_case_bytes)
    try:
        kind = finding_kind(r.kind)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
    if not kind.shrinkable:
        raise InvalidArgument(f"kind={kind.value!r} cannot shrink: no smaller case shows it")
    other = ""
    others: tuple[Device, ...] = ()
    if len(r.contexts) == 2:
        other, context = get_context(r.contexts[0]).name, get_context(r.contexts[1]).name
    else:
        context = get_context(r.contexts[0]).name
    if len(r.devices) == 2:
        others = (resolve_device(r.devices[0], "devices"),)
        device = resolve_device(r.devices[1], "devices")
        other = others[0].id
    else:
        device = resolve_device(r.devices[0])
    error = ""
    if kind in (FindingKind.ERROR, FindingKind.KNOWN_DEFECT):
        error = r.error
        if not error:
            raise InvalidArgument("kind='error' needs --error 'Type in phase' (the error that must still happen)")
    target = Target(kind=kind, subject=subject.name, device=device, context=context, other=other,
                    relation=r.relation, tensor_kind=r.tensor, error=error, others=others, flaky=r.flaky)
    log = None if opts.quiet else (lambda s: print(s, file=sys.stderr))
    with Runner(plugins=r.plugins, timeout=opts.timeout, fresh=2, max_case_bytes=opts.max_case_bytes) as runner:
        if not reproduces(runner, contracts, case, target):
            print(f"shrink: {target.describe()} does not reproduce on case {case.id}: nothing to shrink",
                  file=sys.stderr)
            return 1
        res = run(runner, contracts, case, target, budget=opts.budget, max_runs=opts.max_runs, log=log)
    out = opts.out or os.path.join(os.path.dirname(os.path.abspath(r.case)), f"{res.case.id}.json")
    if opts.out is None and same_file(out, r.case):  # nothing shrank, and the input has that name: keep it
        out = out[:-len(".json")] + ".min.json"
    atomic_write(out, res.case.to_json() + "\n")
    print(f"shrink: {target.describe()}: case {case.id} {case_sizes(case)} -> {res.case.id} "
          f"{case_sizes(res.case)} in {res.runs} runs, {res.seconds:.1f} s"
          + ("" if res.complete else " (budget spent before every pass ran)"))
    print(f"minimal case: {out}")
    return 0
