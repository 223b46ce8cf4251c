"""The plan: which tasks (case x subject x device x context) a campaign runs, their keys, shards and groups.

A :class:`Task` is one case run by one subject on one device in one context; :func:`plan` lists every
applicable one in a stable, context-major order; :func:`task_key` names a task in files and for resume;
:func:`shard` splits the cases between machines; :func:`group_key` says which tasks can share worker
processes (the same start-up environment).

Apart from the processes that run the tasks (:mod:`harness.execute.lanes`) and the files that record them
(:mod:`harness.execute.campaign`): deciding what to run needs neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from harness.core.cases import Case
from harness.core.contexts import Context, get_context
from harness.core.devices import Device
from harness.core.model_cases import TRAJECTORY_CONTEXTS
from harness.core.vocabulary import MODEL_FAMILIES
from harness.subjects.base import Subject
from harness.subjects.registry import prepare_accepts

__all__ = ["Task", "task_key", "shard", "plan", "group_key"]


@dataclass(frozen=True)
class Task:
    """One case x subject x device x context."""

    case: Case
    subject: str
    device: str
    context: str

    @property
    def key(self) -> str:
        return task_key(self.case.id, self.subject, self.device, self.context)


def task_key(case_id: str, subject: str, device: str, context: str) -> str:
    """The stable key of a task, used in file names and for resume."""
    return f"{case_id}|{subject}|{device}|{context}"


def shard(cases: Sequence[Case], i: int, n: int) -> list[Case]:
    """The cases of shard ``i`` of ``n``: decided by each case's id, so any machine splits alike."""
    return [c for c in cases if int(c.id, 16) % n == i - 1]


def plan(cases: Iterable[Case], subjects: Iterable[Subject], devices: Iterable[Device],
         contexts: Iterable[Context], oracle_contexts: tuple[str, ...] = ("default",),
         relation_contexts: tuple[str, ...] = ("default",), contracts: Any = None) -> list[Task]:
    """Every applicable task, in a stable order. Oracle subjects run only in ``oracle_contexts``
    (they are float64 NumPy and deterministic; once is enough to measure error against them),
    and only on the devices they support; other subjects get a task on every device asked for,
    so an unavailable GPU shows up as ``skipped`` rows, never as a silent absence. The members of
    invariance relations (:mod:`harness.execute.relations`) run in ``relation_contexts`` only: the
    relation compares them with their base case in the same context. Model cases (a training run each) run in
    the trajectory pair of contexts and those their contracts require identity to (:func:`_model_contexts`).
    With ``contracts``, what judges a subject
    (its oracle, its declared order's reference) is added wherever a contract line asks for it."""
    cases, devices, contexts = list(cases), list(devices), list(contexts)
    # What judges the others (the oracles, the references of a declared order) runs first in each context and
    # device: a task is measured as soon as the tasks it is compared with have finished
    # (:class:`~harness.execute.measure_pass.Measurer`), so the measures follow the runs instead of piling up.
    subjects = sorted(_with_judges(subjects, contracts, devices, contexts), key=lambda s: s.role != "oracle")
    prepare_accepts(subjects, cases)  # plug-in subjects: asked in child processes, once per plug-in
    tasks = []
    for ctx in contexts:
        for dev in devices:
            if not ctx.applies_to(dev.kind):
                continue
            for subj in subjects:
                is_oracle = subj.role == "oracle"
                if is_oracle and (ctx.name not in oracle_contexts or dev.kind not in subj.devices):
                    continue
                if dev.kind not in subj.devices:
                    continue
                model_ctx = _model_contexts(subj.name, dev.kind, contexts, contracts)
                for case in cases:
                    if case.spec.get("relation") is not None and ctx.name not in relation_contexts:
                        continue
                    if case.family in MODEL_FAMILIES and ctx.name not in model_ctx:
                        continue
                    if subj.applies_to(case):
                        tasks.append(Task(case, subj.name, dev.id, ctx.name))
    return tasks


def _model_contexts(subject: str, device_kind: str, contexts: Sequence[Context], contracts: Any) -> set[str]:
    """The contexts a model case runs in (a trajectory costs K steps of a model each): the trajectory pair
    (:data:`~harness.core.model_cases.TRAJECTORY_CONTEXTS`) and every context the subject's contract lines on
    the device require identity to."""
    out = set(TRAJECTORY_CONTEXTS)
    if contracts is not None:
        for ctx in contexts:
            line = contracts.find(subject, device_kind, ctx.name)
            if line is not None:
                out.update(line.identical_across)
    return out


def _with_judges(subjects: Iterable[Subject], contracts: Any, devices: Sequence[Device],
                 contexts: Sequence[Context]) -> list[Subject]:
    """The subjects asked for, plus what judges them where a contract line asks for it: the oracle of a subject
    whose line says ``oracle = "within"``, whatever ``--subjects`` names (a run without the oracle said "all
    contracts hold" having judged nothing), and the reference of a declared accumulation order."""
    from harness.subjects.registry import SUBJECTS, order_reference

    out = list(subjects)
    if contracts is None:
        return out
    names = {s.name for s in out}
    for s in list(out):
        if s.role != "subject":
            continue
        lines = [contracts.find(s.name, d.kind, c.name) for d in devices for c in contexts]
        judges = [s.oracle] if any(ln is not None and ln.oracle == "within" for ln in lines) else []
        judges += [ref[0] for d in devices if (ref := order_reference(s.name, d.kind))]
        for j in judges:
            if j and j not in names and j in SUBJECTS:
                out.append(SUBJECTS[j])
                names.add(j)
    return out


def group_key(task: Task) -> tuple[Any, ...]:
    """Tasks with the same key can share one :class:`~harness.execute.worker_sets.WorkerSet`: contexts that
    differ only in what is applied at run time (BLAS threads, Chainer config) share workers; environment
    variables or GPU contention do not."""
    c = get_context(task.context)
    return (c.env, c.contention)
