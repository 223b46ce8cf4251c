"""`harness report`: build or load the corpus, run the campaign, write the tables, localize findings."""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
import sys
import time
from typing import Any, Callable, Iterator, Mapping, Sequence

from harness.core.cases import Case, load_corpus
from harness.core.contexts import parse_contexts
from harness.core.devices import parse_devices, select_devices
from harness.core.errors import InvalidArgument
from harness.core.forking import BEHIND, Forked
from harness.core.records import Measure, TaskRecord, compress_jsonl
from harness.execute.campaign import CampaignSettings, parse_shard, resume_inputs, shard
from harness.execute.driver import run_campaign
from harness.outputs.drawing import FigureServer
from harness.subjects.registry import subjects_for

__all__ = ["run_report", "new_run_dir", "point_latest", "lock_run_dir", "read_campaign_meta", "REPORTS_DIR"]

REPORTS_DIR = "reports"


def new_run_dir(base: str = REPORTS_DIR) -> str:
    """``reports/<UTC timestamp>-<pid>``: unique, sortable."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return os.path.join(base, f"{stamp}-{os.getpid()}")


def point_latest(run_dir: str, base: str = REPORTS_DIR) -> None:
    """Make ``reports/latest`` a symlink to ``run_dir`` (replaced atomically)."""
    if os.path.abspath(os.path.dirname(os.path.abspath(run_dir))) != os.path.abspath(base):
        return
    link = os.path.join(base, "latest")
    tmp = link + f".tmp{os.getpid()}"
    try:
        os.symlink(os.path.basename(run_dir), tmp)
        os.replace(tmp, link)
    except OSError:
        pass


@contextlib.contextmanager
def lock_run_dir(run_dir: str, name: str = "out") -> Iterator[None]:
    """Hold ``run_dir/.lock`` (``fcntl.flock``, non-blocking) while a campaign writes into ``run_dir``.

    A second run into the same directory gets :class:`InvalidArgument` naming the holder's pid instead
    of running every task a second time. The lock goes with the process (also on kill -9); the file
    stays, holding the last holder's pid.
    """
    import fcntl

    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, ".lock")
    f = open(path, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            raise InvalidArgument(f"{name}={run_dir!r} is in use by another harness run (pid {holder}; lock "
                                  f"{path})") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield
    finally:
        f.close()  # releases the lock


def read_campaign_meta(run_dir: str, name: str = "resume") -> dict[str, Any]:
    """``run_dir/campaign.json`` validated whole against :data:`harness.core.schemas.CAMPAIGN` (at least one
    subject, device and context; repeats, fresh and timeout in range), with ``tasks.jsonl`` (plain or gzipped)
    line by line: one-line errors for a missing, garbage or incomplete file, or a task line that is not a
    record. These values come from a file, not the command line, so they are checked here."""
    from harness.core import schemas
    from harness.core.argcheck import readable_file

    if not os.path.isdir(run_dir):
        raise InvalidArgument(f"{name}={run_dir!r} is not a directory: nothing to resume")
    path = os.path.join(run_dir, "campaign.json")
    if not os.path.lexists(path):
        raise InvalidArgument(f"{name}={run_dir!r} holds no campaign.json: nothing to resume")
    readable_file(name, path)
    try:
        with open(path, "rb") as f:
            meta = schemas.parse_json(f.read(), path)
    except OSError as exc:
        raise InvalidArgument(f"{name}: {path} cannot be read: {exc.strerror}") from None
    except schemas.InputProblem as exc:
        raise InvalidArgument(f"{name}: {exc}") from None
    problem = schemas.check(meta, schemas.CAMPAIGN)
    if problem is not None:
        raise InvalidArgument(f"{name}: {path}: {problem}")
    from harness.core.errors import RecordError
    from harness.core.records import read_tasks

    try:  # every line a task record; torn lines (anywhere: interrupted writes) are tasks that rerun
        read_tasks(os.path.join(run_dir, "tasks.jsonl"))
    except RecordError as exc:
        raise InvalidArgument(f"{name}: {exc}") from None
    if not os.path.exists(os.path.join(run_dir, "corpus.jsonl")):
        raise InvalidArgument(f"{name}={run_dir!r} holds no corpus.jsonl: nothing to resume")
    return meta


def _given(args: argparse.Namespace, dest: str) -> bool:
    """Whether the command line gave ``--dest`` (the parser records it; a Namespace made in code: not None)."""
    given = getattr(args, "_given", None)
    return dest in given if given is not None else getattr(args, dest, None) is not None


def _resume_conflicts(args: argparse.Namespace, meta: dict[str, Any], cases: list[Case],
                      default_corpus: Callable[..., list[Case]]) -> list[str]:
    """The flags given with ``--resume`` that contradict its campaign.json, as ``name (here X, there Y)``."""
    from harness.core.cases import corpus_digest

    out = []

    def differ(flag: str, given: Any, stored: Any) -> None:
        if given != stored:
            out.append(f"{flag} (given {given!r}, campaign.json {stored!r})")

    if _given(args, "subjects"):
        differ("--subjects", [s.name for s in subjects_for(_names(args.subjects))], meta["subjects"])
    if _given(args, "devices"):
        differ("--devices", [d.id for d in select_devices(args.devices).planned], meta["devices"])
    if _given(args, "contexts"):
        differ("--contexts", [c.name for c in parse_contexts(args.contexts)], meta["contexts"])
    if _given(args, "profile"):
        differ("--profile", args.profile, meta.get("profile", "ci"))
    if _given(args, "repeats"):
        differ("--repeats", args.repeats, meta["repeats"])
    if _given(args, "fresh"):
        differ("--fresh", args.fresh, meta["fresh"])
    if _given(args, "timeout"):
        differ("--timeout", args.timeout, meta["timeout"])  # None: scaled with each case's work
    if _given(args, "shard"):
        differ("--shard", args.shard, meta.get("shard"))
    if _given(args, "relations"):
        from harness.execute.relations import parse_relations

        differ("--relations", [r.name for r in parse_relations(args.relations)], meta.get("relations", []))
    if any(_given(args, k) for k in ("corpus", "examples", "seed")):
        given = _fresh_cases(args, default_corpus)
        if corpus_digest(given) != corpus_digest(cases):
            flags = "/".join(f"--{k}" for k in ("corpus", "examples", "seed") if _given(args, k))
            out.append(f"{flags} ({len(given)} cases, not the {len(cases)} of the run directory's corpus.jsonl)")
    for spec in args.subject_plugin or ():
        if spec not in meta.get("plugins", ()):
            out.append(f"--subject-plugin ({spec!r} is not in campaign.json's {meta.get('plugins', [])!r})")
    return out


def _names(text: str | None) -> list[str] | None:
    from harness.core.argcheck import name_list

    return name_list("subjects", text)


def _fresh_cases(args: argparse.Namespace, default_corpus: Callable[..., list[Case]]) -> list[Case]:
    if args.corpus:  # checked by the parser: a readable regular file
        cases = load_corpus(args.corpus)
    else:
        from harness.generate.corpora import DEFAULT_SEED

        cases = default_corpus(args.examples, seed=DEFAULT_SEED if args.seed is None else args.seed)
    sh = parse_shard(args.shard)
    cases = shard(cases, *sh) if sh is not None else cases
    from harness.core.cases import check_case_size

    for c in cases:  # an oversized case is refused before any array is built or worker started
        check_case_size(c, getattr(args, "max_case_bytes", None))
    return cases


def _check_values(args: argparse.Namespace) -> None:
    """What the parser cannot check alone (every single value it checked already: harness.cli): the names the
    registries hold once the plug-ins are loaded, the devices usable here, and --out against --resume."""
    from harness.core import argcheck

    if args.subjects is not None:
        subjects_for(_names(args.subjects))  # UnknownSubject names the first unknown one
    if args.devices is not None:
        select_devices(args.devices)
    if args.resume is None and args.out is not None:
        argcheck.run_dir_for_output("out", args.out)
    if args.resume is not None and args.out is not None and \
            os.path.abspath(args.out) != os.path.abspath(args.resume):
        raise InvalidArgument(f"out={args.out!r} and resume={args.resume!r} name two directories: give one")


def run_report(args: argparse.Namespace, default_corpus: Callable[..., list[Case]]) -> int:
    """The report verb. Every argument is checked before the campaign starts (one-line
    :class:`InvalidArgument`); returns 0 when the report was written (findings are not failures)."""
    _check_values(args)
    if args.resume:
        if not os.path.isdir(args.resume):
            raise InvalidArgument(f"resume={args.resume!r} is not a directory: nothing to resume")
        with lock_run_dir(args.resume, "resume"):
            # Unfinished again until this resume writes its report: --keep never prunes it meanwhile.
            from harness.outputs.render import FINISHED

            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(args.resume, FINISHED))
            return _run_report(args, default_corpus, args.resume)
    run_dir = args.out or new_run_dir()
    with lock_run_dir(run_dir, "out"):
        # Between the check above and the lock another run may have written here: check again.
        if set(os.listdir(run_dir)) - {".lock"}:
            raise InvalidArgument(f"out={run_dir!r} is an existing non-empty directory: choose a new one, or "
                                  f"continue it with --resume {run_dir}")
        return _run_report(args, default_corpus, run_dir)


def _run_report(args: argparse.Namespace, default_corpus: Callable[..., list[Case]], run_dir: str) -> int:
    from harness.outputs import tables
    from harness.core.env import fingerprint

    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    if args.resume:
        meta = read_campaign_meta(run_dir)
        from harness.subjects.registry import load_plugin

        for spec in meta.get("plugins", ()):  # the parent needs the plug-in subjects too, not just the workers
            load_plugin(spec)
        cases, _ = resume_inputs(run_dir)
        conflicts = _resume_conflicts(args, meta, cases, default_corpus)
        if conflicts:
            raise InvalidArgument(f"resume={run_dir!r}: these flags contradict its campaign.json: "
                                  f"{'; '.join(conflicts)} (leave them out to resume as it was)")
        subjects = [s for s in subjects_for(meta["subjects"])]
        devices = parse_devices(",".join(meta["devices"]))
        contexts = parse_contexts(",".join(meta["contexts"]))
        settings = CampaignSettings(repeats=meta["repeats"], fresh=meta["fresh"], timeout=meta["timeout"],
                                    plugins=tuple(meta.get("plugins", ())), quiet=args.quiet,
                                    jobs=_or(getattr(args, "jobs", None), "jobs"))
    else:
        subjects = subjects_for(_names(args.subjects))
        sel = select_devices(args.devices)
        for note in sel.notes:
            print(f"harness: note: {note}", file=sys.stderr)
        devices = sel.planned  # an implied, unusable GPU stays in the plan: its rows say "skipped: <reason>"
        contexts = parse_contexts(args.contexts)
        if getattr(args, "cluster", None) is None:  # here, not on a cluster's workers
            from harness.execute.campaign import start_early

            start_early(contexts, devices)  # the first workers' Chainer import, while the corpus is built
        t0 = time.perf_counter()
        cases = _fresh_cases(args, default_corpus)
        timings["case_building"] = time.perf_counter() - t0
        settings = CampaignSettings(repeats=_profile_or(args, "repeats"), fresh=_profile_or(args, "fresh"),
                                    timeout=_or(args.timeout, "timeout"),
                                    plugins=tuple(args.subject_plugin), quiet=args.quiet,
                                    jobs=_or(getattr(args, "jobs", None), "jobs"))
    if not cases:
        raise InvalidArgument("corpus holds no cases (check --corpus / --shard)")
    if not args.quiet:
        # the task count is the progress bar's (it includes the relations' members and the oracles' tasks)
        print(f"harness report: {len(cases)} cases, {len(subjects)} subjects, devices "
              f"{', '.join(d.id for d in devices)}, contexts {', '.join(c.name for c in contexts)}; each task "
              f"runs {settings.repeats} times + {settings.fresh} fresh -> {run_dir}", file=sys.stderr)
    from harness.execute.relations import parse_relations
    from harness.outputs.fleet import out_for, run_on_cluster

    relations = [] if args.resume else parse_relations(getattr(args, "relations", None))

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
                               meta={"shard": getattr(args, "shard", None),
                                     "profile": getattr(args, "profile", "ci"),
                                     **({"cluster": target.cluster} if target.cluster else {})},
                               resume=bool(args.resume))
            own = {**timings, "campaign": time.perf_counter() - t0}
            found = _findings(where, run, settings, args, own)
            t0 = time.perf_counter()
            env = target.environment or fp.result()
            frames: dict[str, Any] = {}

            def tidy() -> None:  # while the figures are drawn, and before the page lists the files
                if getattr(args, "keep_arrays", "findings") != "all":
                    prune_arrays(where, run.records, run.measures)
                for name in ("tasks.jsonl", "runs.jsonl", "measures.jsonl"):
                    compress_jsonl(os.path.join(where, name))  # read back transparently; --resume restores them

            files = tables.write_report(run, environment=env, found=found, frames=frames, meanwhile=tidy,
                                        figures=figures)
        finally:
            figures.close()  # a server never asked (the runs or the findings failed) stops here
        own["report_writing"] = time.perf_counter() - t0
        own["total"] = time.perf_counter() - t_start
        _write_timings(where, {**run.stats, **own})
        point_latest(where)
        if os.path.abspath(os.path.dirname(os.path.abspath(where))) == os.path.abspath(REPORTS_DIR):
            from harness.outputs.render import prune_reports

            prune_reports(REPORTS_DIR, keep=max(1, 10 if getattr(args, "keep", None) is None else args.keep))
        print(tables.terminal_summary(frames["summary"], frames["headline"], frames["cells"]))
        print(f"\nreport: {files.get('summary.html', where)} ({own['total']:.0f} s)")
        return 0

    return max(run_on_cluster(args, one))


#: Of each task kept for its findings, at most this many tensors (the worst by ULP distance) are kept.
KEPT_TENSORS = 4


def prune_arrays(run_dir: str, records: Mapping[str, TaskRecord], measures: Sequence[Measure]) -> list[str]:
    """Keep repetition 0's arrays only for the tasks of subjects (not controls or oracles) with a finding of
    their own (an invariance finding's two cases replay from their JSON), and of those only the
    :data:`KEPT_TENSORS` tensors that differ most; delete the rest (``replay`` and ``localize`` rebuild any
    run from its case file; ``--keep-arrays all`` keeps everything). Returns the files deleted."""
    import numpy as np

    from harness.core.fileio import atomic_npz
    from harness.judge.findings import kind_of
    from harness.subjects.registry import SUBJECTS

    worst: dict[tuple[str, str, str, str], dict[str, int]] = {}
    for m in measures:
        if m.kind in ("task", "relation") or kind_of(m) is None or not m.tensor:
            continue
        if (SUBJECTS[m.subject].role if m.subject in SUBJECTS else "subject") != "subject":
            continue
        t = worst.setdefault((m.case_id, m.subject, m.device, m.context), {})
        t[m.tensor] = max(t.get(m.tensor, 0), int(m.max_ulp or 0))
    wanted = {r.array_file: worst[(r.case_id, r.subject, r.device, r.context)] for r in records.values()
              if (r.case_id, r.subject, r.device, r.context) in worst and r.array_file}
    gone = []
    folder = os.path.join(run_dir, "arrays")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        path = os.path.join(folder, name)
        if not name.endswith(".npz"):
            continue
        if name not in wanted:
            os.remove(path)
            gone.append(name)
            continue
        keep = sorted(wanted[name], key=lambda k: -wanted[name][k])[:KEPT_TENSORS]
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files if k in keep}
        atomic_npz(path, arrays)
    return gone


def _profile_or(args: argparse.Namespace, key: str) -> Any:
    """A campaign setting: the command line's where it gave one, else the profile's own
    (:data:`harness.generate.corpora.PROFILE_CAMPAIGN`: the realistic profile's runs take seconds), else the
    settings' default."""
    from harness.generate.corpora import PROFILE_CAMPAIGN

    own = PROFILE_CAMPAIGN.get(getattr(args, "profile", None) or "ci", {}).get(key)
    if own is not None and not _given(args, key):
        return own
    return _or(getattr(args, key, None), key)


def _or(value: Any, key: str) -> Any:
    # The defaults are the settings dataclass's own (the parser shows the same ones in --help).
    return getattr(CampaignSettings, key) if value is None else value


def _write_timings(run_dir: str, timings: dict[str, Any]) -> None:
    from harness.core.fileio import atomic_json

    atomic_json(os.path.join(run_dir, "timings.json"), timings)


#: Of the report's budget for localizing findings, seconds (each localization in its own child process).
LOCALIZE_BUDGET = 90.0


def _findings(run_dir: str, run: Any, settings: CampaignSettings, args: argparse.Namespace,
              timings: dict[str, float]) -> list[Any]:
    """The run's findings, shrunk (``--shrink-budget``) and localized (unless ``--no-localize``), each step in
    worker or child processes within its budget; the seconds of each step go into ``timings``."""
    from harness.judge import findings as F
    from harness.judge.contracts import load_contracts
    from harness.outputs.assemble import campaign_findings
    from harness.outputs.localizing import localize_findings

    t0 = time.perf_counter()
    contracts = load_contracts(None)
    found = campaign_findings(run_dir, run.measures, run.records, run.cases,
                              F.Origin(run_dir, plugins=settings.plugins), known=contracts)
    worth = [f for f in found if f.role == "subject" and f.classification in (
        F.Classification.CONTRACT_BROKEN, F.Classification.NEW_DEFECT, F.Classification.ALLOWED)]
    rest = [f for f in found if f not in worth]
    timings["findings"] = time.perf_counter() - t0
    budget = float(getattr(args, "shrink_budget", 60.0) or 0.0)
    t0 = time.perf_counter()
    if worth and budget > 0 and not getattr(args, "no_shrink", False):
        from harness.outputs.shrinking import shrink_findings

        worth = shrink_findings(worth, contracts, budget=budget, timeout=settings.timeout)
    timings["shrinking"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if not getattr(args, "no_localize", False):
        worth = localize_findings(worth, budget=LOCALIZE_BUDGET)
    timings["localizing"] = time.perf_counter() - t0
    return F.sort_findings(worth + rest)
