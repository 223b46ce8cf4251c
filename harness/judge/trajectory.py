"""Trajectories: two training runs of a model subject compared step by step, and the one line that judges them.

A model run (:mod:`harness.subjects.model_calls`) records, per step ``k``, ``step.{k}.loss``,
``step.{k}.grad_norm`` and ``step.{k}.digest`` (a hash of every parameter after the step's update), and at
log-spaced steps the parameters themselves (``step.{k}.param.{name}``). :func:`read_run` gathers them into a
:class:`Run`; :func:`compare_runs` says, per step, whether the two runs are bit-identical (loss, gradient norm
and parameter digest all equal) and, once they are not, how far apart they are: the loss difference at every
step, and at the steps both runs hold parameters, the largest ULP distance of any parameter element and the
relative L2 distance of all parameters together. :func:`verdict` puts a pair and its instability baseline (the
same steps from a start one ULP away in one weight) into one line. Pure NumPy: nothing here runs a subject.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from harness.core.records import Measure, Verdict
from harness.judge.ulp import ulp_distance

__all__ = ["Run", "StepDistance", "Divergence", "read_run", "compare_runs", "verdict", "table_rows", "scale_words",
           "TABLE_COLUMNS", "TRAJECTORY_RULE", "judge_trajectory", "told_once"]

_STEP = re.compile(r"^step\.(\d+)\.(loss|grad_norm|digest|param\.(.+))$")


@dataclass(frozen=True)
class Run:
    """One training run's record: per step the loss, the gradient norm and the parameter digest; the full
    parameters (name -> array) at the steps that kept them."""

    loss: tuple[float, ...]
    grad_norm: tuple[float, ...]
    digests: tuple[bytes, ...]
    params: Mapping[int, Mapping[str, np.ndarray]] = field(default_factory=dict)
    #: the raw bits of each step's loss and gradient norm (bit-identity is judged on bits, not on floats)
    loss_bits: tuple[bytes, ...] = ()
    norm_bits: tuple[bytes, ...] = ()

    @property
    def steps(self) -> int:
        return len(self.loss)


def read_run(arrays: Mapping[str, np.ndarray]) -> Run:
    """A :class:`Run` from a model run's recorded arrays. Steps must run 0..K-1 without a gap (a run that stopped
    early is a shorter run); a missing step's record raises ``ValueError``."""
    found: dict[int, dict[str, Any]] = {}
    for name, a in arrays.items():
        m = _STEP.match(name)
        if m is None:
            continue
        k, what = int(m.group(1)), m.group(2)
        slot = found.setdefault(k, {"params": {}})
        if m.group(3) is not None:
            slot["params"][m.group(3)] = np.asarray(a)
        else:
            slot[what] = np.asarray(a)
    steps = len(found)
    if sorted(found) != list(range(steps)):
        raise ValueError(f"the run's steps are not 0..{steps - 1}: {sorted(found)[:8]}")
    for k in range(steps):
        missing = [w for w in ("loss", "grad_norm", "digest") if w not in found[k]]
        if missing:
            raise ValueError(f"step {k} records no {', '.join(missing)}")
    at = [found[k] for k in range(steps)]
    return Run(loss=tuple(float(s["loss"].reshape(-1)[0]) for s in at),
               grad_norm=tuple(float(s["grad_norm"].reshape(-1)[0]) for s in at),
               digests=tuple(np.ascontiguousarray(s["digest"]).tobytes() for s in at),
               params={k: s["params"] for k, s in enumerate(at) if s["params"]},
               loss_bits=tuple(np.ascontiguousarray(s["loss"]).tobytes() for s in at),
               norm_bits=tuple(np.ascontiguousarray(s["grad_norm"]).tobytes() for s in at))


@dataclass(frozen=True)
class StepDistance:
    """How far apart two runs are after one step. ``max_ulp`` and ``rel_l2`` are None at a step where the runs
    kept no parameters (only the digests say whether they are equal there)."""

    step: int
    identical: bool
    loss_a: float
    loss_b: float
    #: which of the step's records differ: "loss", "grad_norm", "params" (empty where identical)
    differs: tuple[str, ...] = ()
    max_ulp: int | None = None
    rel_l2: float | None = None
    #: the parameter (and flat index) with the largest ULP distance
    worst: str | None = None

    @property
    def loss_diff(self) -> float:
        """``|loss_a - loss_b|`` (NaN where either is NaN and they are not both NaN; 0 where both are)."""
        if math.isnan(self.loss_a) and math.isnan(self.loss_b):
            return 0.0
        return abs(self.loss_a - self.loss_b)


@dataclass(frozen=True)
class Divergence:
    """Two runs compared over their common steps."""

    steps: int
    distances: tuple[StepDistance, ...]

    @property
    def identical(self) -> bool:
        return all(d.identical for d in self.distances)

    @property
    def first_differing(self) -> StepDistance | None:
        return next((d for d in self.distances if not d.identical), None)

    @property
    def last(self) -> StepDistance | None:
        return self.distances[-1] if self.distances else None

    @property
    def last_measured(self) -> StepDistance | None:
        """The last step whose parameters both runs kept (where the relative distance is known)."""
        return next((d for d in reversed(self.distances) if d.rel_l2 is not None), None)


def _param_distance(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> tuple[int, float, str | None]:
    """(largest ULP distance, ||a - b|| / ||a|| over every parameter together, where the largest is)."""
    if set(a) != set(b):
        raise ValueError(f"the runs keep different parameters: {sorted(set(a) ^ set(b))[:4]}")
    worst, where = 0, None
    num = den = 0.0
    for name in sorted(a):
        x, y = np.asarray(a[name]), np.asarray(b[name])
        if x.shape != y.shape or x.dtype != y.dtype:
            raise ValueError(f"parameter {name}: {x.dtype}{list(x.shape)} against {y.dtype}{list(y.shape)}")
        if x.size:
            u = ulp_distance(x, y).reshape(-1)
            i = int(np.argmax(u))
            if int(u[i]) > worst:
                worst, where = int(u[i]), f"{name}[{i}]"
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        num += float(np.sum((x64 - y64) ** 2))
        den += float(np.sum(x64 ** 2))
    rel = math.sqrt(num) / math.sqrt(den) if den > 0 else (0.0 if num == 0 else math.inf)
    return worst, rel, where


def compare_runs(a: Run, b: Run) -> Divergence:
    """Step by step over the steps both runs hold (see the module)."""
    out = []
    for k in range(min(a.steps, b.steps)):
        differs = tuple(w for w, x, y in (("loss", a.loss_bits, b.loss_bits), ("grad_norm", a.norm_bits, b.norm_bits),
                                          ("params", a.digests, b.digests)) if x[k] != y[k])
        max_ulp = rel = where = None
        if k in a.params and k in b.params:
            max_ulp, rel, where = _param_distance(a.params[k], b.params[k])
        out.append(StepDistance(k, not differs, a.loss[k], b.loss[k], differs, max_ulp, rel, where))
    return Divergence(min(a.steps, b.steps), tuple(out))


def _first_text(d: StepDistance) -> str:
    """What differs first at a step: the forward (its loss), the backward (the gradient norm) or the update."""
    if "loss" in d.differs:
        return "the loss: the forward differs"
    if "grad_norm" in d.differs:
        return "the gradient norm: the forward agrees, the backward differs"
    return "the parameters after the update: the loss and gradient norm agree"


def scale_words(pair: float, baseline: float) -> str:
    """How a pair's final relative distance compares with the one-ULP baseline's, in words."""
    if baseline <= 0 or not math.isfinite(baseline):
        return "the one-ULP baseline did not move" if baseline == 0 else "the one-ULP baseline is not finite"
    r = pair / baseline
    if r >= 10:
        return f"{r:.0f}x the training's own instability"
    if r >= 0.1:
        return "as large as the training's own instability"
    return f"{1 / r:.0f}x smaller than the training's own instability" if r > 0 else "the parameters end the same bits"


def verdict(pair: Divergence, baseline: Divergence | None, what: str, node: str = "") -> str:
    """The one line: "bit-identical over K steps (what)", or where the pair first differs (at that step, the
    first function ``node`` whose outputs differ, where one was localized) and how far apart it ends, beside the
    one-ULP baseline's distances (None: no baseline was run)."""
    first = pair.first_differing
    if first is None:
        return f"bit-identical over {pair.steps} steps ({what})"
    end = pair.last_measured
    last = pair.last
    at = f"{node}; " if node else ""
    head = f"{what}: first differs at step {first.step} ({at}{_first_text(first)})"
    if end is None or last is None:
        return head
    line = (f"{head}; after {last.step + 1} steps the parameters differ by {end.rel_l2:.2g} relative "
            f"(max {end.max_ulp} ULP), the loss by {last.loss_diff:.2g}")
    if baseline is None:
        return line + "; no one-ULP baseline"
    b_end, b_last = baseline.last_measured, baseline.last
    if b_end is None or b_last is None or b_end.rel_l2 is None or end.rel_l2 is None:
        return line + "; the one-ULP baseline measured nothing"
    return (f"{line}; one ULP in one weight gives {b_end.rel_l2:.2g} and {b_last.loss_diff:.2g}: "
            f"{scale_words(end.rel_l2, b_end.rel_l2)}")


#: The trajectory table's columns (one row per step and comparison).
TABLE_COLUMNS = ("comparison", "step", "identical", "differs", "loss_a", "loss_b", "loss_diff", "max_ulp", "rel_l2",
                 "worst")


def table_rows(named: Sequence[tuple[str, Divergence]]) -> list[dict[str, Any]]:
    """One row per step of each named comparison, in :data:`TABLE_COLUMNS` order."""
    rows = []
    for label, div in named:
        for d in div.distances:
            rows.append({"comparison": label, "step": d.step, "identical": d.identical, "differs": "+".join(d.differs),
                         "loss_a": repr(d.loss_a), "loss_b": repr(d.loss_b), "loss_diff": repr(d.loss_diff),
                         "max_ulp": "" if d.max_ulp is None else d.max_ulp,
                         "rel_l2": "" if d.rel_l2 is None else repr(d.rel_l2), "worst": d.worst or ""})
    return rows


#: The rule a trajectory between two contexts is judged by: the contract's ``identical_across`` decides.
TRAJECTORY_RULE = "identical_across: the trajectory bit-identical to context {other} at every step"


def judge_trajectory(contract: Any, key: Mapping[str, str], contexts: tuple[str, str], pair: Divergence | None, *,
                     line: str = "", node: str = "", reason: str = "") -> Measure:
    """The measure (kind ``trajectory``) of two contexts' runs (A, B) of one model case x subject x device, on
    B's side against A as a context pair is judged (``contract``: B's line): bit-identical
    at every step, else "diverged as allowed" or "broken" as the contract's ``identical_across`` says
    (:func:`harness.judge.verdicts.pair_required`, the rule of every context pair); ``pair`` None (it could not
    be compared: ``reason`` says why) is "not judged" where the contract requires the pair, else "skipped".
    The verdict ``line`` goes in ``detail``, the localized ``node`` in ``actual``, the steps that differ in
    ``n_diff`` of ``n_total``, the last measured step's distances in ``max_ulp`` and ``max_rel``."""
    from harness.judge.verdicts import cite, pair_required

    required = pair_required("context", contract, contexts[0])
    common: dict[str, Any] = dict(kind="trajectory", case_id=key["case_id"], subject=key["subject"],
                                  device=key["device"], context=contexts[1], other=contexts[0], tensor="",
                                  rule=TRAJECTORY_RULE.format(other=contexts[0]), contract=cite(contract))
    if pair is None:
        v = Verdict.NOT_JUDGED if required else Verdict.SKIPPED
        return Measure(**common, verdict=v.value, detail=reason or "the two runs could not be compared")
    if pair.identical:
        v = Verdict.BIT_IDENTICAL
    else:
        v = Verdict.BROKEN if required else Verdict.ALLOWED
    end = pair.last_measured
    return Measure(**common, identical=pair.identical, verdict=v.value, n_total=pair.steps,
                   n_diff=sum(not d.identical for d in pair.distances),
                   max_ulp=None if end is None else end.max_ulp, max_rel=None if end is None else end.rel_l2,
                   actual=node, detail=line)


def told_once(measures: Sequence[Measure]) -> list[Measure]:
    """``measures`` less the tensor-by-tensor context measures of a pair a trajectory measure judges (the same
    case, subject, device and contexts): a model case's difference between two contexts is one finding, its
    trajectory's, which says where the training first parted and whether it matters."""
    told = {(m.case_id, m.subject, m.device, m.context, m.other) for m in measures if m.kind == "trajectory"}
    if not told:
        return list(measures)
    return [m for m in measures if m.kind != "context" or (m.case_id, m.subject, m.device, m.context, m.other)
            not in told]
