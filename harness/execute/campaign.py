"""The campaign: plan case x subject x device x context, run each R times in a pooled worker and K times
in other processes, compare the repetitions, and stream everything to disk as it happens.

Per start-up environment (contexts that set environment variables, or GPU contention, get
their own; the others share) the runner starts one *pool* worker (reused; forked from the environment's
zygote, which imported Chainer once, so a replacement costs a fork) and ``K`` *fresh* workers, each a
brand-new interpreter with its own imports, memory pool, caches, BLAS thread pool and hash seed. Every task
runs ``R`` times in the pool worker and once in each fresh worker, so state that survives inside one
process cannot hide run-to-run variation. A worker that dies, hangs or answers garbage is replaced and the
run is recorded as ``crashed`` / ``timeout``. Workers take the digests and NaN/Inf counts of their arrays
themselves; the comparison of repetitions whose digests agree reads no array.

The parts: the plan (:mod:`harness.execute.plan`), the workers of an environment
(:mod:`harness.execute.worker_sets`), one task's runs (:mod:`harness.execute.task_runs`) and the lanes that
run the tasks (:mod:`harness.execute.lanes`). This module holds the run directory they are written to, and
what reads it back for ``--resume`` and the measure pass.

Files under the campaign directory (each line flushed as it exists):

- ``runs.jsonl``: one line per run (status, error, timings, declared warnings, tensor digests: an entry
  that repeats an earlier run's of the task is named, not written again: :func:`harness.core.records.run_lines`);
- ``tasks.jsonl``: one line per finished task: the comparison of its repetitions;
- ``arrays/<task>.npz``: repetition 0's arrays, for cross-device, cross-context and oracle measures;
- ``corpus.jsonl`` and ``campaign.json``: what was asked, so ``--resume`` continues it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from typing import Any, Callable, Sequence

import numpy as np

from harness.core.cases import Case
from harness.core.corpus_files import load_corpus, write_corpus
from harness.core.errors import InvalidArgument
from harness.core.fileio import atomic_json, atomic_npz, npz_key, npz_members
from harness.core.records import TaskRecord, read_records, read_tasks, repair_jsonl, run_lines
from harness.core.rundir import corpus_stamp, npz_sound, runs_short
from harness.execute import admission
from harness.execute.lanes import LocalPool
from harness.execute.plan import Task
from harness.execute.progress import Progress
from harness.execute.settings import CampaignOptions, default_jobs  # re-exported: the settings live apart (no NumPy)
from harness.execute.task_runs import TaskOutcome

__all__ = ["Campaign", "CampaignOptions", "default_jobs", "array_file", "load_tasks", "arrays_complete",
           "load_arrays", "resume_inputs"]


def array_file(key: str) -> str:
    """The file name under ``arrays/`` that holds a task's repetition-0 arrays."""
    return hashlib.sha256(key.encode()).hexdigest()[:20] + ".npz"


def load_tasks(directory: str) -> dict[str, TaskRecord]:
    """The finished task records of a campaign directory, by key (a torn last line is ignored; a malformed
    line is a one-line :class:`~harness.core.errors.RecordError` naming the file and line)."""
    return read_tasks(os.path.join(directory, "tasks.jsonl"))


#: At most this many bytes of repetition-0 arrays a campaign keeps in memory for its measure pass.
HELD_BYTES = 512 << 20


class Campaign:
    """Runs a plan into a directory, resumably. ``run`` returns the task records (old and new)."""

    def __init__(self, directory: str, settings: CampaignOptions) -> None:
        self.dir = directory
        self.settings = settings
        os.makedirs(os.path.join(directory, "arrays"), exist_ok=True)
        self.stats: dict[str, float] = {"worker_startup": 0.0, "subject": 0.0, "compare": 0.0,
                                        "transfer_and_overhead": 0.0, "runs": 0, "restarts": 0}
        #: The arrays files this run wrote, still in memory (up to :data:`HELD_BYTES`), by name: the measure
        #: pass that follows reads them here rather than from the files it was just written to.
        self.held: dict[str, dict[str, np.ndarray]] = {}
        self._held_bytes = 0
        #: infrastructure notes (:attr:`TaskOutcome.notes`: a timeout that did not happen again alone), said on
        #: stderr as they come and counted in the stats (``retried``: runs tried again alone)
        self.notes: list[str] = []

    # ---- files ------------------------------------------------------------------------
    def write_inputs(self, cases: Sequence[Case], meta: dict[str, Any]) -> None:
        """Record the corpus and the settings (for replay and ``--resume``)."""
        write_corpus(cases, os.path.join(self.dir, "corpus.jsonl"))
        meta = {**meta, "corpus": corpus_stamp(cases), "repeats": self.settings.repeats, "fresh": self.settings.fresh,
                "timeout": self.settings.timeout, "plugins": list(self.settings.plugins),
                "max_case_bytes": self.settings.max_case_bytes}
        atomic_json(os.path.join(self.dir, "campaign.json"), meta)

    # ---- running ---------------------------------------------------------------------
    def run(self, tasks: Sequence[Task], executor: Any = None,
            on_record: Callable[[TaskRecord], None] | None = None) -> dict[str, TaskRecord]:
        """Run the tasks not finished yet with ``executor`` (default a :class:`~harness.execute.lanes.LocalPool`),
        writing each outcome as it arrives: its runs to ``runs.jsonl``, its record to ``tasks.jsonl``, its
        arrays. ``on_record`` is handed each finished task's record, those of an earlier run first (the measure
        pass measures them meanwhile: :class:`~harness.execute.measure_pass.Measurer`)."""
        done = self.repair()
        if on_record is not None:
            for rec in done.values():
                on_record(rec)
        todo = [t for t in tasks if t.key not in done]
        progress = Progress(len(todo), self.settings.quiet,  # weighted by what each task will cost
                            admission.weights(todo, self.settings.repeats, self.settings.fresh)).start()
        executor = executor if executor is not None else LocalPool()
        with open(os.path.join(self.dir, "runs.jsonl"), "a", encoding="utf-8") as runs_f, \
                open(os.path.join(self.dir, "tasks.jsonl"), "a", encoding="utf-8") as tasks_f:
            try:
                for task, outcome in executor.run(todo, self.settings):
                    rec = self.write_outcome(task, outcome, runs_f, tasks_f)
                    done[task.key] = rec
                    progress.step(rec, task.key)
                    if on_record is not None:
                        on_record(rec)
            finally:
                progress.stop()
                for k, v in getattr(executor, "stats", {}).items():
                    self.stats[k] = self.stats.get(k, 0.0) + v
        return done

    def repair(self) -> dict[str, TaskRecord]:
        """Before appending (a resume): the finished task records, with ``tasks.jsonl`` and ``runs.jsonl``
        rewritten clean: torn lines dropped wherever they are (their tasks rerun), and the run lines of tasks
        that did not finish dropped too (they rerun, and would otherwise be in the file twice). A finished
        report's compressed files come back plain."""
        tasks_path = os.path.join(self.dir, "tasks.jsonl")
        repair_jsonl(tasks_path)
        done = load_tasks(self.dir)
        # A task whose repetition-0 arrays are gone or cut down (a finished report keeps only its findings'
        # worst tensors: harness.outputs.report.prune_arrays) runs again: measured without them, its verdicts
        # would say "not judged" where the first report judged.
        lost = {k for k, r in done.items() if not arrays_complete(self.dir, r)}
        lost |= runs_short(done.values(), (obj for _, obj in read_records(os.path.join(self.dir, "runs.jsonl"))))
        if lost:
            repair_jsonl(tasks_path, keep=lambda line: isinstance(line, dict) and line.get("key") not in lost)
            done = {k: r for k, r in done.items() if k not in lost}
        repair_jsonl(os.path.join(self.dir, "runs.jsonl"),
                     keep=lambda line: isinstance(line, dict) and line.get("key") in done)
        return done

    def write_outcome(self, task: Task, outcome: TaskOutcome, runs_f: Any, tasks_f: Any) -> TaskRecord:
        """Write one task's outcome (runs first, then arrays, then the record that names them)."""
        runs_f.write(run_lines(outcome.runs))
        runs_f.flush()
        rec = outcome.record
        if outcome.arrays:
            fname = array_file(task.key)
            atomic_npz(os.path.join(self.dir, "arrays", fname), outcome.arrays)
            rec = dataclasses.replace(rec, array_file=fname)
            size = outcome.array_bytes
            if self._held_bytes + size <= HELD_BYTES:
                self.held[fname] = dict(outcome.arrays)
                self._held_bytes += size
        tasks_f.write(json.dumps(rec.to_dict(), sort_keys=True) + "\n")
        tasks_f.flush()
        for k, v in outcome.seconds.items():
            self.stats[k] = self.stats.get(k, 0.0) + v
        for note in outcome.notes:
            self.notes.append(note)
            self.stats["timeouts_not_reproduced"] = self.stats.get("timeouts_not_reproduced", 0.0) + 1
            if not self.settings.quiet:
                sys.stderr.write(f"\nnote: {note}\n")
        return rec


def arrays_complete(directory: str, rec: TaskRecord) -> bool:
    """Whether a task's arrays file holds every array of its repetition 0 (the names its record's digests give
    for the first successful repetition); True for a task that kept no arrays."""
    if not rec.array_file:
        return True
    path = os.path.join(directory, "arrays", rec.array_file)
    members = npz_members(path) if npz_sound(path) else None  # damaged: the task runs again
    if members is None:
        return False
    return all(npz_key(k) in members for k, d in rec.rep_digests.items() if d and d[0] is not None)


def load_arrays(directory: str, fname: str | None) -> dict[str, np.ndarray]:
    """Repetition 0's arrays of a task (empty when the task produced none)."""
    if not fname:
        return {}
    with np.load(os.path.join(directory, "arrays", fname), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def resume_inputs(directory: str) -> tuple[list[Case], dict[str, Any]]:
    """The corpus and settings of an earlier campaign, for ``--resume``."""
    meta_path = os.path.join(directory, "campaign.json")
    if not os.path.exists(meta_path):
        raise InvalidArgument(f"resume={directory!r} holds no campaign.json: nothing to resume")
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    return load_corpus(os.path.join(directory, "corpus.jsonl")), meta
