"""A report's run directory: its name, its lock, its campaign.json read back, the arrays it keeps, its timings
(the verb that writes it is :mod:`harness.verbs.report`)."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sys
from typing import Any, Iterator, Mapping, Sequence

from harness.core.errors import InvalidArgument
from harness.core.records import Measure, TaskRecord

__all__ = ["new_run_dir", "point_latest", "lock_run_dir", "read_campaign_meta", "prune_arrays", "write_timings",
           "REPORTS_DIR", "KEPT_TENSORS", "tidy_run_dir"]

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
    subject, device and context; repeats, fresh and timeout in range), with ``tasks.jsonl`` (plain or packed)
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
    from harness.core.rundir import check_resume, json_file

    meta: dict[str, Any] = json_file(path, name, schemas.CAMPAIGN, "run directory")
    if not os.path.exists(os.path.join(run_dir, "corpus.jsonl")):
        raise InvalidArgument(f"{name}={run_dir!r} holds no corpus.jsonl: nothing to resume")

    for note in check_resume(run_dir, meta, name):  # every record file read whole; what reruns, said
        print(f"harness: note: {name}: {note}", file=sys.stderr)
    return meta


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


def tidy_run_dir(run_dir: str, records: Mapping[str, TaskRecord], measures: Sequence[Measure],
                 keep_arrays: str = "findings") -> None:
    """What a finished report leaves of its campaign's files: the arrays pruned (:func:`prune_arrays`; all kept
    with ``keep_arrays="all"``) and the record files packed (read back transparently; ``--resume`` unpacks
    them)."""
    from harness.core.record_files import RECORD_FILES, compress_jsonl

    if keep_arrays != "all":
        prune_arrays(run_dir, records, measures)
    for name in RECORD_FILES:
        compress_jsonl(os.path.join(run_dir, name))


def write_timings(run_dir: str, timings: dict[str, Any]) -> None:
    """``timings.json``: where a report's time went."""
    from harness.core.fileio import atomic_json

    atomic_json(os.path.join(run_dir, "timings.json"), timings)
