"""Findings of a campaign: its measures grouped into :class:`~harness.judge.findings.Finding` records.

The one place the report, the gate and JUnit get their findings from: roles from the registry, case sizes from
the corpus, task records for the errors' tracebacks, and each finding's case written under ``cases/`` so the
printed commands run. The grouping and every command are :mod:`harness.judge.findings`'.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Sequence

from harness.core.cases import Case
from harness.core.classification import Verdict
from harness.core.fileio import atomic_write
from harness.core.records import Measure, TaskRecord
from harness.judge import findings as F
from harness.judge.finding_groups import group

__all__ = ["campaign_findings", "write_case_files", "roles_of", "records_by_task", "case_sizes"]


def roles_of(names: Iterable[str]) -> dict[str, str]:
    """Each subject's role as the registry says (a name it does not know: a plain subject)."""
    from harness.subjects.registry import SUBJECTS

    return {n: (SUBJECTS[n].role if n in SUBJECTS else "subject") for n in names}


def records_by_task(records: Mapping[str, TaskRecord] | Iterable[TaskRecord]) -> dict[tuple[str, str, str, str],
                                                                                      TaskRecord]:
    recs = records.values() if isinstance(records, Mapping) else records
    return {(r.case_id, r.subject, r.device, r.context): r for r in recs}


def case_sizes(cases: Mapping[str, Case]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for cid, c in cases.items():
        try:
            out[cid] = int(c.size())
        except Exception:  # noqa: BLE001 - a bad input's spec may have no size
            out[cid] = None
    return out


def write_case_files(run_dir: str, found: Sequence[F.Finding], cases: Mapping[str, Case]) -> None:
    """Every case a finding names (its reproducer's and the group's) as ``cases/<id>.json``."""
    wanted = {f.case_id for f in found} | {c for f in found for c in f.cases[:1]} | {
        c for f in found for _, c in f.library_cases}
    for cid in sorted(wanted):
        path = os.path.join(run_dir, "cases", f"{cid}.json")
        if cid in cases and not os.path.exists(path):
            atomic_write(path, cases[cid].to_json() + "\n")


def campaign_findings(run_dir: str, measures: Sequence[Measure], records: Mapping[str, TaskRecord],
                      cases: Mapping[str, Case], origin: F.Origin, *, known: Any = None) -> list[F.Finding]:
    """The findings of a campaign's measures, most severe first, with their case files written.

    ``known`` (the contracts) gives a known defect its reason and upstream reference where it has one. A pair of
    contexts a trajectory measure judges is its finding alone (:func:`harness.judge.trajectory.told_once`)."""
    by_task = records_by_task(records)
    reasons: dict[tuple[str, str, str, str], str] = {}
    lookup = getattr(known, "known_defect_for", None)
    if lookup is not None:
        for m in measures:
            if m.verdict != Verdict.KNOWN_DEFECT:
                continue
            rec = by_task.get((m.case_id, m.subject, m.device, m.context))
            err = rec.first_error if rec is not None else None
            case = cases.get(m.case_id)
            if rec is None or err is None or case is None:
                continue
            kd = lookup(m.subject, rec.device_kind, case.tags, str(err.get("type")), str(err.get("phase")))
            if kd is not None:
                reasons[(m.case_id, m.subject, m.device, m.context)] = \
                    f"{kd.reason} ({getattr(kd, 'reference', '')})".replace(" ()", "")
    from harness.judge.trajectory import told_once

    measures = told_once(measures)  # a model case's pair of contexts: its trajectory's finding alone
    found = group(measures, by_task, origin, roles=roles_of({m.subject for m in measures}),
                    sizes=case_sizes(cases), reasons=reasons)
    write_case_files(run_dir, found, cases)
    return found
