"""``harness gate``: run the gate campaign in worker processes and check every task against the determinism
contracts, and (with a baseline) the digests against a stored run."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from dataclasses import dataclass

from harness.core import argcheck
from harness.core.errors import ContractError, InvalidArgument
from harness.core.options import group, like, opt, parse_text
from harness.execute.settings import CampaignOptions
from harness.outputs.fleet import ClusterOptions
from harness.verbs.cases import CasesOptions
from harness.verbs.common import check_worker_limits, load_plugins, note, reproducer_option
from harness.verbs.report import ReportOptions

__all__ = ["GateOptions", "gate", "SHOWN_DOSSIERS"]

#: At most this many dossiers are printed in full; the rest are counted.
SHOWN_DOSSIERS = 10


@dataclass(frozen=True, kw_only=True)
class GateOptions:
    contracts: str | None = reproducer_option("--contracts", "gate", default=None)  # None: the shipped one
    baseline: str | None = reproducer_option("--baseline", "gate", default=None)  # a stored run to compare with
    devices: tuple[str, ...] = reproducer_option("--devices", "gate", default=("all",))
    corpus: str | None = like(CasesOptions, "corpus", default=None)  # None: the gate corpus of ``profile``
    #: a new (absent or empty) run directory; None: reports/<run-id>
    out: str | None = like(CasesOptions, "out", default=None, check=argcheck.kept(argcheck.run_dir_for_output),
                           writes=())
    junit: str | None = opt("--junit", "write a JUnit XML file of the checks", default=None,
                            check=argcheck.kept(argcheck.writable_file), metavar="FILE", role="output")
    repeats: int = reproducer_option("--repeats", "gate", default=3)
    fresh: int = reproducer_option("--fresh", "gate", default=1)
    jobs: int = like(ReportOptions, "jobs", default=CampaignOptions.jobs)
    plugins: tuple[str, ...] = reproducer_option("--subject-plugin", "gate", default=())
    quiet: bool = like(ReportOptions, "quiet", default=False)
    shrink_budget: float = like(ReportOptions, "shrink_budget", default=60.0)  # seconds (0: none)
    shrink: bool = like(ReportOptions, "shrink", default=True)
    profile: str | None = like(CasesOptions, "profile", default=None, shown="ci")  # None: ci (not with corpus)
    cluster: ClusterOptions = group("fleet (Dask)", ClusterOptions)

    def __post_init__(self) -> None:
        parse_text(self)
        argcheck.profile_or_corpus(self.profile, self.corpus)


def gate(opts: GateOptions) -> int:
    """0 every check passed, 1 a contract broken (the dossiers are on stderr); a usage or set-up error raises
    or, for a contracts file that does not fit the subjects, is 2 with one line per problem. Every argument is
    checked before the campaign starts; the ``out`` directory is locked while it runs."""
    check_worker_limits()
    from harness.core.corpus_files import load_corpus
    from harness.core.devices import select_devices
    from harness.outputs.report import lock_run_dir

    load_plugins(opts.plugins)
    selection = select_devices(opts.devices)  # usable here
    if opts.corpus is not None and not load_corpus(opts.corpus):
        raise InvalidArgument(f"corpus={opts.corpus!r} holds no cases")
    for n in selection.notes:  # after every check, so that a usage error stays one line
        note(n)
    if opts.out is None:
        return _gate(opts, selection.planned)
    with lock_run_dir(opts.out, "out"):
        return _gate(opts, selection.planned)


def _gate(opts: GateOptions, devices: list) -> int:
    from harness.core.contexts import CONTEXTS, DEFAULT_CONTEXTS, get_context
    from harness.core.corpus_files import load_corpus
    from harness.core.env import fingerprint
    from harness.core.fileio import atomic_json, atomic_write
    from harness.execute.campaign import load_tasks
    from harness.execute.driver import run_campaign
    from harness.execute.relations import RELATIONS
    from harness.generate.corpora import gate_corpus
    from harness.judge import finding_groups as G
    from harness.judge import findings as F
    from harness.judge.contracts import load_contracts
    from harness.outputs.contract_checks import problems as contract_problems
    from harness.outputs.fleet import cluster_targets
    from harness.outputs.gate import (
        baseline_measures,
        belongs,
        cell_of,
        control_check,
        failing_cells,
        fails,
        gate_findings,
        write_junit,
    )
    from harness.outputs.report import new_run_dir
    from harness.subjects.registry import SUBJECTS, subjects_for

    t0 = time.perf_counter()
    contracts = load_contracts(opts.contracts)
    problems = contract_problems(contracts, SUBJECTS, CONTEXTS)
    if problems:  # one harness: error: line, before any work (contracts check lists them all)
        from harness.outputs.contract_checks import refusal

        raise ContractError(refusal(problems))
    if opts.baseline and not load_tasks(opts.baseline):
        raise InvalidArgument(f"baseline={opts.baseline!r} holds no tasks.jsonl: not a report directory")
    cases = load_corpus(opts.corpus) if opts.corpus else gate_corpus(profile=opts.profile or "ci")
    contexts = sorted({c.context for c in contracts.contracts if c.context != "*"} |
                      {x for c in contracts.contracts for x in c.identical_across} | set(DEFAULT_CONTEXTS))
    subjects = subjects_for(None)
    # (an implied, unusable GPU stays planned: its checks are <skipped> in JUnit)
    run_dir = opts.out or new_run_dir()
    # The relations the contracts claim invariance under: their members join the corpus (default context).
    claimed = sorted({r for c in contracts.contracts for r in c.invariant_under})
    settings = CampaignOptions(repeats=opts.repeats, fresh=opts.fresh, plugins=opts.plugins, quiet=opts.quiet,
                                jobs=opts.jobs)
    with cluster_targets(opts.cluster) as targets:
        if len(targets) > 1:
            raise InvalidArgument("spread='every' is for audits and reports: a gate judges one column (use shard)")
        run = run_campaign(run_dir, cases, subjects, devices, [get_context(c) for c in contexts], settings,
                           meta={"gate": True}, contracts=contracts, executor=targets[0].executor,
                           relations=[RELATIONS[r] for r in claimed])
    tasks, records = run.tasks, run.records
    atomic_json(os.path.join(run_dir, "environment.json"), fingerprint())
    # the model cases' trajectories between the contexts of the pair, judged from the arrays kept (no baseline
    # run and no localization here: a failing trajectory's finding names the commands that give them)
    from harness.execute.trajectories import campaign_trajectories, trajectory_measures

    trajectories = campaign_trajectories(run_dir, records, run.cases, plugins=opts.plugins, timeout=settings.timeout,
                                         baseline=False, localize=False)
    measures = run.measures + control_check(records, run.measures) + trajectory_measures(trajectories, contracts)
    origin = F.Origin(run_dir, contracts=F.contracts_argument(opts.contracts), plugins=opts.plugins)
    found = gate_findings(run_dir, measures, records=records, origin=origin, contracts=contracts)
    if opts.baseline:
        bmeasures, diff = baseline_measures(run_dir, opts.baseline, contracts)
        measures += bmeasures
        found = G.sort_findings(found + gate_findings(
            run_dir, bmeasures, records=records, contracts=contracts,
            origin=dataclasses.replace(origin, baseline=opts.baseline, env=F.env_for_reproducer(diff))))
    failing = [f for f in found if f.fails]
    if failing and opts.shrink_budget and opts.shrink:
        from harness.execute.shrink_findings import shrink_findings

        failing = shrink_findings(failing, contracts, budget=opts.shrink_budget, timeout=settings.timeout)
        found = G.sort_findings(failing + [f for f in found if not f.fails])
    if opts.junit:
        write_junit(opts.junit, records, found, time.perf_counter() - t0)
    from harness.judge.headlines import contexts_by_device, headlines

    heads = headlines(failing, contexts_by_device((t.device, t.context) for t in tasks))  # one bug, one headline
    for i, h in enumerate(heads[:SHOWN_DOSSIERS]):
        print(f"FINDING {i + 1} of {len(heads)}: " + h.dossier() + "\n", file=sys.stderr)
    if len(heads) > SHOWN_DOSSIERS:
        print(f"... and {len(heads) - SHOWN_DOSSIERS} more failing headline finding(s): all of them in "
              f"{os.path.join(run_dir, 'findings.json')}", file=sys.stderr)
    cells = {cell_of(t.subject, t.device, t.context) for t in tasks}
    skipped = {cell_of(r.subject, r.device, r.context) for r in records.values()} - {
        cell_of(r.subject, r.device, r.context) for r in records.values() if r.status != "skipped"}
    bad = [m for m in measures if fails(m)]
    atomic_json(os.path.join(run_dir, "violations.json"),
                [{**m.to_dict(), "finding": next((f.id for f in found if belongs(m, f)), "")} for m in bad])
    atomic_write(os.path.join(run_dir, "findings.json"), F.dumps(found))
    broken_cells = failing_cells(found)
    notes = [n for r in records.values() for n in r.notes]
    for n in notes:  # said even under --quiet: the gate's verdict holds despite them, and the reader should know
        print(f"gate: infrastructure note: {n}", file=sys.stderr)
    raised = int(run.stats.get("lanes_raised_for_load", 0))
    if raised:
        print(f"gate: infrastructure note: other programs kept this machine busy; the lanes that run below the "
              f"first ran at full priority ({raised} time(s))", file=sys.stderr)
    print(f"gate: {len(tasks)} tasks, {len(cells)} subject/device/context checks ({len(skipped)} skipped: "
          f"not run); {G.summary_line(failing, len(broken_cells), len(cells), heads)}, from {len(bad)} violating "
          f"measure(s){f'; {len(notes)} infrastructure note(s) (a busy machine, not findings)' if notes else ''}; "
          f"results in {run_dir}")
    return 1 if failing else 0
