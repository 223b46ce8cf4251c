"""``harness audit``: run every subject on a corpus and write an audit file (per case x subject x device x
context, the digest of every tensor and whether the repetitions agreed, with the environment fingerprint)."""

from __future__ import annotations

import collections
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Mapping

from harness.core import argcheck
from harness.core.errors import InvalidArgument
from harness.core.options import group, like, parse_text
from harness.execute.settings import CampaignOptions
from harness.outputs.fleet import ClusterOptions
from harness.verbs.cases import CasesOptions
from harness.verbs.common import check_worker_limits, load_plugins, note, reproducer_option
from harness.verbs.report import ReportOptions

__all__ = ["AuditOptions", "audit", "audit_on_cluster"]


@dataclass(frozen=True, kw_only=True)
class AuditOptions:
    #: None: the audit corpus file (or, with profile, the default corpus)
    corpus: str | None = like(CasesOptions, "corpus", default=None)
    devices: tuple[str, ...] = reproducer_option("--devices", "audit", default=("all",))
    contexts: tuple[str, ...] = reproducer_option("--contexts", "audit", default=("default",))
    out: str = like(CasesOptions, "out", check=argcheck.kept(argcheck.writable_file), required=True)  # JSON
    #: also keep every entry's arrays as .npz files in this directory
    keep_arrays: str | None = like(ReportOptions, "keep_arrays", default=None,
                                   check=argcheck.kept(argcheck.writable_dir), role="output", writes=())
    shard: argcheck.Shard | None = like(ReportOptions, "shard", default=None)
    #: at least 2: an audit records whether the repetitions agreed
    repeats: int = reproducer_option("--repeats", "audit", default=2)
    jobs: int = like(ReportOptions, "jobs", default=CampaignOptions.jobs)
    #: None: all but the control.* self-tests
    subjects: tuple[str, ...] | None = like(ReportOptions, "subjects", default=None)
    plugins: tuple[str, ...] = reproducer_option("--subject-plugin", "audit", default=())
    quiet: bool = like(ReportOptions, "quiet", default=False)
    #: audit the default corpus generated at this profile instead of the file
    profile: str | None = like(CasesOptions, "profile", default=None, shown=None, none_says="the audit corpus file")
    cluster: ClusterOptions = group("fleet (Dask)", ClusterOptions)

    def __post_init__(self) -> None:
        parse_text(self)
        argcheck.profile_or_corpus(self.profile, self.corpus)
        if self.repeats < 2:  # (the command line's check says >= 2 too; this is a Python caller's refusal)
            raise InvalidArgument(f"repeats={self.repeats} must be >= 2: an audit records whether the repetitions "
                                  f"agreed")


def audit(opts: AuditOptions) -> int:
    """0 when the file (one per cluster worker with the every spread) was written. The subject names are
    checked once the plug-ins are loaded, and the devices usable here, before the audit runs."""
    check_worker_limits()
    from harness.core.devices import select_devices
    from harness.outputs.audit.run import run_audit
    from harness.subjects.registry import subjects_for

    load_plugins(opts.plugins)
    if opts.subjects is not None:
        subjects_for(opts.subjects)
    sel = select_devices(opts.devices)
    for n in sel.notes:  # after every check, so that a usage error stays one line
        note(n)
    t0 = time.perf_counter()
    if opts.cluster.address:
        for out, data in audit_on_cluster(opts):
            _summary_line(data, out, t0)
        return 0
    # The implied GPU of "all" stays in the plan: its entries are recorded as skipped, with the reason.
    data = run_audit(opts, devices=sel.planned)
    _summary_line(data, opts.out, t0)
    return 0


def audit_on_cluster(opts: AuditOptions) -> list[tuple[str, dict[str, Any]]]:
    """The audit files written (path, data), one per target of :func:`harness.outputs.fleet.run_on_cluster`.
    With the every spread and two or more workers, prints the merge matrix of the per-worker columns."""
    from harness.outputs.audit.merge import merge_audits
    from harness.outputs.audit.run import run_audit
    from harness.outputs.fleet import Target, out_for, run_on_cluster

    def one(t: Target) -> tuple[str, dict[str, Any]]:
        out = out_for(opts.out, t)
        mine = dataclasses.replace(opts, out=out, quiet=opts.quiet or len(t.suffix) > 0,
                                   keep_arrays=None if opts.keep_arrays is None else out_for(opts.keep_arrays, t))
        data = run_audit(mine, executor=t.executor, environment=t.environment,
                         extra={"cluster": t.cluster} if t.cluster else None)
        return out, data

    got = run_on_cluster(opts.cluster, one)
    if len(got) > 1:
        print(merge_audits([p for p, _ in got]).to_markdown())
    return got


def _summary_line(data: Mapping[str, Any], out: str, t0: float) -> None:
    from harness.core.env import machine_label

    counts = collections.Counter(e["status"] for e in data["entries"])
    disagreed = sum(1 for e in data["entries"] if e["repeats_agreed"] is False)
    where = data.get("cluster", {}).get("worker")
    print(f"audit: {len(data['entries'])} entries ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}; "
          f"repetitions disagreed in {disagreed}) on {machine_label(data['environment'])}"
          f"{f' (Dask worker {where})' if where else ''} -> {out} ({time.perf_counter() - t0:.0f} s)")
