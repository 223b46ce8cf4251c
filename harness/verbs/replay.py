"""``harness replay``: run one case from a reproducer and print what the judges find.

>>> from harness.judge.reproducer import Reproducer
>>> ReplayOptions(Reproducer("case.json", "chainer.EmbedID")).repeats
5
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.options import like
from harness.execute.settings import CampaignOptions
from harness.judge.reproducer import Reproducer, export_path
from harness.verbs.common import check_worker_limits, load_plugins, subject_case
from harness.verbs.report import ReportOptions

__all__ = ["ReplayOptions", "replay", "REPEATS", "FRESH"]

#: What replay runs where the reproducer says nothing.
REPEATS = 5
FRESH = 0


@dataclass(frozen=True)
class ReplayOptions:
    """``harness replay``: the reproducer, and how long one run may take."""

    reproducer: Reproducer
    #: None: scaled with the case's estimated work
    timeout: float | None = like(ReportOptions, "timeout", default=CampaignOptions.timeout)
    #: None: $HARNESS_MAX_CASE_BYTES or half the memory (case_limits)
    max_case_bytes: int | None = like(ReportOptions, "max_case_bytes", default=None)

    @property
    def repeats(self) -> int:
        return REPEATS if self.reproducer.repeats is None else self.reproducer.repeats

    @property
    def fresh(self) -> int:
        return FRESH if self.reproducer.fresh is None else self.reproducer.fresh


def replay(opts: ReplayOptions) -> int:
    """0: every comparison bit-identical and within the oracle's tolerance (or the run was skipped, said so);
    1: a difference reproduced (and the command that exports it as a standalone script is printed before the
    last line)."""
    check_worker_limits()
    from harness.core.contexts import get_context
    from harness.core.devices import resolve_device
    from harness.judge.contracts import load_contracts
    from harness.outputs import replay as run
    from harness.subjects.registry import get_subject

    r = opts.reproducer
    load_plugins(r.plugins)
    subject = get_subject(r.subject)
    contexts = [get_context(n).name for n in r.contexts]
    devices = [resolve_device(n, "devices" if len(r.devices) > 1 else "device") for n in r.devices]
    contracts = load_contracts(r.contracts or None)
    case = subject_case(r, subject, opts.max_case_bytes)
    # (printed where a difference shows; nothing of a control goes upstream)
    export = "" if subject.role == "control" else r.command("export", ["--out", export_path(r.case_id or r.case)])
    if r.relation:
        return run.replay_relation(contracts, case, subject.name, devices[0], contexts[0], r.relation,
                                   plugins=r.plugins, timeout=opts.timeout, export=export,
                                   max_case_bytes=opts.max_case_bytes)
    return run.replay(contracts, case, subject.name, devices, contexts, opts.repeats, fresh=opts.fresh,
                      baseline=r.baseline or None, plugins=r.plugins, timeout=opts.timeout, export=export,
                      max_case_bytes=opts.max_case_bytes)
