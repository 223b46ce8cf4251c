"""``harness report``: build or load the corpus, run the campaign, write the tables, shrink and localize the
findings.

A field left None was not given: its default is the campaign settings' (:class:`CampaignOptions`), and
``resume`` compares only the fields that were given with the run directory's ``campaign.json``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from harness.core import argcheck
from harness.core.errors import InvalidArgument
from harness.core.options import group, like, opt, parse_text
from harness.core.record_files import record_file_names
from harness.execute.settings import CampaignOptions
from harness.outputs.fleet import ClusterOptions
from harness.verbs.cases import CasesOptions
from harness.verbs.common import check_worker_limits, load_plugins, reproducer_option

if TYPE_CHECKING:  # (the modules that import NumPy load when the verb runs: --help stays light)
    from harness.core.cases import Case
    from harness.core.devices import DeviceSelection

__all__ = ["ReportOptions", "report", "LOCALIZE_BUDGET", "KEEP"]

#: Of the report's budget for localizing findings, seconds (each localization in its own child process).
LOCALIZE_BUDGET = 90.0
#: What a report writes into its run directory (none of it may be an input).
RUN_FILES = ("corpus.jsonl", "campaign.json", *record_file_names(), "environment.json", "timings.json",
             "summary.html", "summary.md", "cells.csv", "findings.csv", "summary.csv", "results.csv.gz")
#: Run directories kept under reports/ where ``keep`` is None.
KEEP = 10


def _shown_seed() -> int:
    from harness.generate.corpora import DEFAULT_SEED

    return DEFAULT_SEED


@dataclass(frozen=True, kw_only=True)
class ReportOptions:
    """``harness report``: a field left None was not given (its default is the campaign options', or the
    profile's); the fields' order is the order of ``--help``."""

    subjects: tuple[str, ...] | None = opt("--subjects", "comma list of subject names (default: every registered "
                                          "subject; audit: all but the control.* self-tests)", default=None,
                                          check=argcheck.names())
    devices: tuple[str, ...] | None = reproducer_option("--devices", "report", default=None)  # None: all
    contexts: tuple[str, ...] | None = reproducer_option("--contexts", "report", default=None)  # None: the default set
    repeats: int | None = reproducer_option("--repeats", "report", default=None, shown=CampaignOptions.repeats)
    fresh: int | None = reproducer_option("--fresh", "report", default=None, shown=CampaignOptions.fresh)
    jobs: int | None = opt("--jobs", "lanes of workers running tasks at once on this machine, each task still R "
                           "runs in one pooled worker and K fresh; 0: $HARNESS_JOBS, else one per CPU, at most 4; GPU "
                           "tasks run in one lane (default {default})", default=None, shown=CampaignOptions.jobs,
                           check=argcheck.count(0), metavar="N")
    relations: tuple[str, ...] | None = opt(
        "--relations", "invariance relations to run, comma list of alone, subbatch, order, padding, duplicate; 'all' "
        "(the default) or 'none'", default=None, check=argcheck.names(argcheck.one_relation, alone=("all", "none")))
    max_case_bytes: int | None = opt("--max-case-bytes", "refuse a case whose run needs more at its peak (default "
                                     f"$HARNESS_MAX_CASE_BYTES or {argcheck.DEFAULT_LIMIT_TEXT})", default=None,
                                     check=argcheck.count(1), metavar="BYTES")
    keep: int | None = opt("--keep", "keep the newest N run directories under reports/, delete older ones (default "
                           "10; 0 keeps only this run)", default=None, check=argcheck.count(0), metavar="N")
    keep_arrays: str = opt("--keep-arrays", "report: keep repetition 0's arrays of the tasks with findings "
                           "(findings, the default) or of every task (all); audit: also keep every entry's arrays as "
                           ".npz files in this directory", default="findings",
                           check=argcheck.kept(argcheck.one_of("findings", "all")), metavar="findings|all|DIR")
    examples: int | None = like(CasesOptions, "examples", default=None, shown=None, none_says="the corpus's own")
    seed: int | None = like(CasesOptions, "seed", default=None, shown=_shown_seed)
    corpus: str | None = like(CasesOptions, "corpus", default=None)
    #: a new (absent or empty) run directory (None: reports/<run-id>)
    out: str | None = like(CasesOptions, "out", default=None, check=argcheck.kept(argcheck.writable_dir),
                           writes=RUN_FILES)
    plugins: tuple[str, ...] = reproducer_option("--subject-plugin", "report", default=())
    timeout: float | None = opt("--timeout", "seconds of CPU time a run may use before its process is killed (one "
                                "that sleeps: 3 x that in wall seconds; a timeout is tried again alone with twice the "
                                "limit), > 0 (default {default})", default=None,
                                none_says="scaled with the case's estimated work", check=argcheck.duration())
    resume: str | None = opt("--resume", "continue an interrupted campaign in DIR (flags given must agree with its "
                             "campaign.json)", default=None, metavar="DIR", role="input")
    shard: argcheck.Shard | None = opt("--shard", "run shard i of n of the corpus (1-based)", default=None,
                                       check=argcheck.shards(), metavar="I/N")
    quiet: bool = opt("--quiet", "print no progress (bar or steps)", default=False, switch=True)
    localize: bool = opt("--no-localize", "do not localize findings", default=True, off=True)
    profile: str | None = like(CasesOptions, "profile", default=None, shown="ci")
    shrink_budget: float = opt("--shrink-budget", "seconds to spend shrinking the findings' cases to minimal ones "
                               "(default {default})", default=30.0, check=argcheck.duration(zero=True),
                               metavar="SECONDS")
    shrink: bool = opt("--no-shrink", "do not shrink the findings' cases", default=True, off=True)
    cluster: ClusterOptions = group("fleet (Dask)", ClusterOptions)

    def __post_init__(self) -> None:
        parse_text(self)
        if self.corpus is not None:
            ignored = [f"--{k}" for k in ("examples", "seed") if getattr(self, k) is not None]
            if ignored:
                raise InvalidArgument(f"corpus={self.corpus!r} runs its own cases: {' and '.join(ignored)} would "
                                      f"be ignored; leave {'them' if len(ignored) > 1 else 'it'} out")
        if self.profile is not None:
            argcheck.profile_or_corpus(self.profile, self.corpus)

    def settings(self, **kw: Any) -> CampaignOptions:
        """The campaign settings: the fields given, else the profile's own
        (:data:`harness.generate.corpora.PROFILE_CAMPAIGN`: the realistic profile's runs take seconds), else the
        settings' defaults (``kw`` overrides them all)."""
        from harness.generate.corpora import PROFILE_CAMPAIGN

        own = PROFILE_CAMPAIGN.get(self.profile or "ci", {})
        given = {k: getattr(self, k) for k in ("repeats", "fresh", "timeout", "jobs", "max_case_bytes")
                 if getattr(self, k) is not None}
        return CampaignOptions(**{**own, **given, "plugins": self.plugins, "quiet": self.quiet, **kw})


def report(opts: ReportOptions) -> int:
    """The report verb. Every argument is checked before the campaign starts (one-line
    :class:`InvalidArgument`); returns 0 when the report was written (findings are not failures)."""
    check_worker_limits()
    from harness.generate.corpora import campaign_corpus
    from harness.outputs.report import lock_run_dir, new_run_dir

    load_plugins(opts.plugins)
    make_corpus = functools.partial(campaign_corpus, profile=opts.profile or "ci")
    sel = _check_values(opts)
    if opts.resume:
        if not os.path.isdir(opts.resume):
            raise InvalidArgument(f"resume={opts.resume!r} is not a directory: nothing to resume")
        with lock_run_dir(opts.resume, "resume"):
            # Unfinished again until this resume writes its report: --keep never prunes it meanwhile.
            from harness.outputs.retention import FINISHED

            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(opts.resume, FINISHED))
            return _report(opts, make_corpus, opts.resume, sel)
    run_dir = opts.out or new_run_dir()
    with lock_run_dir(run_dir, "out"):
        # Between the check above and the lock another run may have written here: check again.
        if set(os.listdir(run_dir)) - {".lock"}:
            raise InvalidArgument(f"out={run_dir!r} is an existing non-empty directory: choose a new one, or "
                                  f"continue it with --resume {run_dir}")
        return _report(opts, make_corpus, run_dir, sel)


def _check_values(opts: ReportOptions) -> DeviceSelection | None:
    """What the parser cannot check alone: the names the registries hold once the plug-ins are loaded, the
    devices usable here, and ``out`` against ``resume``. Returns the devices selected here (None: a resume
    given no ``devices`` runs its campaign.json's)."""
    from harness.core.devices import select_devices
    from harness.subjects.registry import subjects_for

    if opts.subjects is not None:
        subjects_for(opts.subjects)  # UnknownSubject names the first unknown one
    sel = select_devices(opts.devices) if opts.devices is not None or not opts.resume else None
    if opts.resume is None and opts.out is not None:
        argcheck.run_dir_for_output("out", opts.out)
    if opts.resume is not None and opts.out is not None and \
            os.path.abspath(opts.out) != os.path.abspath(opts.resume):
        raise InvalidArgument(f"out={opts.out!r} and resume={opts.resume!r} name two directories: give one")
    return sel


def _fresh_cases(opts: ReportOptions, default_corpus: Callable[..., list[Case]]) -> list[Case]:
    from harness.core.case_limits import check_case_size
    from harness.core.corpus_files import load_corpus
    from harness.execute.plan import shard
    from harness.generate.corpora import DEFAULT_SEED

    if opts.corpus:  # checked by the parser: a readable regular file
        cases = load_corpus(opts.corpus)
    else:
        cases = default_corpus(opts.examples, seed=DEFAULT_SEED if opts.seed is None else opts.seed)
    cases = shard(cases, *opts.shard) if opts.shard is not None else cases
    for c in cases:  # an oversized case is refused before any array is built or worker started
        check_case_size(c, opts.max_case_bytes)
    return cases


def _resume_conflicts(opts: ReportOptions, meta: dict[str, Any], cases: list[Case],
                      default_corpus: Callable[..., list[Case]], sel: DeviceSelection | None) -> list[str]:
    """The fields given with ``resume`` that contradict its campaign.json, as ``name (here X, there Y)``."""
    from harness.core.contexts import parse_contexts
    from harness.core.corpus_files import corpus_digest
    from harness.subjects.registry import subjects_for

    out = []

    def differ(flag: str, given: Any, stored: Any) -> None:
        if given != stored:
            out.append(f"{flag} (given {given!r}, campaign.json {stored!r})")

    if opts.subjects is not None:
        differ("--subjects", [s.name for s in subjects_for(opts.subjects)], meta["subjects"])
    if sel is not None:
        differ("--devices", [d.id for d in sel.planned], meta["devices"])
    if opts.contexts is not None:
        differ("--contexts", [c.name for c in parse_contexts(opts.contexts)], meta["contexts"])
    if opts.profile is not None:
        differ("--profile", opts.profile, meta.get("profile", "ci"))
    if opts.repeats is not None:
        differ("--repeats", opts.repeats, meta["repeats"])
    if opts.fresh is not None:
        differ("--fresh", opts.fresh, meta["fresh"])
    if opts.timeout is not None:
        differ("--timeout", opts.timeout, meta["timeout"] and float(meta["timeout"]))  # None: scaled
    if opts.shard is not None:
        differ("--shard", str(opts.shard), meta.get("shard"))
    if opts.max_case_bytes is not None:
        differ("--max-case-bytes", opts.max_case_bytes, meta.get("max_case_bytes"))
    if opts.relations is not None:
        from harness.execute.relations import parse_relations

        differ("--relations", [r.name for r in parse_relations(opts.relations)], meta.get("relations", []))
    given = [k for k in ("corpus", "examples", "seed") if getattr(opts, k) is not None]
    if given:
        fresh = _fresh_cases(opts, default_corpus)
        if corpus_digest(fresh) != corpus_digest(cases):
            out.append(f"{'/'.join(f'--{k}' for k in given)} ({len(fresh)} cases, not the {len(cases)} of the run "
                       f"directory's corpus.jsonl)")
    for spec in opts.plugins:
        if spec not in meta.get("plugins", ()):
            out.append(f"--subject-plugin ({spec!r} is not in campaign.json's {meta.get('plugins', [])!r})")
    return out


def _report(opts: ReportOptions, default_corpus: Callable[..., list[Case]], run_dir: str,
            sel: DeviceSelection | None) -> int:
    from harness.core.contexts import parse_contexts
    from harness.core.devices import parse_devices
    from harness.core.env import fingerprint
    from harness.core.forking import BEHIND, Forked
    from harness.execute.campaign import resume_inputs
    from harness.execute.driver import run_campaign
    from harness.execute.relations import parse_relations
    from harness.outputs import report_files, terminal
    from harness.outputs.drawing import FigureServer
    from harness.outputs.fleet import out_for, run_on_cluster
    from harness.outputs.report import REPORTS_DIR, point_latest, read_campaign_meta, tidy_run_dir, write_timings
    from harness.subjects.registry import subjects_for

    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    if opts.resume:
        meta = read_campaign_meta(run_dir)
        load_plugins(meta.get("plugins", ()))  # the parent needs the plug-in subjects too, not just the workers
        cases, _ = resume_inputs(run_dir)
        conflicts = _resume_conflicts(opts, meta, cases, default_corpus, sel)
        if conflicts:
            raise InvalidArgument(f"resume={run_dir!r}: these flags contradict its campaign.json: "
                                  f"{'; '.join(conflicts)} (leave them out to resume as it was)")
        subjects = [s for s in subjects_for(meta["subjects"])]
        devices = parse_devices(meta["devices"])
        contexts = parse_contexts(meta["contexts"])
        settings = opts.settings(repeats=meta["repeats"], fresh=meta["fresh"], timeout=meta["timeout"],
                                 plugins=tuple(meta.get("plugins", ())), max_case_bytes=meta.get("max_case_bytes"))
    else:
        subjects = subjects_for(opts.subjects)
        assert sel is not None  # (selected by _check_values: not a resume)
        for note in sel.notes:
            print(f"harness: note: {note}", file=sys.stderr)
        devices = sel.planned  # an implied, unusable GPU stays in the plan: its rows say "skipped: <reason>"
        contexts = parse_contexts(opts.contexts)
        if opts.cluster.address is None:  # here, not on a cluster's workers
            from harness.execute.worker_sets import start_early

            start_early(contexts, devices)  # the first workers' Chainer import, while the corpus is built
        t0 = time.perf_counter()
        cases = _fresh_cases(opts, default_corpus)
        timings["case_building"] = time.perf_counter() - t0
        settings = opts.settings()
    if not cases:
        raise InvalidArgument("corpus holds no cases (check --corpus / --shard)")
    if not opts.quiet:
        # the task count is the progress bar's (it includes the relations' members and the oracles' tasks)
        print(f"harness report: {len(cases)} cases, {len(subjects)} subjects, devices "
              f"{', '.join(d.id for d in devices)}, contexts {', '.join(c.name for c in contexts)}; each task "
              f"runs {settings.repeats} times + {settings.fresh} fresh -> {run_dir}", file=sys.stderr)
    relations = [] if opts.resume else parse_relations(opts.relations)

    def one(target: Any) -> int:
        # One campaign and its report: here, or on a cluster (one per Dask worker with --spread every).
        where = out_for(run_dir, target) if target.suffix else run_dir
        # the environment's fingerprint imports Chainer (half a second): in a forked child below this process,
        # on what the first runs leave of the cores
        fp = None if target.environment else Forked(fingerprint, nice=BEHIND).start()
        # the figures' server imports matplotlib in its own process while the runs go (where it could not be
        # forked, this process imports it on a thread beside the first runs, where it compiles the page's
        # templates either way)
        figures = FigureServer().start()
        try:
            t0 = time.perf_counter()
            run = run_campaign(where, cases, subjects, devices, contexts, settings, executor=target.executor,
                               relations=relations, while_starting=figures.beside_runs(),
                               meta={"shard": None if opts.shard is None else str(opts.shard),
                                     "profile": opts.profile or "ci",
                                     **({"cluster": target.cluster} if target.cluster else {})},
                               resume=bool(opts.resume))
            own = {**timings, "campaign": time.perf_counter() - t0}
            t0 = time.perf_counter()
            _trajectories(where, run, settings, opts)
            own["trajectories"] = time.perf_counter() - t0
            found = _findings(where, run, settings, opts, own)
            t0 = time.perf_counter()
            env = target.environment or (fp.result() if fp is not None else {})
            frames: dict[str, Any] = {}

            def tidy() -> None:  # while the figures are drawn, and before the page lists the files
                tidy_run_dir(where, run.records, run.measures, opts.keep_arrays)

            files = report_files.write_report(run, environment=env, found=found, frames=frames, meanwhile=tidy,
                                        figures=figures)
        finally:
            figures.close()  # a server never asked (the runs or the findings failed) stops here
        own["report_writing"] = time.perf_counter() - t0
        own["total"] = time.perf_counter() - t_start
        write_timings(where, {**run.stats, **own})
        point_latest(where)
        if os.path.abspath(os.path.dirname(os.path.abspath(where))) == os.path.abspath(REPORTS_DIR):
            from harness.outputs.retention import prune_reports

            prune_reports(REPORTS_DIR, keep=max(1, KEEP if opts.keep is None else opts.keep))
        print(terminal.terminal_summary(frames["summary"], frames["headline"], frames["cells"]))
        print(f"\nreport: {files.get('summary.html', where)} ({own['total']:.0f} s)")
        return 0

    return max(run_on_cluster(opts.cluster, one))


def _trajectories(run_dir: str, run: Any, settings: CampaignOptions, opts: ReportOptions) -> None:
    """The model cases' trajectories between the two contexts of the pair, compared from the arrays the campaign
    kept; where they differ, the one-ULP baseline beside them and (unless not ``localize``) the first differing
    node, within :data:`LOCALIZE_BUDGET`. Their measures join the run's, so findings, cells and the gate judge
    them like any other."""
    from harness.execute.trajectories import campaign_trajectories, trajectory_measures
    from harness.judge.contracts import load_contracts

    run.trajectories = campaign_trajectories(run_dir, run.records, run.cases, plugins=settings.plugins,
                                             timeout=settings.timeout, localize=opts.localize,
                                             budget=LOCALIZE_BUDGET)
    run.measures = list(run.measures) + trajectory_measures(run.trajectories, load_contracts(None))


def _findings(run_dir: str, run: Any, settings: CampaignOptions, opts: ReportOptions,
              timings: dict[str, float]) -> list[Any]:
    """The run's findings, shrunk (``shrink_budget``) and localized (unless not ``localize``), each step in
    worker or child processes within its budget; the seconds of each step go into ``timings``."""
    from harness.execute.localization import localize_findings
    from harness.judge import findings as F
    from harness.judge.contracts import load_contracts
    from harness.judge.finding_groups import sort_findings
    from harness.outputs.assemble import campaign_findings

    t0 = time.perf_counter()
    contracts = load_contracts(None)
    found = campaign_findings(run_dir, run.measures, run.records, run.cases,
                              F.Origin(run_dir, plugins=settings.plugins), known=contracts)
    from harness.execute.trajectories import with_trajectory_causes

    found = with_trajectory_causes(found)  # localized already, at the first differing step
    # a subject's findings of a kind a smaller case can show (a known defect too: its export goes upstream from
    # its minimal case; an expected error, a check that did not run, a baseline's are not shrunk)
    worth = [f for f in found if f.role == "subject" and f.kind.shrinkable]
    rest = [f for f in found if f not in worth]
    timings["findings"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if worth and opts.shrink_budget > 0 and opts.shrink:
        from harness.execute.shrink_findings import shrink_findings

        worth = shrink_findings(worth, contracts, budget=opts.shrink_budget, timeout=settings.timeout)
    timings["shrinking"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if opts.localize:
        worth = localize_findings(worth, budget=LOCALIZE_BUDGET, max_case_bytes=settings.max_case_bytes)
    timings["localizing"] = time.perf_counter() - t0
    return sort_findings(worth + rest)
