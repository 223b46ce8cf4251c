"""The record files of a run directory, read whole before a verb works on them: ``report --resume`` and a
baseline (``gate --baseline``, ``replay --baseline``).

Each problem is either repaired or refused, never passed over in silence:

- repaired (the campaign runs the task again, and one ``note`` line says so): a line cut short by an interrupted
  write, a packed ``tasks``/``runs`` file cut short (its lines up to the cut are kept), an arrays file that is
  damaged (its task runs again);
- refused (:class:`~harness.core.errors.InvalidArgument`, naming the file and the line): a line that is not
  UTF-8, nests too deep or is not a record, a packed file with a bad checksum, a ``campaign.json`` that breaks its
  schema or names a shard ``i/n`` with ``i > n``, a corpus that is not the one the campaign ran (its case count or
  digest differ from ``campaign.json``'s, or a task names a case it lacks), a baseline's ``environment.json``,
  ``campaign.json`` or ``measures.jsonl`` that does not read whole.

Nothing finished is lost or counted twice: a task's record is kept unless its arrays are damaged (then it
reruns, once: :meth:`harness.execute.campaign.Campaign.repair` drops its line before the rerun appends one).
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from harness.core.errors import HarnessError, InvalidArgument, RecordError

__all__ = ["task_arrays",
           "json_file", "baseline_dir", "check_resume", "check_baseline", "corpus_stamp", "npz_sound", "record_notes",
           "runs_short"]


def corpus_stamp(cases: Iterable[Any]) -> dict[str, Any]:
    """What ``campaign.json`` records of its corpus, so a resume can tell it is the same one."""
    from harness.core.corpus_files import corpus_digest

    cases = list(cases)
    return {"cases": len(cases), "digest": corpus_digest(cases)}


def npz_sound(path: str) -> bool:
    """Whether an ``.npz`` file reads whole: a zip whose every member's checksum holds (every byte is read)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            return z.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError, NotImplementedError):
        return False


def record_notes(path: str, what: str) -> tuple[list[Any], list[str]]:
    """``([(line number, parsed object)], notes)`` of one record file (plain, or packed as a finished report
    leaves it): lines cut short are notes (their tasks run again); any other bad line or a damaged packed file is
    :class:`InvalidArgument` naming the file and line. ``what``: the verb's argument, for the message."""
    from harness.core.record_files import record_file, unpack_parts
    from harness.core.records import _parse_line

    found = record_file(path)
    if found is None:
        return [], []
    notes: list[str] = []
    cut = False
    try:
        if found != path:
            data, cut = unpack_parts(found)
            if cut:
                notes.append(f"{found}: cut short (a damaged copy): the tasks whose lines it lost run again")
        else:
            with open(found, "rb") as f:
                data = f.read()
    except RecordError as exc:
        raise InvalidArgument(f"{what}: {exc}") from None
    except OSError as exc:
        raise InvalidArgument(f"{what}: {found} cannot be read: {exc.strerror}") from None
    out = []
    torn = 0
    lines = data.split(b"\n")
    for n, raw in enumerate(lines, 1):
        state, obj = _parse_line(raw)
        if state == "ok":
            out.append((n, obj))
        elif state == "torn":
            torn += 1
            if torn == 1 and not (cut and n == len(lines)):  # (the line a cut ends in: said above)
                notes.append(f"{found}:{n}: a line cut short by an interrupted write: its task runs again")
        elif state == "bad":
            raise InvalidArgument(f"{what}: {found}:{n}: not a record ({obj}): the file was damaged, not cut short")
    if torn > 1:
        notes.append(f"{found}: {torn} lines cut short in all: their tasks run again")
    return out, notes


def _tasks(run_dir: str, what: str) -> tuple[dict[str, Any], list[str]]:
    from harness.core.records import TaskRecord

    path = os.path.join(run_dir, "tasks.jsonl")
    lines, notes = record_notes(path, what)
    tasks: dict[str, Any] = {}
    for n, obj in lines:
        try:
            rec = TaskRecord.from_dict(obj, f"{path}:{n}")
        except RecordError as exc:
            raise InvalidArgument(f"{what}: {exc}") from None
        tasks[rec.key] = rec  # a later line of one key wins: a task that ran again
    return tasks, notes


def json_file(path: str, what: str, schema: Any, kind: str) -> Any:
    """A JSON file of a run directory read whole and checked against ``schema``; one-line InvalidArgument (naming
    ``what``, the verb's argument) where it is missing, unreadable, not JSON or off its schema."""
    from harness.core.input_parsing import InputProblem, parse_json
    from harness.core.schema_check import check

    if not os.path.exists(path):
        raise InvalidArgument(f"{what}: {path} does not exist: not a {kind}")
    try:
        with open(path, "rb") as f:
            data = parse_json(f.read(), path)
    except OSError as exc:
        raise InvalidArgument(f"{what}: {path} cannot be read: {exc.strerror}") from None
    except InputProblem as exc:
        raise InvalidArgument(f"{what}: {exc}") from None
    problem = check(data, schema)
    if problem is not None:
        raise InvalidArgument(f"{what}: {path}: {problem}")
    return data


def _shard(meta: dict[str, Any], path: str, what: str) -> None:
    from harness.core.argcheck import shard

    if meta.get("shard") is not None:
        try:
            shard("shard", meta["shard"])
        except InvalidArgument as exc:
            raise InvalidArgument(f"{what}: {path}: {exc}") from None


def check_resume(run_dir: str, meta: dict[str, Any], what: str = "resume") -> list[str]:
    """Every record file ``--resume`` needs, read whole (``meta``: campaign.json, already checked against its
    schema): the notes of what the campaign repairs; InvalidArgument for what it cannot."""
    from harness.core.corpus_files import load_corpus

    meta_path = os.path.join(run_dir, "campaign.json")
    _shard(meta, meta_path, what)
    corpus_path = os.path.join(run_dir, "corpus.jsonl")
    try:
        cases = load_corpus(corpus_path)
    except HarnessError as exc:
        raise InvalidArgument(f"{what}: {' '.join(str(exc).split())}") from None
    stamp = meta.get("corpus")
    if isinstance(stamp, dict):
        now = corpus_stamp(cases)
        if now != {k: stamp.get(k) for k in now}:
            raise InvalidArgument(f"{what}: {corpus_path} holds {now['cases']} cases (digest {now['digest'][:12]}), "
                                  f"{meta_path} ran {stamp.get('cases')} (digest {str(stamp.get('digest'))[:12]}): "
                                  f"not the corpus this campaign ran")
    tasks, notes = _tasks(run_dir, what)
    ids = {c.id for c in cases}
    for rec in tasks.values():
        if rec.case_id not in ids:
            raise InvalidArgument(f"{what}: {run_dir}/tasks.jsonl: task {rec.key} ran case {rec.case_id}, which "
                                  f"{corpus_path} does not hold: not the corpus this campaign ran")
    run_lines, run_notes = record_notes(os.path.join(run_dir, "runs.jsonl"), what)
    notes += run_notes
    short = runs_short(tasks.values(), (obj for _, obj in run_lines))
    if short:
        notes.append(f"{run_dir}/runs.jsonl lacks run lines of {len(short)} finished task(s) (first "
                     f"{sorted(short)[0]}): they run again")
    for rec in tasks.values():
        if rec.array_file:
            path = os.path.join(run_dir, "arrays", rec.array_file)
            if os.path.exists(path) and not npz_sound(path):
                notes.append(f"{path}: damaged (it does not read whole): task {rec.key} runs again")
    return notes


def baseline_dir(name: str, path: str) -> str:
    """The command line's check of a baseline: a report directory (:func:`harness.core.argcheck.baseline_dir`)
    whose every file the baseline check reads, reads whole (:func:`check_baseline`), before the campaign."""
    from harness.core.argcheck import baseline_dir as report_dir

    report_dir(name, path)
    check_baseline(path, name)
    return path


def runs_short(tasks: Iterable[Any], run_lines: Iterable[Any]) -> set[str]:
    """The keys of the task records whose run lines (``runs.jsonl``: one per run, ``rec.runs`` of them) are not
    all there: such a task runs again, or its runs would be lost from the run directory."""
    have: dict[str, int] = {}
    for obj in run_lines:
        if isinstance(obj, dict) and isinstance(obj.get("key"), str):
            have[obj["key"]] = have.get(obj["key"], 0) + 1
    return {r.key for r in tasks if have.get(r.key, 0) < r.runs}


def check_baseline(path: str, what: str = "baseline") -> None:
    """Every file a baseline check reads, read whole before the campaign runs: ``tasks.jsonl`` (no line cut
    short: a baseline is a finished report), ``campaign.json``, ``environment.json``, ``measures.jsonl`` where
    present, and the arrays its tasks name. Anything that does not read is InvalidArgument naming the file."""
    from harness.core import schemas
    from harness.core.records import Measure

    tasks, notes = _tasks(path, what)
    if notes:
        raise InvalidArgument(f"{what}: {notes[0].split(': its task')[0].split(': the tasks')[0]}: a baseline "
                              f"must be a finished report")
    if not tasks:
        raise InvalidArgument(f"{what}={path!r}: tasks.jsonl holds no task records")
    meta = json_file(os.path.join(path, "campaign.json"), what, schemas.CAMPAIGN, "report directory")
    _shard(meta, os.path.join(path, "campaign.json"), what)
    json_file(os.path.join(path, "environment.json"), what, schemas.ENVIRONMENT, "report directory")
    lines, notes = record_notes(os.path.join(path, "measures.jsonl"), what)
    if notes:
        raise InvalidArgument(f"{what}: {notes[0].split(': its task')[0].split(': the tasks')[0]}: a baseline "
                              f"must be a finished report")
    mpath = os.path.join(path, "measures.jsonl")
    for n, obj in lines:
        try:
            Measure.from_dict(obj, f"{mpath}:{n}")
        except RecordError as exc:
            raise InvalidArgument(f"{what}: {exc}") from None
    for rec in tasks.values():
        if rec.array_file:
            arr = os.path.join(path, "arrays", rec.array_file)
            if os.path.exists(arr) and not npz_sound(arr):
                raise InvalidArgument(f"{what}: {arr} is damaged (it does not read whole)")


def task_arrays(run_dir: str, array_file: str | None) -> dict[str, Any] | None:
    """The arrays a run directory keeps of one task (``arrays/<array_file>``), or None where it keeps none or
    they cannot be read."""
    if not array_file:
        return None
    path = os.path.join(run_dir, "arrays", array_file)
    if not os.path.exists(path):
        return None
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError):
        return None
