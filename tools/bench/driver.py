"""One report-like campaign, timed through the campaign's public hooks (no patching of private names).

:class:`TimedExecutor` is an executor for :meth:`harness.execute.campaign.Campaign.run`: it wraps another
(a :class:`~harness.execute.lanes.LocalPool` by default) and measures, per task, the time spent inside
the wrapped executor (worker start-up and close, the runs, the per-run records, the comparison) apart from
the time the campaign spends on each outcome it is handed (``runs.jsonl``, ``tasks.jsonl``, the npz).
What the outcomes themselves account for (``TaskOutcome.seconds``: subject, transfer_and_overhead,
compare) is summed by the campaign into ``Campaign.stats``; the rest of the time inside is worker start-up
(where a new start-up group begins, and when the last one closes) and run records (everywhere).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Any, Iterator, Sequence

from tools.bench.common import median

__all__ = ["TimedExecutor", "scaled_corpus", "one_campaign", "campaign_cpu_seconds", "report_sizes", "PARTS"]

#: The additive parts of a campaign's wall time above the subjects' own time, with what each holds.
PARTS = (
    ("case_building", "case building (the corpus)"),
    ("worker_startup", "worker start-up and close (wall, inside the executor)"),
    ("transfer", "transfer and per-run overhead (pipe, pickling, input building in the worker)"),
    ("run_records", "per-run records inside the executor (digest and NaN/Inf counts of every tensor)"),
    ("compare", "comparator (digests, bit comparison of the repetitions)"),
    ("measuring", "what is left of the measure pass after the runs (each task is judged once, from the arrays "
                  "still in memory, as soon as the tasks it is compared with have finished, beside the next runs)"),
    ("writing", "the plan, corpus.jsonl and campaign.json, the report's matplotlib import while the first workers "
                "start, then the campaign writing each outcome (runs.jsonl, tasks.jsonl, npz of rep 0), progress, "
                "where it did not overlap the next task's runs"),
    ("oracle", "oracle subjects' own time"),
    ("report_writing", "report writing (tables, plots, html)"),
)


class TimedExecutor:
    """Wraps an executor and times each step of its task stream (see the module docstring).

    ``stats`` is the wrapped executor's, so :meth:`Campaign.run` adds its start-up and restart counts.
    """

    def __init__(self, inner: Any = None) -> None:
        from harness.execute.lanes import LocalPool

        self.inner = inner if inner is not None else LocalPool()
        self.stats: dict[str, float] = self.inner.stats
        #: one record per step: seconds inside the executor, seconds the campaign took after the
        #: yield, the outcome's own seconds, and whether the task opened a new start-up group
        self.steps: list[dict[str, float]] = []
        self.final_inside = 0.0  # the last step: the last group's workers closing

    def launch(self, tasks: Sequence[Any], settings: Any) -> None:
        """The wrapped executor's :meth:`~harness.execute.lanes.LocalPool.launch` (before :meth:`run`)."""
        launch = getattr(self.inner, "launch", None)
        if launch is not None:
            launch(tasks, settings)

    def discard(self) -> None:
        """The wrapped executor's :meth:`~harness.execute.lanes.LocalPool.discard`."""
        discard = getattr(self.inner, "discard", None)
        if discard is not None:
            discard()

    def run(self, tasks: Sequence[Any], settings: Any) -> Iterator[tuple[Any, Any]]:
        from harness.execute.plan import group_key

        stream = iter(self.inner.run(tasks, settings))
        last_group: Any = object()
        while True:
            t0 = time.perf_counter()
            try:
                task, outcome = next(stream)
            except StopIteration:
                self.final_inside = time.perf_counter() - t0
                return
            t1 = time.perf_counter()
            g = group_key(task)
            own = sum(float(outcome.seconds.get(k, 0.0)) for k in ("subject", "transfer_and_overhead", "compare"))
            step = {"inside": t1 - t0, "own": own, "new_group": float(g != last_group)}
            last_group = g
            yield task, outcome
            step["outside"] = time.perf_counter() - t1
            self.steps.append(step)

    def split(self, campaign: float) -> dict[str, float]:
        """The campaign's ``campaign`` seconds of wall beyond the outcomes' own (subject, transfer, comparator):
        ``worker_startup`` (the steps that opened a group, less a typical step's residual, plus the final close),
        ``run_records`` (the rest of the time waited inside the executor) and ``writing`` (what is left: the
        campaign's own work that did not overlap a run). A lane runs a task while the campaign writes the last
        one, so the time outside the executor is partly hidden: in one lane, where the outcomes' seconds follow
        each other, the three and the outcomes' seconds add up to ``campaign``."""
        resid = [max(s["inside"] - s["own"], 0.0) for s in self.steps]
        plain = [r for r, s in zip(resid, self.steps) if not s["new_group"]]
        typical = median(plain) if plain else 0.0
        startup = self.final_inside + sum(max(r - typical, 0.0) for r, s in zip(resid, self.steps) if s["new_group"])
        rest = max(campaign - sum(s["own"] for s in self.steps) - startup, 0.0)
        records = min(max(sum(resid) - (startup - self.final_inside), 0.0), rest)
        return {"worker_startup": startup, "run_records": records, "writing": rest - records}


def campaign_cpu_seconds() -> float:
    """CPU seconds of this process and of every child it (or a child of it) has reaped: user and system, every
    thread."""
    import resource

    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def scaled_corpus(factor: int, quick: bool = False) -> list[Any]:
    """``factor`` times the default corpus: copy ``j`` is :func:`default_corpus` with seed ``DEFAULT_SEED + j``
    and its anchors re-seeded (same shapes, new values), so every case is new and sizes stay the default's.
    ``quick``: three anchors (one per family) instead of the default corpus."""
    import dataclasses

    from harness.generate.corpora import DEFAULT_SEED, anchor_cases, default_corpus

    out: dict[str, Any] = {}
    for j in range(int(factor)):
        base = [c for c in anchor_cases() if c.seed in (11, 22, 31)] if quick else default_corpus(seed=DEFAULT_SEED + j)
        for c in base:
            if j and "anchor" in c.tags:
                c = dataclasses.replace(c, seed=c.seed + 100_000 * j)
            out.setdefault(c.id, c)
    return list(out.values())


def report_sizes(directory: str) -> dict[str, int]:
    """Bytes on disk of each entry of a report directory (a folder: the sum of the files under it), by name;
    hidden entries (the run's lock) left out."""
    out: dict[str, int] = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.startswith("."):
            continue
        if os.path.isdir(path):
            out[name + "/"] = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path)
                                  for f in files)
        else:
            out[name] = os.path.getsize(path)
    return out


def one_campaign(factor: int = 1, quick: bool = False, repeats: int = 5, fresh: int = 2,
                 report: bool = True, contexts: str = "default", jobs: int = 0, sizes: bool = False
                 ) -> dict[str, Any]:
    """One report-like campaign (``factor`` x the default corpus, CPU, ``contexts``, ``jobs`` lanes as
    ``harness report --jobs``) in a temporary directory, through harness report's own path
    (:func:`harness.execute.driver.run_campaign`: the plan, the campaign and its measure pass), then, with
    ``report``, the report written from the run in memory; its timings, bucketed (:data:`PARTS`). In one lane
    (``jobs=1``) the buckets are additive: ``total`` = subject + the parts. In several, the subjects', transfer
    and comparator seconds are summed over lanes running at once, so only ``total`` is a wall time. With
    ``sizes`` (and ``report``), ``report_bytes``: the directory as harness report leaves it, by entry
    (:func:`report_sizes`), tidied after the clock stops."""
    from harness.core.contexts import parse_contexts
    from harness.core.devices import parse_devices
    from harness.core.vocabulary import COMPUTE_PHASES, CPU_TIMING
    from harness.execute.campaign import CampaignOptions
    from harness.execute.driver import run_campaign
    from harness.subjects.registry import get_subject, subjects_for

    tmp = tempfile.mkdtemp(prefix="harness-bench-")
    figures = None
    try:
        cpu_start = campaign_cpu_seconds()
        t_start = time.perf_counter()
        fp = None
        if report:  # as harness report: the environment's fingerprint in a forked child while the campaign runs,
            # and the figures' server, which imports matplotlib meanwhile
            from harness.core.env import fingerprint
            from harness.core.forking import BEHIND, Forked
            from harness.outputs.drawing import FigureServer

            fp = Forked(fingerprint, nice=BEHIND).start()
            figures = FigureServer().start()
        if report:  # as harness report: the first workers' zygote imports Chainer while the corpus is built
            from harness.execute.worker_sets import start_early

            start_early(parse_contexts(contexts), parse_devices("cpu"))
        cases = scaled_corpus(factor, quick)
        settings = CampaignOptions(repeats=repeats, fresh=fresh, quiet=True, jobs=jobs)
        executor = TimedExecutor()
        # one clock read ends each bucket and starts the next: the buckets add up to the total with no gap
        # between them (a gap of a few lines is milliseconds on a busy machine)
        t0 = time.perf_counter()
        t_cases = t0 - t_start
        # harness report's own path: plan, inputs, the campaign, then the measure pass (run.stats["measuring"])
        # as harness report: the page's templates (and matplotlib, without a server) beside the first runs
        while_starting = None if figures is None else figures.beside_runs()
        run = run_campaign(tmp, cases, subjects_for(None), parse_devices("cpu"), parse_contexts(contexts), settings,
                           executor=executor, while_starting=while_starting)
        t1 = time.perf_counter()
        t_measure = float(run.stats["measuring"])
        t_campaign = t1 - t0 - t_measure
        if fp is not None:  # the report of the run in memory, as harness report writes it
            from harness.outputs import report_files

            report_files.write_report(run, environment=fp.result(), figures=figures)
        t2 = time.perf_counter()
        t_report = t2 - t1
        total = t2 - t_start
        # the campaign's CPU seconds, every process of it: its workers are reaped once their zygote is closed
        # (a later round in this process starts another)
        from harness.execute.zygote import close_zygotes

        close_zygotes()
        cpu_all = campaign_cpu_seconds() - cpu_start
        oracle = cpu = 0.0
        with open(os.path.join(tmp, "runs.jsonl"), encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if get_subject(r["subject"]).role == "oracle":
                    oracle += sum(v for k, v in r["timings"].items() if k in COMPUTE_PHASES)
                else:
                    cpu += float(r["timings"].get(CPU_TIMING, 0.0))
        report_bytes: dict[str, int] = {}
        if sizes and fp is not None:  # off the clock: the directory as harness report leaves it
            from harness.outputs.report import tidy_run_dir

            tidy_run_dir(tmp, run.records, run.measures)
            report_bytes = report_sizes(tmp)
        st = run.stats
        split = executor.split(t_campaign)
        subject_all = float(st["subject"])
        return {
            "total": total,
            "subject": subject_all - oracle,
            # the same runs' CPU seconds, every thread of each worker counted (BLAS's included)
            "subject_cpu": cpu,
            "cpu_all": cpu_all,
            "case_building": t_cases,
            "worker_startup": split["worker_startup"],
            "transfer": float(st["transfer_and_overhead"]),
            "run_records": split["run_records"],
            "compare": float(st["compare"]),
            # the campaign's own time outside the executor: the plan and its inputs, the outcome writing
            "writing": split["writing"],
            "oracle": oracle,
            "measuring": t_measure,
            "report_writing": t_report,
            "campaign": t_campaign,
            "jobs": float(settings.lanes()),
            "cores": float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1),
            "worker_startup_summed": float(st.get("worker_startup", 0.0)),
            "runs": float(st["runs"]),
            "tasks": float(len(run.tasks)),
            "cases": float(len(cases)),
            "restarts": float(st.get("restarts", 0.0)),
            "report_bytes": report_bytes,
        }
    finally:
        if figures is not None:
            figures.close()
        shutil.rmtree(tmp, ignore_errors=True)
