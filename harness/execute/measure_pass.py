"""The measure pass: right after a campaign's runs, every task is measured once into ``measures.jsonl``.

It loads each task's repetition-0 arrays (and those of the tasks it is compared with) once, asks
:func:`harness.judge.measure.measure_task` for the measures and their verdicts, and writes them. The tables,
the gate and audits read ``measures.jsonl``; none of them loads arrays to measure again.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import OrderedDict
from typing import Any, Mapping, Sequence

import numpy as np

from harness.core.cases import Case
from harness.core.corpus_files import load_corpus
from harness.core.fileio import atomic_write
from harness.core.forking import map_forked
from harness.core.record_files import remove_packed
from harness.core.records import Measure, TaskRecord, jsonl_line, read_measures, read_tasks
from harness.execute.relations import pairs, relation_of
from harness.judge.contracts import Contracts
from harness.judge.measure import Reference, measure_task, references_for

__all__ = ["MEASURES_FILE", "measure_campaign", "Measurer", "key_of", "compared_with", "load_measures",
           "campaign_cases"]

MEASURES_FILE = "measures.jsonl"

Key = tuple[str, str, str, str]  # (case id, subject, device, context): a task of the plan


def key_of(rec: TaskRecord) -> Key:
    """The task a record is of, as the measures look it up."""
    return (rec.case_id, rec.subject, rec.device, rec.context)


class _Arrays:
    """Repetition-0 arrays by file, the most recent few kept (a task is compared with a handful of others)."""

    def __init__(self, directory: str, keep: int = 48,
                 held: Mapping[str, Mapping[str, np.ndarray]] | None = None) -> None:
        self.directory, self.keep = directory, keep
        self._cache: OrderedDict[str, dict[str, np.ndarray]] = OrderedDict()
        self.held = held if held is not None else {}  # the caller's own mapping: it fills while a campaign runs
        self.loaded = 0

    def get(self, rec: TaskRecord | None) -> dict[str, np.ndarray] | None:
        if rec is None or not rec.array_file:
            return None
        f = rec.array_file
        if f in self.held:  # still in memory from the campaign that just wrote the file
            return dict(self.held[f])
        if f in self._cache:
            self._cache.move_to_end(f)
            return self._cache[f]
        path = os.path.join(self.directory, "arrays", f)
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError):
            return None  # a file lost with an interrupted campaign: that task simply has no array measures
        self.loaded += 1
        self._cache[f] = arrays
        if len(self._cache) > self.keep:
            self._cache.popitem(last=False)
        return arrays


def campaign_cases(directory: str) -> dict[str, Case]:
    """The cases of a campaign directory, by id."""
    path = os.path.join(directory, "corpus.jsonl")
    return {c.id: c for c in load_corpus(path)} if os.path.exists(path) else {}


def order_reference(subject: str, device_kind: str) -> tuple[str, str] | None:
    from harness.subjects.registry import order_reference as find

    return find(subject, device_kind)


def _role_and_oracle(subject: str) -> tuple[str, str | None]:
    from harness.subjects.registry import SUBJECTS

    s = SUBJECTS.get(subject)
    return ("subject", None) if s is None else (s.role, s.oracle)


#: Below this many tasks the measure pass runs here only (a fork costs more than it saves; ``make bench``
#: measures the split against one slice).
SPLIT_TASKS = 100


def measure_campaign(directory: str, contracts: Contracts, *, tasks: Mapping[str, TaskRecord] | None = None,
                     write: bool = True, held: Mapping[str, Mapping[str, np.ndarray]] | None = None,
                     parts: int = 0, cases: Mapping[str, Case] | None = None) -> list[Measure]:
    """Measure every finished task of a campaign directory under ``contracts``; write ``measures.jsonl``.
    ``held``: arrays files the caller still holds in memory, by name (the others are read from the files);
    ``cases``: the campaign's cases by id, where the caller holds them (else read from ``corpus.jsonl``).

    The tasks, in their sorted order, are dealt into ``parts`` slices (0: one per lane the machine runs,
    :func:`~harness.execute.settings.default_jobs`; one below :data:`SPLIT_TASKS` tasks); the slices after
    the first are each measured in a child forked from this process (:func:`harness.core.forking.map_forked`),
    which reads the same records and arrays without a copy. A task's measures depend only on the records, the
    arrays and the contracts, so the measures, and their order, are those of one slice. A campaign that is
    running measures its tasks as they finish instead (:class:`Measurer`), to the same measures."""
    tasks = dict(tasks) if tasks is not None else read_tasks(os.path.join(directory, "tasks.jsonl"))
    cases = dict(cases) if cases is not None else campaign_cases(directory)
    by = {key_of(r): r for r in tasks.values()}
    arrays = _Arrays(directory, held=held)
    order = _order(tasks)
    if not parts:
        from harness.execute.settings import default_jobs

        parts = default_jobs() if len(order) >= SPLIT_TASKS else 1
    parts = max(1, min(parts, len(order)))

    def measure_slice(recs: Sequence[TaskRecord]) -> list[tuple[list[Measure], str]]:
        return [_with_lines(_measure_one(rec, by, cases, contracts, arrays), write) for rec in recs]

    # every parts-th task to each slice: tasks of one case (alike in cost) spread over the slices evenly
    done = map_forked(measure_slice, [order[k::parts] for k in range(parts)])
    measured = {key_of(rec): done[i % parts][i // parts] for i, rec in enumerate(order)}
    return _gathered(directory, contracts, tasks, cases, measured, write)


def _order(tasks: Mapping[str, TaskRecord]) -> list[TaskRecord]:
    """The order the measures are written in: by case, subject, context, device."""
    return sorted(tasks.values(), key=lambda r: (r.case_id, r.subject, r.context, r.device))


def _with_lines(measures: list[Measure], write: bool) -> tuple[list[Measure], str]:
    return measures, "".join(jsonl_line(m) for m in measures) if write else ""


def _gathered(directory: str, contracts: Contracts, tasks: Mapping[str, TaskRecord], cases: Mapping[str, Case],
              measured: Mapping[Key, tuple[list[Measure], str]], write: bool) -> list[Measure]:
    """Every task's measures (``measured``, by task) in the file's order, then what no measure judged
    (:func:`_not_judged`); written to ``measures.jsonl`` with ``write``."""
    out: list[Measure] = []
    text: list[str] = []
    for rec in _order(tasks):
        ms, lines = measured[key_of(rec)]
        out += ms
        text.append(lines)
    extra = _not_judged(tasks.values(), cases, contracts, out, relations_run=_relations_run(directory))
    out += extra
    if write:
        path = os.path.join(directory, MEASURES_FILE)
        remove_packed(path)  # measured again (a resumed campaign): the plain file is the current one
        atomic_write(path, "".join(text) + "".join(jsonl_line(m) for m in extra))
    return out


class Measurer:
    """Measures a campaign's tasks while it runs: each one once it and every task it is compared with
    (:func:`compared_with`) that the plan holds have finished, in the caller's thread, beside the next runs.
    :meth:`finish` measures what is left (a task whose reference never finished), then gathers and writes the
    measures as :func:`measure_campaign` would over the same records: a task is measured against the same
    records and arrays, so its measures are the same, in the same order. An error in a measure is raised by
    :meth:`finish`, once the runs are written."""

    def __init__(self, directory: str, contracts: Contracts, cases: Mapping[str, Case], planned: Sequence[Key],
                 held: Mapping[str, Mapping[str, np.ndarray]] | None = None, write: bool = True) -> None:
        self.directory, self.contracts, self.cases, self.write = directory, contracts, cases, write
        self.planned = set(planned)
        self.arrays = _Arrays(directory, held=held)
        self.by: dict[Key, TaskRecord] = {}
        self.measured: dict[Key, tuple[list[Measure], str]] = {}
        #: task -> the tasks it waits for; task -> the tasks waiting for it
        self.waiting: dict[Key, set[Key]] = {}
        self.waited_by: dict[Key, list[Key]] = {}
        self.error: Exception | None = None

    def add(self, rec: TaskRecord) -> None:
        """A finished task's record: measure it now if nothing it is compared with is still to run, and every
        task that waited only for it."""
        k = key_of(rec)
        self.by[k] = rec
        others = compared_with(rec, self.cases.get(rec.case_id),
                               self.contracts.find(rec.subject, rec.device_kind, rec.context))
        wait = {d for d in _dependencies(others) if d in self.planned and d not in self.by}
        if wait:
            self.waiting[k] = wait
            for d in wait:
                self.waited_by.setdefault(d, []).append(k)
        else:
            self._measure(k)
        for w in self.waited_by.pop(k, []):
            left = self.waiting.get(w)
            if left is not None:
                left.discard(k)
                if not left:
                    del self.waiting[w]
                    self._measure(w)

    def _measure(self, k: Key) -> None:
        if self.error is not None:
            return
        try:
            self.measured[k] = _with_lines(_measure_one(self.by[k], self.by, self.cases, self.contracts,
                                                        self.arrays), self.write)
        except Exception as exc:  # noqa: BLE001 - raised by finish(), after the runs
            self.error = exc

    def finish(self, tasks: Mapping[str, TaskRecord]) -> list[Measure]:
        """Every finished task's measures (``tasks``: the campaign's records, old and new), measuring those not
        measured yet against every record; written to ``measures.jsonl``."""
        for rec in tasks.values():
            self.by.setdefault(key_of(rec), rec)
        for rec in tasks.values():
            if key_of(rec) not in self.measured:
                self._measure(key_of(rec))
        if self.error is not None:
            raise self.error
        return _gathered(self.directory, self.contracts, tasks, self.cases, self.measured, self.write)


def compared_with(rec: TaskRecord, case: Case | None, contract: Any) -> dict[str, Any]:
    """The other tasks a task's measures read (their records and arrays): ``references`` ``[(kind, device,
    context, key)]`` (:func:`~harness.judge.measure.references_for`), ``oracle`` ``(name, key)``, ``order``
    ``(reference name, key, declaration)`` and the relation's ``base`` key, each None where there is none.
    :func:`_measure_one` measures against them, and :class:`Measurer` waits for them."""
    _, oracle_name = _role_and_oracle(rec.subject)
    declared = order_reference(rec.subject, rec.device_kind)
    rel = None if case is None else relation_of(case)
    return {
        "references": [(kind, dev, ctx, (rec.case_id, rec.subject, dev, ctx))
                       for kind, dev, ctx in references_for(rec, contract)],
        "oracle": None if oracle_name is None else (oracle_name, (rec.case_id, oracle_name, "cpu", "default")),
        "order": None if declared is None else (declared[0], (rec.case_id, declared[0], "cpu", "default"),
                                                declared[1]),
        "base": None if rel is None else (rel["base"], rec.subject, rec.device, rec.context),
    }


def _dependencies(others: Mapping[str, Any]) -> list[Key]:
    out = [k for *_, k in others["references"]]
    out += [others[name][1] for name in ("oracle", "order") if others[name] is not None]
    return out + ([others["base"]] if others["base"] is not None else [])


def _measure_one(rec: TaskRecord, by: Mapping[Key, TaskRecord], cases: Mapping[str, Case],
                 contracts: Contracts, arrays: _Arrays) -> list[Measure]:
    """Every measure of one task (for a relation's member, those against its base case too)."""
    role, _ = _role_and_oracle(rec.subject)
    case = cases.get(rec.case_id)
    contract = contracts.find(rec.subject, rec.device_kind, rec.context)
    tags = case.tags if case else ()
    rules = contracts.bad_rules(rec.subject, rec.device_kind, tags, rec.context)
    mine = arrays.get(rec)
    others = compared_with(rec, case, contract)
    refs = []
    for kind, dev, ctx, k in others["references"]:
        other = by.get(k)
        if other is not None and other.status != "skipped":
            # The record and its rules travel too: an ``any`` rule compares outcomes, errors included.
            refs.append(Reference(kind, ctx if kind == "context" else dev,
                                  arrays.get(other) if other.ok_runs else None, record=other,
                                  rules=contracts.bad_rules(rec.subject, other.device_kind, tags, ctx)))
    oracle = None
    if others["oracle"] is not None:
        oracle_name, k = others["oracle"]
        orec = by.get(k)
        oarr = arrays.get(orec) if orec is not None and orec.status == "ok" else None
        if oarr is not None:
            oracle = (oracle_name, oarr)
    order = None
    if others["order"] is not None:
        name, k, declaration = others["order"]
        orec = by.get(k)
        if orec is not None:  # planned (like the oracle): no values is "not judged"
            order = (name, arrays.get(orec) if orec.status == "ok" else None, declaration)
    out = measure_task(rec, case, contract, role=role, bad_rules=rules, arrays=mine, references=refs,
                       oracle=oracle, order=order,
                       known_defects=contracts.known_defects_for(rec.subject, rec.device_kind, tags, rec.context))
    rel = None if case is None else relation_of(case)
    if rel is not None and case is not None and rec.ok_runs and role != "oracle":
        base = by.get(others["base"])
        out += relation_measures(rec, case, rel, contract, arrays.get(base) if base is not None and
                                 base.ok_runs else None, mine)
    return out


def _relations_run(directory: str) -> list[str] | None:
    """The relations a campaign ran (its ``campaign.json``), None where it does not say."""
    try:
        with open(os.path.join(directory, "campaign.json"), encoding="utf-8") as f:
            named = json.load(f).get("relations")
    except (OSError, ValueError, AttributeError):
        return None
    return [str(r) for r in named] if isinstance(named, list) else None


def _cause(m: Measure, records: Sequence[TaskRecord], relations_run: Sequence[str] | None) -> Measure:
    """A ``not judged`` measure of :func:`~harness.judge.coverage.missing_measures` in the words of its cause where
    the campaign knows it: a relation the campaign left out (``not run: --relations none``), an oracle it did not
    run (``not run: --subjects ...``) or that was skipped or failed on the case (its own reason)."""
    if m.kind == "relation" and relations_run is not None and m.relation not in relations_run:
        given = ",".join(relations_run) if relations_run else "none"
        return dataclasses.replace(m, detail=f"not run: --relations {given} leaves out {m.relation!r} (the "
                                             f"contract claims invariance under it)")
    if m.kind == "oracle" and m.other:
        theirs = [r for r in records if r.subject == m.other]
        if not theirs:
            return dataclasses.replace(m, detail=f"not run: the campaign's subjects (--subjects) leave out "
                                                 f"{m.other}, the oracle the contract judges the error against")
        mine = [r for r in theirs if r.case_id == m.case_id]
        if mine and mine[0].status == "skipped":
            return dataclasses.replace(m, detail=f"not run: {m.other} was skipped on this case: "
                                                 f"{mine[0].skip_reason}; {m.detail}")
        if mine and mine[0].status != "ok":
            err = mine[0].first_error or {}
            return dataclasses.replace(m, detail=f"{m.other} failed on this case ({mine[0].run_status}: "
                                                 f"{err.get('type')}: {str(err.get('message'))[:120]}); {m.detail}")
    return m


def _not_judged(records: Any, cases: Mapping[str, Case], contracts: Contracts, measures: list[Measure],
                relations_run: Sequence[str] | None = None) -> list[Measure]:
    """What each task's contract asked for and did not get (:func:`harness.judge.coverage.missing_measures`):
    the oracle that gave no values, the claimed relation that compared nothing; each said in the words of its
    cause where the campaign knows it (:func:`_cause`; ``relations_run``: the relations the campaign ran)."""
    records = list(records)
    from harness.execute.relations import RELATIONS, members
    from harness.judge.coverage import missing_measures
    from harness.subjects.registry import SUBJECTS

    taken: dict[tuple[str, str, str, str], list[Measure]] = {}
    for m in measures:
        taken.setdefault((m.case_id, m.subject, m.device, m.context), []).append(m)
    related: dict[str, set[str]] = {}  # base case id -> relations with a member in the corpus
    for c in cases.values():
        rel = relation_of(c)
        if rel is not None:
            related.setdefault(rel["base"], set()).add(rel["name"])
    out: list[Measure] = []
    made: dict[tuple[str, str], bool] = {}

    def makes_members(case: Case, r: str) -> bool:
        # every subject of a case asks: the case's members are built once per relation
        if (case.id, r) not in made:
            made[(case.id, r)] = bool(members(case, [RELATIONS[r]]))
        return made[(case.id, r)]

    for rec in records:
        role, oracle_name = _role_and_oracle(rec.subject)
        case = cases.get(rec.case_id)
        contract = contracts.find(rec.subject, rec.device_kind, rec.context)
        if case is None or contract is None or role != "subject":
            continue
        bad = bool(rec.bad_input) or bool(contracts.bad_rules(rec.subject, rec.device_kind, case.tags, rec.context))
        oracle = SUBJECTS.get(oracle_name) if oracle_name else None
        takes = oracle is not None and not bad and _takes(oracle, case)
        possible: set[str] = set()
        if rec.context == "default" and relation_of(case) is None and not bad:
            for r in getattr(contract, "invariant_under", ()) or ():
                if r in related.get(case.id, set()) or (r in RELATIONS and makes_members(case, r)):
                    possible.add(r)
        out += missing_measures(rec, contract, taken.get((rec.case_id, rec.subject, rec.device, rec.context), []),
                                role=role, bad=bad, oracle=oracle_name, oracle_takes_case=takes,
                                relations_possible=possible)
    return [_cause(m, records, relations_run) for m in out]


def _takes(subject: Any, case: Case) -> bool:
    try:
        return bool(subject.applies_to(case))
    except Exception:  # noqa: BLE001 - an oracle that cannot say: it is not asked to judge
        return False


def relation_measures(rec: TaskRecord, case: Case, rel: Mapping[str, Any], contract: Any,
                      base: Mapping[str, np.ndarray] | None, member: Mapping[str, np.ndarray] | None) -> list[Measure]:
    """The invariance measures of one member task against its base task (same subject, device, context):
    one per tensor pair the relation names, judged bitwise (``kind="relation"``), under ``invariant_under``.
    Where the base task produced nothing, one task-level measure says so."""
    from harness.judge.verdicts import SKIPPED, judge_pair

    key = {"case_id": rel["base"], "subject": rec.subject, "device": rec.device, "context": rec.context}
    label = f"{rel['name']}:{rel['label']}"
    if base is None or member is None:
        return [Measure(kind="relation", relation=rel["name"], other=label, verdict=SKIPPED, tensor="",
                        rule=f"invariant_under {rel['name']}", detail="the base case or the member has no arrays",
                        **key)]
    return [judge_pair("relation", contract, key, name, b, m, label, relation=rel["name"])
            for name, b, m in pairs(case.family, rel["name"], rel["index"], base, member)]


def load_measures(directory: str) -> list[Measure]:
    """The measures of a campaign directory (empty where the measure pass has not run)."""
    return read_measures(os.path.join(directory, MEASURES_FILE))
