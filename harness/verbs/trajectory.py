"""``harness trajectory``: train a model case K steps twice, say where the runs first differ and whether it matters.

The two runs are, by the options: run to run in one worker process (the default), in two fresh worker
processes (``--fresh 1``), in two contexts (``--contexts A,B``) or two subjects (``--against S2``: the same case
trained by another model subject, e.g. a reference a change is judged against). Where they differ, a third run
gives the scale: the same steps from a start one ULP away in one weight (the case's ``perturb``, else the first
weight matrix's first element), the training's own instability. Every run is in worker processes
(:class:`harness.execute.isolated.Runner`), never here. Prints the verdict line (:func:`harness.judge.trajectory.
verdict`) and, with ``--out``, writes the table, the figure and the line there.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Any

from harness.core import argcheck
from harness.core.errors import InvalidArgument, SetupError
from harness.core.options import like, opt
from harness.verbs.cases import CasesOptions
from harness.verbs.common import check_worker_limits, load_plugins, reproducer_option
from harness.verbs.report import ReportOptions

__all__ = ["TrajectoryOptions", "trajectory", "Outcome", "run_trajectory"]


@dataclass(frozen=True)
class TrajectoryOptions:
    """``harness trajectory``: the case and subject, what the second run differs in, the steps, the output."""

    case: str = reproducer_option("case", "trajectory")
    subject: str = reproducer_option("--subject", "trajectory", default="")  # a model subject (required)
    case_id: str | None = reproducer_option("--case-id", "trajectory", default=None)
    plugins: tuple[str, ...] = reproducer_option("--subject-plugin", "trajectory", default=())
    contexts: tuple[str, ...] = reproducer_option("--contexts", "trajectory", default=(),
                                                  check=argcheck.names(argcheck.one_context))
    fresh: int = reproducer_option("--fresh", "trajectory", default=0)
    against: str | None = opt("--against", "trajectory: compare with the same case trained by this model subject "
                              "(instead of --contexts or --fresh)", default=None, metavar="SUBJECT")
    steps: int | None = opt("--steps", "trajectory: optimizer steps to train (default: the case's own steps)",
                            default=None, check=argcheck.count(1), metavar="K")  # None: the case's own
    out: str | None = like(CasesOptions, "out", default=None, check=argcheck.kept(argcheck.writable_dir))
    #: None: scaled with the case's estimated work (K steps)
    timeout: float | None = like(ReportOptions, "timeout", default=None)
    max_case_bytes: int | None = like(ReportOptions, "max_case_bytes", default=None)
    #: at the first differing step, localize the first function node whose outputs differ (in a child process)
    localize: bool = like(ReportOptions, "localize", default=True)
    #: where both runs train: ``cpu``, ``gpu`` or ``gpu:N`` (it must be usable here)
    device: str = reproducer_option("--device", "trajectory", default="cpu")

    def __post_init__(self) -> None:
        if not self.subject:
            raise InvalidArgument("trajectory needs --subject S (a model subject: python -m harness subjects)")


@dataclass
class Outcome:
    """What a trajectory found: the verdict line, the pair's and the baseline's divergences, and the labels."""

    line: str
    identical: bool
    pair: Any
    baseline: Any
    labels: tuple[str, str]
    #: the first function node whose outputs differ at the first differing step, or why none was named
    node: str = ""


def _check(opts: TrajectoryOptions) -> None:
    ways = sum((bool(opts.contexts), opts.fresh > 0, opts.against is not None))
    if ways > 1:
        raise InvalidArgument("trajectory compares one thing at a time: give one of --contexts A,B, --fresh 1 or "
                              f"--against S (got contexts={','.join(opts.contexts)!r}, fresh={opts.fresh}, "
                              f"against={opts.against!r})")
    if opts.contexts and len(opts.contexts) != 2:
        raise InvalidArgument(f"contexts={','.join(opts.contexts)!r} must name two contexts, A,B")
    if opts.steps is not None and opts.steps < 1:
        raise InvalidArgument(f"steps={opts.steps!r} must be >= 1")


def _model_subject(name: str, what: str) -> Any:
    from harness.core.vocabulary import MODEL_FAMILIES
    from harness.subjects.registry import SUBJECTS, get_subject

    s = get_subject(name)
    if s.family not in MODEL_FAMILIES:
        models = ", ".join(n for n, x in SUBJECTS.items() if x.family in MODEL_FAMILIES)
        raise InvalidArgument(f"{what}={name!r} is a subject of family {s.family}; a trajectory trains a model "
                              f"subject ({models})")
    return s


def run_trajectory(opts: TrajectoryOptions) -> Outcome:
    """The runs and their comparison (see the module); raises :class:`SetupError` where a run could not finish."""
    from harness.core.contexts import get_context
    from harness.core.devices import resolve_device
    from harness.execute.isolated import Runner, setup_failure
    from harness.execute.trajectories import baseline_case, first_node, with_spec
    from harness.judge.trajectory import compare_runs, read_run, verdict
    from harness.subjects.registry import check_case_for_subject, load_case_for_subject

    _check(opts)
    load_plugins(opts.plugins)
    subject = _model_subject(opts.subject, "subject")
    other = _model_subject(opts.against, "against") if opts.against else subject
    case = load_case_for_subject(opts.case, opts.case_id, subject, opts.max_case_bytes)
    perturb = case.spec.get("perturb")
    case = with_spec(case, steps=opts.steps, drop=("perturb",))
    check_case_for_subject(case, other)
    device = resolve_device(opts.device)
    a_ctx, b_ctx = (get_context(c).name for c in opts.contexts) if opts.contexts else ("default", "default")
    for c in {a_ctx, b_ctx} - {"default"}:
        if not get_context(c).applies_to(device.kind):
            raise InvalidArgument(f"contexts={','.join(opts.contexts)!r}: context {c} does not apply to device "
                                  f"{device.id}")
    if opts.contexts:
        labels = (a_ctx, b_ctx)
        what = f"{subject.name}, context {a_ctx} against {b_ctx}"
    elif opts.fresh:
        labels, what = ("process 1", "process 2"), f"{subject.name}, across fresh processes"
    elif opts.against:
        labels, what = (subject.name, other.name), f"{other.name} against {subject.name}"
    else:
        labels, what = ("run 1", "run 2"), f"{subject.name}, run to run in one process"

    def arrays(runner: Any, c: Any, name: str, ctx: str, which: str) -> Any:
        o = runner.run(c, name, device, ctx)
        if o.record.status != "ok" or not o.arrays:
            why = setup_failure(o.record) or (o.record.skip_reason or
                                              "; ".join(f"{e.get('type')} in {e.get('phase')}: {e.get('message')}"
                                                        for e in o.record.errors[:1]) or o.record.status)
            raise SetupError(f"trajectory: the {which} run of {name} on case {c.id} ({ctx}) did not finish: {why}")
        return read_run(o.arrays)

    with Runner(plugins=opts.plugins, timeout=opts.timeout) as runner:
        a = arrays(runner, case, subject.name, a_ctx, "first")
        if opts.fresh:
            with Runner(plugins=opts.plugins, timeout=opts.timeout) as second:  # its own, fresh, worker process
                b = arrays(second, case, subject.name, b_ctx, "second")
        else:
            b = arrays(runner, case, other.name, b_ctx, "second")
        pair = compare_runs(a, b)
        baseline = None
        if not pair.identical:
            p = arrays(runner, baseline_case(case, perturb), subject.name, a_ctx, "one-ULP baseline")
            baseline = compare_runs(a, p)
    node = ""
    first = pair.first_differing
    if first is not None and opts.localize and not opts.fresh and not opts.against:
        node = first_node(with_spec(case, steps=first.step + 1), subject.name,
                          contexts=(a_ctx, b_ctx) if opts.contexts else (), device=device.id, plugins=opts.plugins,
                          timeout=600.0 if opts.timeout is None else opts.timeout)
    return Outcome(verdict(pair, baseline, what, node), pair.identical, pair, baseline, labels, node)


def trajectory(opts: TrajectoryOptions) -> int:
    """0: bit-identical at every step; 1: the runs differ (the line says where first and by how much, beside the
    one-ULP baseline). A usage or set-up problem raises (exit 2)."""
    check_worker_limits()
    if opts.out is not None:
        from harness.core import argcheck

        argcheck.writable_dir("out", opts.out)
    outcome = run_trajectory(opts)
    print(outcome.line)
    if opts.out is not None:
        from harness.outputs.trajectory_files import BASELINE_LABEL, plot_trajectory, write_trajectory

        named = [(" vs ".join(outcome.labels), outcome.pair)]
        if outcome.baseline is not None:
            named.append((BASELINE_LABEL, outcome.baseline))
        figure = plot_trajectory(named[0], named[1] if len(named) > 1 else None, outcome.line)
        for path in write_trajectory(pathlib.Path(opts.out), named, outcome.line, figure):
            print(f"wrote {path}")
    return 0 if outcome.identical else 1
