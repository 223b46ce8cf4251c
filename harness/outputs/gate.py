"""The CI gate's parts: its findings and dossiers, a baseline's measures, the control check, JUnit (the verb
that runs them is :mod:`harness.verbs.gate`).

No rule lives here: every verdict comes from :mod:`harness.judge.verdicts` through the campaign's measure pass
(:func:`harness.execute.measure_pass.measure_campaign`). This module turns broken measures into dossiers with a
replay command that reproduces them, adds the gate's own honesty checks (the positive control fired; a
baseline shares tasks with this run), and writes JUnit. Exit codes: 0 pass, 1 contract broken, 2 usage or
set-up error.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

from harness.core.cases import Case
from harness.core.classification import fails_gate
from harness.core.errors import InvalidArgument
from harness.core.records import Measure, TaskRecord
from harness.core.rundir import task_arrays
from harness.execute.campaign import load_tasks
from harness.execute.measure_pass import campaign_cases, load_measures, measure_campaign
from harness.judge import findings as F
from harness.judge import verdicts
from harness.judge.contracts import Contracts
from harness.judge.violations import Violation, assert_no_violations

__all__ = ["Violation", "assert_no_violations", "gate_campaign", "gate_violations", "check_baseline",
           "control_check", "write_junit", "gate_findings", "baseline_measures", "fails", "failing_cells",
           "belongs", "cell_of"]


def gate_violations(run_dir: str, measures: Sequence[Measure], cases: Mapping[str, Case] | None = None
                    ) -> list[Violation]:
    """The broken measures of a campaign, one :class:`Violation` each (``violations.json``), with the command
    of the finding each belongs to."""
    found = gate_findings(run_dir, measures, cases=cases)
    out = []
    for m in measures:
        if not fails(m):
            continue
        f = next((f for f in found if belongs(m, f)), None)
        out.append(_violation(m, f))
    return out


def _violation(m: Measure, f: F.Finding | None) -> Violation:
    """A broken measure with the command of the finding it belongs to, and that finding's origin (contracts,
    plug-ins, baseline, environment), so that every command of its dossier judges as the gate did."""
    if f is None:
        return Violation(m)
    return Violation(m, replay=f.replay(), case_file=f.origin.case_file(f.repro_case), origin=f.origin, role=f.role)


def fails(m: Measure) -> bool:
    """Whether the gate fails on this measure (:func:`~harness.core.classification.fails_gate`)."""
    return fails_gate(m.verdict)


def belongs(m: Measure, f: F.Finding) -> bool:
    """Whether broken measure ``m`` is one of finding ``f``'s."""
    return (m.subject in f.subjects and m.device == f.device and m.rule == f.rule
            and (m.relation or m.context) == (f.relation or f.context) and m.case_id in f.cases
            and F.tensor_kind(m.tensor) == f.tensor_kind)


def gate_findings(run_dir: str, measures: Sequence[Measure], *, cases: Mapping[str, Case] | None = None,
                  records: Mapping[str, TaskRecord] | None = None, origin: F.Origin | None = None,
                  contracts: Any = None) -> list[F.Finding]:
    """The findings of a gate campaign (every class; :attr:`Finding.fails` says which fail the gate)."""
    from harness.outputs.assemble import campaign_findings

    cases = campaign_cases(run_dir) if cases is None else cases
    records = load_tasks(run_dir) if records is None else records
    return campaign_findings(run_dir, measures, records, cases, origin or F.Origin(run_dir), known=contracts)


def control_check(tasks: Mapping[str, TaskRecord], measures: Sequence[Measure]) -> list[Measure]:
    """The gate could have failed: the positive control (a subject of role ``control`` that declares itself
    nondeterministic) ran and diverged at least once run to run. A broken measure when it did not."""
    from harness.subjects.registry import SUBJECTS

    controls = [n for n, s in SUBJECTS.items() if s.role == "control" and s.declared_for("cpu").deterministic is False]
    out = []
    for name in controls:
        ran = [r for r in tasks.values() if r.subject == name and r.status == "ok"]
        fired = any(m.subject == name and m.kind == "repeat" and m.identical is False for m in measures)
        if fired:
            continue
        why = ("did not run" if not ran else
               f"ran {len(ran)} task(s) and never diverged: this gate could not have caught nondeterminism")
        out.append(Measure(kind="task", case_id="", subject=name, device="cpu", context="*", tensor="",
                           verdict=verdicts.BROKEN, rule="the positive control must diverge",
                           contract="gate honesty: a check that cannot fail is not a check", detail=f"{name} {why}"))
    return out


def gate_campaign(run_dir: str, contracts: Contracts, *, control: bool = True) -> list[Violation]:
    """Measure a finished campaign under ``contracts`` (writing ``measures.jsonl``) and return its violations,
    including a positive control that did not fire (``control=False`` leaves that check out)."""
    measures = measure_campaign(run_dir, contracts)
    if control:
        measures = measures + control_check(load_tasks(run_dir), measures)
    return gate_violations(run_dir, measures)


def _baseline_arrays(baseline_dir: str, rec: TaskRecord | None) -> dict[str, Any] | None:
    return task_arrays(baseline_dir, rec.array_file if rec is not None else None)


def check_baseline(run_dir: str, baseline_dir: str, contracts: Contracts) -> list[Violation]:
    """The violations of :func:`baseline_measures` (each with the command that reproduces it)."""
    measures, diff = baseline_measures(run_dir, baseline_dir, contracts)
    origin = F.Origin(run_dir, baseline=baseline_dir, env=F.env_for_reproducer(diff))
    found = gate_findings(run_dir, measures, origin=origin)
    out = []
    for m in measures:
        f = next((f for f in found if belongs(m, f)), None)
        if fails(m):
            out.append(_violation(m, f))
    return out


def baseline_measures(run_dir: str, baseline_dir: str, contracts: Contracts
                      ) -> tuple[list[Measure], list[tuple[str, Any, Any]]]:
    """A baseline check: digests the contracts call stable must equal the baseline's (with the ULP distance
    where the baseline kept its arrays, and the environment fields that differ), oracle errors within
    tolerance there must stay so, and the two runs must share tasks at all. Returns the measures and the
    environment fields that differ ``(field, baseline, now)``."""
    new = load_tasks(run_dir)
    old = load_tasks(baseline_dir)
    if not old:
        raise InvalidArgument(f"baseline={baseline_dir!r} holds no tasks.jsonl: not a report directory")
    shared = [k for k in new if k in old]
    measures: list[Measure] = []
    if not shared:
        measures.append(Measure(kind="baseline", case_id="", subject="(all)", device="*", context="*", tensor="",
                                verdict=verdicts.BROKEN, rule="the baseline must share tasks with this run",
                                contract="gate honesty", detail=f"baseline={baseline_dir!r} shares no task with "
                                f"this run ({len(new)} tasks, {len(old)} in the baseline): nothing was compared"))
    diff = environment_changes(run_dir, baseline_dir)
    env_note = _environment_note(diff)
    for key in shared:
        rec, base = new[key], old[key]
        if rec.status != "ok" or base.status != "ok":
            continue
        contract = contracts.find(rec.subject, rec.device_kind, rec.context)
        if contract is None or not (contract.reproducible or contract.across_processes):
            continue
        changed = [n for n, t in rec.tensors.items() if n in base.tensors and base.tensors[n].digest != t.digest]
        if not changed:
            continue
        barrays = _baseline_arrays(baseline_dir, base) or {}
        mine = _baseline_arrays(run_dir, rec) or {}
        measures += against_baseline(rec, base, mine, barrays, contract, baseline_dir, env_note)
    return measures + _oracle_growth(run_dir, baseline_dir), diff


def against_baseline(rec: TaskRecord, base: TaskRecord, mine: Mapping[str, Any], theirs: Mapping[str, Any],
                     contract: Any, baseline_dir: str, env_note: str = "") -> list[Measure]:
    """The baseline measures of one task: a tensor whose digest changed is broken (with the ULP distance where
    both sides' arrays are at hand). ``gate --baseline`` and ``replay --baseline`` both judge here."""
    ident = {"case_id": rec.case_id, "subject": rec.subject, "device": rec.device, "context": rec.context}
    out = []
    for name, t in rec.tensors.items():
        b = base.tensors.get(name)
        if b is None or b.digest == t.digest:
            continue
        if b.digest and t.digest:
            from harness.judge.digest import digest_mismatch_reason

            why = digest_mismatch_reason(b.digest, t.digest)
            if why is not None:  # a baseline of another digest algorithm: every tensor would "change"
                raise InvalidArgument(f"baseline={baseline_dir!r} cannot be compared with this run: {why}")
        m = verdicts.judge_pair("baseline", contract, ident, name, mine.get(name), theirs.get(name),
                                other="baseline")
        if m.detail.startswith("tensor") or m.identical is not False:
            m = dataclasses.replace(m, identical=False, verdict=verdicts.BROKEN)
        detail = (f"baseline digest {b.digest}\nnew digest      {t.digest}\nbaseline: {baseline_dir}"
                  + ("" if theirs else " (no arrays kept there: no ULP distance)") + env_note)
        out.append(dataclasses.replace(m, detail=detail))
    return out




def environment_changes(run_dir: str, baseline_dir: str) -> list[tuple[str, Any, Any]]:
    """The fingerprint fields that differ between a baseline and this run: ``(field, baseline, now)``."""
    import json

    try:
        with open(os.path.join(run_dir, "environment.json"), encoding="utf-8") as f:
            a = json.load(f)
        with open(os.path.join(baseline_dir, "environment.json"), encoding="utf-8") as f:
            b = json.load(f)
    except (OSError, ValueError):
        return []
    from harness.core.env import environment_diff

    return [(r.field, r.A, r.B) for r in environment_diff(b, a)]


def _environment_note(diff: Sequence[tuple[str, Any, Any]]) -> str:
    if not diff:
        return "\nEnvironment: no field differs from the baseline's"
    shown = "; ".join(f"{k}: {a} -> {b}" for k, a, b in diff[:6])
    return f"\nEnvironment differences (baseline -> now): {shown}" + (" ..." if len(diff) > 6 else "")


def _oracle_growth(run_dir: str, baseline_dir: str) -> list[Measure]:
    """Oracle measures within tolerance in the baseline and beyond it now."""
    from harness.core.record_files import record_file

    if record_file(os.path.join(baseline_dir, "measures.jsonl")) is None:  # plain or packed
        return []
    base = {(m.case_id, m.subject, m.device, m.context, m.tensor): m for m in load_measures(baseline_dir)
            if m.kind == "oracle"}
    out = []
    for m in load_measures(run_dir):
        b = base.get((m.case_id, m.subject, m.device, m.context, m.tensor))
        if m.kind == "oracle" and b is not None and b.within and m.within is False:
            out.append(dataclasses.replace(m, kind="baseline", verdict=verdicts.BROKEN,
                                           rule="oracle error grew beyond tolerance against the baseline",
                                           detail=f"error / allowed {m.error_ratio:.3g} "
                                                  f"(baseline {b.error_ratio:.3g})"))
    return out


# ---- JUnit ---------------------------------------------------------------------------------------------


def cell_of(subject: str, device: str, context: str) -> str:
    return f"{subject}[{device}]::{context}"


def failing_cells(found: Sequence[F.Finding]) -> dict[str, list[F.Finding]]:
    """The subject x device x context checks each failing finding breaks."""
    out: dict[str, list[F.Finding]] = {}
    for f in found:
        if not f.fails:
            continue
        for s in f.subjects:
            out.setdefault(cell_of(s, f.device, f.context), []).append(f)
    return out


def write_junit(path: str, tasks: Mapping[str, TaskRecord], found: Sequence[F.Finding], seconds: float) -> None:
    """One testcase per subject[device]::context: a failure where a finding breaks it (its dossiers), a
    ``<skipped message=...>`` where none of its tasks ran (with the reason), a pass otherwise. ElementTree."""
    import xml.etree.ElementTree as ET

    from harness.core.fileio import atomic_write

    cells: dict[str, list[TaskRecord]] = {}
    for r in tasks.values():
        cells.setdefault(cell_of(r.subject, r.device, r.context), []).append(r)
    by_cell = failing_cells(found)
    names = sorted(set(cells) | set(by_cell))
    suite = ET.Element("testsuite", name="harness-gate", tests=str(len(names)), time=f"{seconds:.1f}")
    failures = skipped = 0
    for n in names:
        case = ET.SubElement(suite, "testcase", classname="harness.gate", name=n)
        fs = by_cell.get(n, [])
        recs = cells.get(n, [])
        if fs:
            failures += 1
            fail = ET.SubElement(case, "failure", message=fs[0].headline())
            fail.text = "\n\n".join(f.dossier() for f in fs[:5]) + (f"\n\n... and {len(fs) - 5} more finding(s)"
                                                                    if len(fs) > 5 else "")
        elif recs and all(r.status == "skipped" for r in recs):
            skipped += 1
            ET.SubElement(case, "skipped", message=recs[0].skip_reason or "not run")
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    ET.indent(suite)
    atomic_write(path, ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n")
