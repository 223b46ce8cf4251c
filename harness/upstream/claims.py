"""What an exported reproducer claims, learned from the harness: the check, and the data that judges it.

:func:`claim_for` turns a :class:`~harness.judge.reproducer.Reproducer` and its case into a
:class:`~harness.upstream.script.Check` and the arrays the check needs beside the inputs (the float64
reference's values, a reference's bits, a relation's members). Every value that needs the subject, its oracle or
its declared order comes from worker processes (:class:`harness.execute.isolated.Runner`), never from this
process. A claim that no script can check (a control's, the harness's own checks, another process keeping the
GPU busy) is refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from harness.core.cases import Case, build_arrays
from harness.core.contexts import blas_info, get_context
from harness.core.devices import CPU, parse_device
from harness.core.errors import InvalidArgument, SetupError
from harness.core.vocabulary import COMPUTE_PHASES
from harness.judge.finding_kinds import FindingKind, finding_kind, tensor_kind
from harness.judge.reproducer import Reproducer
from harness.upstream.script import Check

__all__ = ["Claim", "claim_for", "case_arrays", "check_kind", "context_env", "chainer_device", "subject_outputs"]

@dataclass(frozen=True)
class Claim:
    """The check, the data it needs (by name, beside the inputs), and how the finding reads in words."""

    check: Check
    data: Mapping[str, np.ndarray] = field(default_factory=dict)
    what: str = ""            # what the script shows, one sentence in the library's words
    conditions: str = ""      # what it holds under: device, dtype, BLAS threads


def case_arrays(case: Case) -> dict[str, np.ndarray]:
    """A case's inputs as a script reads them: its arrays, and a pipeline's sequence lengths."""
    arrays = dict(build_arrays(case))
    if case.family == "pipeline":
        arrays["lengths"] = np.asarray([int(n) for n in case.spec["lengths"]], dtype=np.int64)
    return arrays


def check_kind(r: Reproducer) -> str:
    """Which check a reproducer's finding is: from its kind, or the kind its shape says (a relation, two
    contexts, two devices, a baseline, an error: :func:`harness.judge.allowance.finding_kind_of`); '' where it
    names nothing (the script then checks what ``replay`` checks)."""
    from harness.judge.allowance import finding_kind_of

    if not (r.kind or r.relation or len(r.contexts) > 1 or len(r.devices) > 1 or r.baseline or r.error):
        return ""
    try:
        kind = finding_kind(finding_kind_of(r))
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
    if not kind.check:
        raise InvalidArgument(f"kind={kind.value!r}: a check of the harness itself, not of the library; nothing to "
                              f"export")
    return kind.check


def chainer_device(device: str) -> str:
    """A harness device name as Chainer spells it (``cpu`` -> ``@numpy``, ``gpu:1`` -> ``@cupy:1``)."""
    dev = parse_device(device)
    return "@numpy" if dev.kind == "cpu" else f"@cupy:{dev.index}"


def _default_threads() -> int:
    """The BLAS threads the harness's ``default`` context runs with here (the first BLAS library's count)."""
    info = blas_info()
    return int(info[0].get("num_threads") or 1) if info else 1


def context_env(name: str) -> tuple[dict[str, str], int]:
    """A context as the environment of a fresh process (and the cores it needs): BLAS threads pinned for every
    BLAS a NumPy may use, Chainer's configuration through the variables Chainer reads at import. ``default`` is
    pinned to the thread count the harness's default ran with, so the script does not inherit a user's."""
    c = get_context(name)
    if c.contention:
        raise InvalidArgument(f"context={name!r}: another process keeping the GPU busy is not something a script "
                              f"can set up; export the finding in another context")
    env: dict[str, str] = dict(c.env)
    threads = c.blas_threads if c.blas_threads is not None else (_default_threads() if "OPENBLAS_NUM_THREADS" not in
                                                                 env else int(env["OPENBLAS_NUM_THREADS"]))
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, str(threads))
    for key, value in c.chainer_config:
        if key == "debug":
            env["CHAINER_DEBUG"] = "1" if value else "0"
        elif key == "type_check":
            env["CHAINER_TYPE_CHECK"] = "1" if value else "0"
        else:
            raise InvalidArgument(f"context={name!r}: chainer.config.{key} has no environment variable Chainer "
                                  f"reads at import, so a fresh process cannot be given it")
    return env, threads


def _conditions(r: Reproducer, case: Case, threads: int | None, kind: str) -> str:
    dev = parse_device(r.devices[-1])
    dtype = case.spec.get("w_dtype") or case.spec.get("dtype") or "float32"
    where = "CPU (NumPy)" if dev.kind == "cpu" and len(r.devices) == 1 else \
        " vs ".join("CPU (NumPy)" if parse_device(d).kind == "cpu" else "GPU (CuPy)" for d in r.devices)
    parts = [where, str(dtype)]
    if threads is not None and dev.kind == "cpu" and kind not in ("error", "bad_input"):
        parts.append(f"BLAS at {threads} thread{'s' if threads != 1 else ''}")
    return ", ".join(parts)


def _runner_outputs(r: Reproducer, case: Case, subject: str, device: str, context: str) -> Any:
    from harness.execute.isolated import Runner

    dev = parse_device(device)
    with Runner(plugins=r.plugins) as runner:
        return runner.run(case, subject, dev if dev.available else CPU, context)


def subject_outputs(r: Reproducer, case: Case) -> Any:
    """One run of the reproducer's subject on its case in its (first) context, in a worker."""
    return _runner_outputs(r, case, r.subject, r.devices[0], r.contexts[0])


def _tolerance(r: Reproducer, case: Case, wrong: tuple[str, ...] = ()) -> tuple[Check, dict[str, np.ndarray]]:
    """The tolerance of each judged tensor (the harness's rule, as numbers) and the float64 reference's values."""
    from harness.execute.isolated import Runner
    from harness.judge.contracts import load_contracts
    from harness.judge.tolerance import amplification_floor, tolerance_for
    from harness.subjects.registry import get_subject

    subj = get_subject(r.subject)
    if subj.oracle is None:
        raise InvalidArgument(f"subject={r.subject!r} has no oracle: a tolerance claim cannot be checked without one")
    dev = parse_device(r.devices[-1])
    with Runner(plugins=r.plugins) as runner:
        mine = runner.run(case, r.subject, dev if dev.available else CPU, r.contexts[-1])
        ref = runner.run(case, subj.oracle, CPU, "default")
    if not ref.arrays:
        raise SetupError(f"the oracle {subj.oracle} gave no values for case {case.id}: {ref.record.first_error}")
    contract = load_contracts(r.contracts or None).find(r.subject, dev.kind, r.contexts[-1])
    tolerance: dict[str, tuple[float, float, bool]] = {}
    data: dict[str, np.ndarray] = {}
    for name, actual in sorted(mine.arrays.items()):
        actual = np.asarray(actual)
        if name not in ref.arrays or name.startswith("noise.") or actual.dtype.kind != "f":
            continue
        if (wrong and name not in wrong) or (not wrong and r.tensor and tensor_kind(name) != r.tensor):
            continue
        tol = tolerance_for(case, name, actual.dtype, contract)
        atol = float(tol.atol)
        if "amplification" in tol.rules:
            atol = max(atol, float(amplification_floor(ref.arrays.get(f"noise.{name}")) or 0.0))
        tolerance[name] = (atol, float(tol.rtol), "normwise" in tol.rules)
        data[f"expected.{name}"] = np.asarray(ref.arrays[name], dtype=np.float64)
    if not tolerance:
        raise InvalidArgument(f"tensor={r.tensor!r}: no output of {r.subject} of that kind has a reference value "
                              f"for case {case.id}")
    return Check("tolerance", tensors=tuple(tolerance), tolerance=tolerance), data


def _bad_rule(r: Reproducer, case: Case) -> Check:
    from harness.judge.contracts import load_contracts
    from harness.judge.task_verdicts import expectation_for

    dev = parse_device(r.devices[-1])
    rules = load_contracts(r.contracts or None).bad_rules(r.subject, dev.kind, case.tags, r.contexts[-1])
    exp = expectation_for(rules, case.expect, r.subject, dev.kind)
    if exp is None:
        raise InvalidArgument(f"case {case.id}: no rule says what this bad input must do for {r.subject}")
    if exp.errors is None:
        raise InvalidArgument(f"case {case.id}: its rule allows any outcome the same everywhere; export the "
                              f"finding with its two contexts (--contexts A,B) instead")
    allowed = {e: tuple(sorted(exp.phases.get(e, COMPUTE_PHASES))) for e in sorted(exp.errors)}
    return Check("bad_input", allowed=allowed, no_error_ok=bool(exp.no_error_ok))


def _known_wrong(r: Reproducer, case: Case) -> tuple[str, ...]:
    from harness.judge.contracts import load_contracts

    dev = parse_device(r.devices[-1])
    known = load_contracts(r.contracts or None).known_defects_for(r.subject, dev.kind, case.tags, r.contexts[-1])
    return tuple(sorted({t for d in known for t in d.wrong}))


def _error_of(r: Reproducer, case: Case) -> tuple[str, str]:
    if r.error:
        etype, _, phase = r.error.partition(" in ")
        return etype.strip(), phase.split(":", 1)[0].strip()
    e = subject_outputs(r, case).record.first_error
    if not e:
        raise InvalidArgument(f"{r.subject} raised no error on case {case.id} here: give the error (--error "
                              f"'Type in phase') the finding recorded")
    return str(e.get("type")), str(e.get("phase"))


def _reference_bits(r: Reproducer, case: Case) -> tuple[dict[str, np.ndarray], str]:
    """Bits to compare with: the baseline's arrays of the task, or the declared order's reference."""
    from harness.subjects.registry import order_reference

    dev = parse_device(r.devices[-1])
    if r.baseline:
        from harness.core.rundir import task_arrays
        from harness.execute.campaign import load_tasks

        base = next((t for t in load_tasks(r.baseline).values() if (t.case_id, t.subject, t.device, t.context)
                     == (case.id, r.subject, dev.id, r.contexts[-1])), None)
        arrays = task_arrays(r.baseline, base.array_file) if base is not None else None
        if not arrays:
            raise InvalidArgument(f"baseline={r.baseline!r} keeps no arrays of case {case.id} for {r.subject}: "
                                  f"nothing to compare with")
        return {f"bits.{k}": np.asarray(v) for k, v in arrays.items()}, "the baseline run"
    declared = order_reference(r.subject, dev.kind)
    if declared is None:
        raise InvalidArgument(f"subject={r.subject!r} declares no accumulation order: nothing to compare with")
    ref = _runner_outputs(r, case, declared[0], "cpu", "default")
    if not ref.arrays:
        raise SetupError(f"the order reference {declared[0]} gave no values: {ref.record.first_error}")
    return {f"bits.{k}": np.asarray(v) for k, v in ref.arrays.items()}, f"the declared order ({declared[1]})"


def _relation(r: Reproducer, case: Case) -> tuple[Check, dict[str, np.ndarray]]:
    from harness.execute.relations import get_relation, members, pair_names

    rel = get_relation(r.relation)
    related = members(case, [rel])
    if not related:
        raise InvalidArgument(f"relation={r.relation!r} gives case {case.id} no member (family, batch of one, "
                              f"size or dropout): nothing to compare")
    base_out = subject_outputs(r, case)
    data: dict[str, np.ndarray] = {}
    pairs: list[tuple[str, str, tuple[int, ...] | None, int, str]] = []
    labels = []
    for m in related:
        for k, v in case_arrays(m.case).items():
            data[f"member.{m.label}.{k}"] = v
        labels.append((m.label, f"member.{m.label}."))
        for base_name, rows, axis, member_name in pair_names(case.family, rel.name, m.index, base_out.arrays):
            if r.tensor and tensor_kind(base_name) != r.tensor:
                continue
            pairs.append((m.label, base_name, rows, axis, member_name))
    check = Check("relation", members=tuple(labels), pairs=tuple(pairs))
    return check, data


def claim_for(r: Reproducer, case: Case) -> Claim:
    """The claim a script checks for ``r`` on ``case`` (the check of the finding's kind; without a kind, the
    error the subject raises here, else run to run)."""
    kind = check_kind(r)
    tensors: tuple[str, ...] = ()
    threads: int | None = _default_threads()
    data: dict[str, np.ndarray] = {}
    if not kind:
        e = subject_outputs(r, case).record.first_error
        kind = "bad_input" if case.bad else "error" if e else "repeats"
        if kind == "error":
            r = _with_error(r, f"{e.get('type')} in {e.get('phase')}")
    if kind == "error":
        wrong = _known_wrong(r, case) if r.kind == FindingKind.KNOWN_DEFECT and not r.error else ()
        if wrong:
            check, data = _tolerance(r, case, wrong)
            what = f"{', '.join(wrong)} wrong (float64 reference)"
        else:
            etype, phase = _error_of(r, case)
            check = Check("error", error=(etype, phase))
            what = f"{etype} in {phase}"
    elif kind == "bad_input":
        check = _bad_rule(r, case)
        what = "a bad input handled another way than its rule says"
    elif kind == "repeats":
        check = Check("repeats", count=max(2, r.repeats or 20))
        what = "runs in one process give different bits"
    elif kind == "processes":
        check = Check("processes", count=max(2, r.fresh or 3))
        what = "fresh processes give different bits"
    elif kind == "contexts":
        if len(r.contexts) != 2:
            raise InvalidArgument(f"contexts={','.join(r.contexts)!r}: a cross-context claim needs two (A,B)")
        envs = [context_env(c) for c in r.contexts]
        threads = max(t for _, t in envs)
        steps = int(case.spec["steps"]) if case.family == "model" else 0  # a training: compared step by step
        check = Check("contexts", contexts=tuple((c, e) for c, (e, _) in zip(r.contexts, envs)), threads=threads,
                      steps=steps)
        what = (f"{steps} training step{'s' if steps != 1 else ''} in {r.contexts[0]} and in {r.contexts[1]} end "
                f"with different parameters" if steps else f"{r.contexts[0]} and {r.contexts[1]} give different bits")
        threads = None
    elif kind == "devices":
        if len(r.devices) != 2:
            raise InvalidArgument(f"devices={','.join(r.devices)!r}: a cross-device claim needs two (A,B)")
        check = Check("devices", devices=tuple(chainer_device(d) for d in r.devices))
        what = f"{r.devices[0]} and {r.devices[1]} give different bits"
    elif kind == "relation":
        check, data = _relation(r, case)
        what = f"not invariant under '{r.relation}'"
    elif kind == "tolerance":
        check, data = _tolerance(r, case)
        what = "beyond the float64 reference's tolerance"
    else:  # bits
        data, ref = _reference_bits(r, case)
        check = Check("bits", reference=ref)
        what = f"bits differ from {ref}"
    if r.tensor and check.kind in ("repeats", "processes", "contexts", "devices"):
        tensors = tuple(n for n in _names(r, case) if tensor_kind(n) == r.tensor)
        check = Check(**{**check.__dict__, "tensors": tensors})
    return Claim(check, data, what, _conditions(r, case, threads, check.kind))


def _names(r: Reproducer, case: Case) -> list[str]:
    out = subject_outputs(r, case)
    return sorted(k for k in out.arrays if not k.startswith("noise."))


def _with_error(r: Reproducer, error: str) -> Reproducer:
    from dataclasses import replace

    return replace(r, error=error)
