"""`harness report`: build or load the corpus, run the campaign, write the tables, localize findings."""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import time
from typing import Any, Callable, Mapping, Sequence

from harness.core.cases import Case, load_corpus
from harness.core.contexts import parse_contexts
from harness.core.devices import parse_devices
from harness.core.errors import InvalidArgument
from harness.core.records import Measure, TaskRecord, compress_jsonl
from harness.execute.campaign import CampaignSettings, parse_shard, plan, resume_inputs, shard
from harness.execute.driver import run_campaign
from harness.subjects.registry import subjects_for

__all__ = ["run_report", "new_run_dir", "point_latest", "REPORTS_DIR"]

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


def run_report(args: argparse.Namespace, default_corpus: Callable[..., list[Case]]) -> int:
    """The report verb. Returns 0 when the report was written (findings are not failures)."""
    from harness.outputs import tables
    from harness.core.env import fingerprint

    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    if args.resume:
        run_dir = args.resume
        cases, meta = resume_inputs(run_dir)
        from harness.subjects.registry import load_plugin

        for spec in meta.get("plugins", ()):  # the parent needs the plug-in subjects too, not just the workers
            load_plugin(spec)
        subjects = [s for s in subjects_for(meta["subjects"])]
        devices = parse_devices(",".join(meta["devices"]))
        contexts = parse_contexts(",".join(meta["contexts"]))
        settings = CampaignSettings(repeats=meta["repeats"], fresh=meta["fresh"], timeout=meta["timeout"],
                                    plugins=tuple(meta.get("plugins", ())), quiet=args.quiet)
    else:
        t0 = time.perf_counter()
        if args.corpus:
            cases = load_corpus(args.corpus)
        else:
            cases = default_corpus(args.examples, seed=args.seed)
        sh = parse_shard(args.shard)
        if sh is not None:
            cases = shard(cases, *sh)
        timings["case_building"] = time.perf_counter() - t0
        names = args.subjects.split(",") if args.subjects else None
        subjects = subjects_for([n.strip() for n in names] if names else None)
        devices = parse_devices(args.devices)
        contexts = parse_contexts(args.contexts)
        settings = CampaignSettings(repeats=args.repeats, fresh=args.workers_repeats, timeout=args.timeout,
                                    plugins=tuple(args.subject_plugin), quiet=args.quiet)
        run_dir = args.out or new_run_dir()
    if not cases:
        raise InvalidArgument("corpus holds no cases (check --corpus / --shard)")
    if not args.quiet:
        n = len(plan(cases, subjects, devices, contexts))
        print(f"harness report: {len(cases)} cases, {len(subjects)} subjects, devices "
              f"{', '.join(d.id for d in devices)}, contexts {', '.join(c.name for c in contexts)}: "
              f"{n} tasks x ({settings.repeats} + {settings.fresh} fresh) runs -> {run_dir}", file=sys.stderr)
    t0 = time.perf_counter()
    run = run_campaign(run_dir, cases, subjects, devices, contexts, settings, meta={"shard": getattr(args, "shard", None)},
                       resume=bool(args.resume))
    timings["campaign"] = time.perf_counter() - t0
    root_cause = None
    if not getattr(args, "no_localize", False):
        root_cause = _root_cause_finder(run_dir, settings)
    t0 = time.perf_counter()
    env = fingerprint()
    files = tables.write_report(run_dir, environment=env, root_cause=root_cause, measures=run.measures)
    if getattr(args, "keep_arrays", "findings") != "all":
        prune_arrays(run_dir, run.records, run.measures)
    for name in ("tasks.jsonl", "runs.jsonl", "measures.jsonl"):
        compress_jsonl(os.path.join(run_dir, name))  # read back transparently; a --resume restores them
    timings["report_writing"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_start
    _write_timings(run_dir, {**run.stats, **timings})
    point_latest(run_dir)
    summary = tables.summary_frame(tables.results_frame(run_dir, run.measures))
    print(tables.terminal_summary(summary, files.pop("_headline", "").splitlines()))
    print(f"\nreport: {files.get('summary.html', run_dir)} ({timings['total']:.0f} s)")
    return 0


def prune_arrays(run_dir: str, records: Mapping[str, TaskRecord], measures: Sequence[Measure]) -> list[str]:
    """Keep repetition 0's arrays only for the tasks of subjects (not controls or oracles) with a finding;
    delete the rest (``replay`` and ``localize`` rebuild any run from its case file). Returns the files
    deleted."""
    from harness.outputs.tables import _finding_kind
    from harness.subjects.registry import SUBJECTS

    keep = {(m.case_id, m.subject, m.device, m.context) for m in measures
            if m.kind != "task" and _finding_kind(m) is not None
            and (SUBJECTS[m.subject].role if m.subject in SUBJECTS else "subject") == "subject"}
    wanted = {r.array_file for r in records.values() if (r.case_id, r.subject, r.device, r.context) in keep}
    gone = []
    folder = os.path.join(run_dir, "arrays")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".npz") and name not in wanted:
            os.remove(os.path.join(folder, name))
            gone.append(name)
    return gone


def _write_timings(run_dir: str, timings: dict[str, Any]) -> None:
    from harness.core.fileio import atomic_json

    atomic_json(os.path.join(run_dir, "timings.json"), timings)


def _root_cause_finder(run_dir: str, settings: CampaignSettings) -> Callable[[Any], str] | None:
    """A callback for the findings table: localize each run-to-run divergence (cached per task)."""
    try:
        from harness.outputs import localize
    except ImportError:
        return None
    from harness.core.cases import load_corpus as _load

    cases = {c.id: c for c in _load(os.path.join(run_dir, "corpus.jsonl"))}
    cache: dict[tuple[str, str, str, str], str] = {}

    def find(row: Any) -> str:
        kind = row["kind"]
        case_id, subject, device, context = row["case_id"], row["subject"], row["device"], row["context"]
        other = row.get("other", "") or ""
        if kind in ("not reproducible run to run", "not reproducible across processes"):
            key, kwargs = (case_id, subject, device, context, "repeats"), {"device": device, "context": context}
            how = ["--device", device, "--context", context, "--repeats", "3"]
        elif kind == "cross-context difference":
            key, kwargs = (case_id, subject, device, context, other), {"device": device,
                                                                       "contexts": (other or "default", context)}
            how = ["--device", device, "--contexts", f"{other or 'default'},{context}"]
        elif kind == "cross-device difference":
            key, kwargs = (case_id, subject, device, context, "devices"), {"devices": (other or "cpu", device)}
            how = ["--devices", f"{other or 'cpu'},{device}"]
        else:
            return ""
        if key not in cache:
            import shlex

            cmd = shlex.join(["python", "-m", "harness", "localize", f"{run_dir}/cases/{case_id}.json",
                              "--subject", subject, *how])
            try:
                loc = localize.localize(cases[case_id], subject, repeats=3, **kwargs)
                if loc.root is not None:
                    text = (f"{loc.root.describe()}: outputs differ while its inputs matched; "
                            f"{len(loc.downstream)} node(s) downstream, {loc.matched_before} matched before")
                elif loc.outputs_differ:
                    text = f"{loc.note or 'no differing function node'} ({', '.join(loc.outputs_differ[:4])})"
                else:
                    text = loc.note or "no divergence reproduced while localizing"
                cache[key] = f"{text} [{cmd}]"
            except Exception as exc:  # noqa: BLE001 - localization is best effort; say why
                cache[key] = f"not localized: {type(exc).__name__}: {exc} [{cmd}]"
        return cache[key]

    return find
