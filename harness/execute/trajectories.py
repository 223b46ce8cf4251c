"""Trajectories in a campaign: a model case's runs in two contexts compared step by step, with the one-ULP
baseline and the first differing function node beside them; and the pieces ``harness trajectory`` shares.

A model subject's run (:mod:`harness.subjects.model_calls`) records every step of its training as tensors, so
the campaign already judges a model case's trajectory run to run and across fresh processes tensor by tensor
(its step tensors, its contract's ``reproducible``). What a tensor-by-tensor verdict cannot say is where the
training first parted and whether that matters: :func:`campaign_trajectories` reads the repetition-0 arrays the
campaign kept for each model case x subject x device in the :data:`~harness.core.model_cases.
TRAJECTORY_CONTEXTS` pair (``default`` against ``blas1``), compares them (:func:`harness.judge.trajectory.
compare_runs`), and where they differ runs the same steps from a start one ULP away in one weight (the
training's own instability, in a worker) and localizes the first function node whose outputs differ at the first
differing step (in a child process). :func:`trajectory_measures` turns each into one measure of kind
``trajectory`` (judged by the contract's ``identical_across``), which the findings, the gate and the report take
like any other; a pair that could not be compared says why.
"""

from __future__ import annotations

import pathlib
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from harness.core.cases import Case
from harness.core.errors import SetupError
from harness.core.model_cases import TRAJECTORY_CONTEXTS
from harness.core.records import Measure, TaskRecord
from harness.core.vocabulary import MODEL_FAMILIES
from harness.judge.trajectory import Divergence, compare_runs, read_run, verdict

__all__ = ["DEFAULT_PERTURB", "with_spec", "baseline_case", "first_node", "CampaignTrajectory",
           "campaign_trajectories", "trajectory_measures", "with_trajectory_causes"]

#: The instability baseline's start where the case names none: one ULP up in the first weight matrix's element 0.
DEFAULT_PERTURB = {"index": 0}


def with_spec(case: Case, *, drop: tuple[str, ...] = (), **spec: Any) -> Case:
    """``case`` with the spec keys ``spec`` set (None: left as they are) and ``drop`` removed."""
    new = {k: v for k, v in case.to_dict()["spec"].items() if k not in drop}
    new.update({k: v for k, v in spec.items() if v is not None})
    return Case(case.family, case.seed, new, tags=case.tags)


def baseline_case(case: Case, perturb: Mapping[str, Any] | None = None) -> Case:
    """The instability baseline's case: the same steps from a start one ULP away in one weight (``perturb``,
    else the case's own ``perturb``, else :data:`DEFAULT_PERTURB`)."""
    return with_spec(case, perturb=dict(perturb or case.spec.get("perturb") or DEFAULT_PERTURB))


def first_node(case: Case, subject: str, *, contexts: tuple[str, ...] = (), device: str = "cpu",
               plugins: tuple[str, ...] = (), timeout: float = 600.0) -> str:
    """The first function node whose outputs differ while its inputs matched, in two runs of ``case`` (cut
    after the trajectory's first differing step: the steps before it are the same bits): in ``contexts`` (A, B),
    else run to run; localized in a child process (:func:`harness.execute.localization.localize_in_child`).
    "" where none is named (the difference arose outside a function node: the optimizer's update, or inputs
    that already differed) or the localization could not run."""
    from harness.execute.localization import localize_in_child
    from harness.judge.reproducer import Reproducer

    with tempfile.TemporaryDirectory(prefix="harness-trajectory-") as tmp:
        path = pathlib.Path(tmp) / f"{case.id}.json"
        path.write_text(case.to_json())
        r = Reproducer(str(path), subject, devices=(device,), plugins=plugins,
                       **({"contexts": contexts} if contexts else {"repeats": 2}))
        try:
            loc = localize_in_child(r, timeout)
        except SetupError:
            return ""
    return "" if loc.root is None else loc.root.short()


@dataclass(frozen=True)
class CampaignTrajectory:
    """One model case x subject x device, its runs in two contexts compared step by step."""

    case_id: str
    subject: str
    device: str
    contexts: tuple[str, str]
    #: None: the pair could not be compared (``reason`` says why)
    pair: Divergence | None
    baseline: Divergence | None = None
    node: str = ""
    line: str = ""
    reason: str = ""

    @property
    def label(self) -> str:
        return " vs ".join(self.contexts)


def _model_records(records: Mapping[str, TaskRecord], cases: Mapping[str, Case]) -> dict[tuple[str, str, str],
                                                                                           dict[str, TaskRecord]]:
    """(case id, subject, device) -> context -> record, for the model cases' tasks."""
    out: dict[tuple[str, str, str], dict[str, TaskRecord]] = {}
    for rec in records.values():
        case = cases.get(rec.case_id)
        if case is not None and case.family in MODEL_FAMILIES:
            out.setdefault((rec.case_id, rec.subject, rec.device), {})[rec.context] = rec
    return out


def _why_not(rec: TaskRecord | None, context: str) -> str:
    """Why a context's side of a pair has no run to compare ("" where it has)."""
    if rec is None:
        return f"context {context} did not run this case"
    if rec.status == "skipped":
        return f"context {context} skipped: {rec.skip_reason or 'no reason recorded'}"
    if not rec.ok_runs or not rec.array_file:
        err = "; ".join(f"{e.get('type')} in {e.get('phase')}: {e.get('message')}" for e in rec.errors[:1])
        return f"context {context} did not finish a run ({err or rec.status})"
    return ""


def campaign_trajectories(directory: str, records: Mapping[str, TaskRecord], cases: Mapping[str, Case], *,
                          plugins: tuple[str, ...] = (), timeout: float | None = None,
                          baseline: bool = True, localize: bool = True, budget: float = 120.0,
                          pair: tuple[str, str] = TRAJECTORY_CONTEXTS) -> list[CampaignTrajectory]:
    """Per model case x subject x device that ran in both contexts of ``pair``: the two runs compared from the
    arrays the campaign kept; where they differ (and ``baseline``/``localize``), the one-ULP baseline run in a
    worker and the first differing node localized in a child, while ``budget`` seconds last (past it the line
    says no baseline was run). A device the pair's second context does not apply to (a GPU: ``blas1``) has no
    pair. Nothing here is judged: :func:`trajectory_measures` does."""
    from harness.core.contexts import get_context
    from harness.core.devices import parse_device
    from harness.execute.campaign import load_arrays
    from harness.execute.isolated import Runner

    a_ctx, b_ctx = pair
    out: list[CampaignTrajectory] = []
    t0 = time.perf_counter()
    with Runner(plugins=plugins, timeout=timeout) as runner:
        for (case_id, subject, device), by_ctx in sorted(_model_records(records, cases).items()):
            if not get_context(b_ctx).applies_to(device.split(":", 1)[0]) or a_ctx not in by_ctx:
                continue
            common = dict(case_id=case_id, subject=subject, device=device, contexts=(a_ctx, b_ctx))
            why = _why_not(by_ctx.get(a_ctx), a_ctx) or _why_not(by_ctx.get(b_ctx), b_ctx)
            if why:
                out.append(CampaignTrajectory(pair=None, reason=why, **common))  # type: ignore[arg-type]
                continue
            try:
                a = read_run(load_arrays(directory, by_ctx[a_ctx].array_file))
                b = read_run(load_arrays(directory, by_ctx[b_ctx].array_file))
            except (OSError, ValueError) as exc:
                out.append(CampaignTrajectory(pair=None, reason=f"the runs' arrays could not be read: {exc}",
                                              **common))  # type: ignore[arg-type]
                continue
            div = compare_runs(a, b)
            what = f"{subject}, context {a_ctx} against {b_ctx}"
            base, node = None, ""
            first = div.first_differing
            if first is not None and time.perf_counter() - t0 < budget:
                case = cases[case_id]
                if baseline:
                    o = runner.run(baseline_case(case), subject, parse_device(device), a_ctx)
                    if o.record.status == "ok" and o.arrays:
                        base = compare_runs(a, read_run(o.arrays))
                if localize:
                    node = first_node(with_spec(case, steps=first.step + 1, drop=("perturb",)), subject,
                                      contexts=(a_ctx, b_ctx), device=device, plugins=plugins,
                                      timeout=max(budget - (time.perf_counter() - t0), 30.0))
            out.append(CampaignTrajectory(pair=div, baseline=base, node=node, line=verdict(div, base, what, node),
                                          **common))  # type: ignore[arg-type]
    return out


def trajectory_measures(found: Iterable[CampaignTrajectory], contracts: Any) -> list[Measure]:
    """One measure of kind ``trajectory`` per pair (:func:`harness.judge.trajectory.judge_trajectory`)."""
    from harness.judge.trajectory import judge_trajectory

    return [judge_trajectory(contracts.find(t.subject, t.device.split(":", 1)[0], t.contexts[1]),
                             {"case_id": t.case_id, "subject": t.subject, "device": t.device}, t.contexts, t.pair,
                             line=t.line, node=t.node, reason=t.reason) for t in found]


def with_trajectory_causes(found: Sequence[Any]) -> list[Any]:
    """``found`` (findings) with each trajectory finding's cause taken from its worst measure: the node the
    trajectory localized at its first differing step (so the report does not localize it once more)."""
    from harness.judge.findings import with_cause

    out = []
    for f in found:
        m = f.worst
        if f.kind == "trajectory divergence" and m.actual and not f.cause:
            f = with_cause(f, f"{m.actual}: at the trajectory's first differing step, outputs differ while its "
                              f"inputs matched between contexts {m.other} and {m.context} on {m.device}")
        out.append(f)
    return out
