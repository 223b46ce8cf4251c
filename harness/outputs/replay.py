"""``harness replay``: run one case from its JSON alone and say what the judges find.

One context and device: R runs, measured run to run and against the oracle. Two contexts
(``--contexts A,B``) or two devices (``--devices A,B``): B is measured against A as well, so a cross-context
or cross-device finding of a report reproduces from its printed command. Exit codes, by
:func:`harness.judge.outcomes.replay_outcome` (the one rule): 0 when every comparison is bit-identical and
within tolerance (or the only run was skipped), 1 when any differs or is beyond tolerance or the runs disagree
(some raised, some did not), 3 when every run raised the same way (an error, not a difference), 2 for bad
arguments and set-up errors.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence, TextIO

from harness.core.cases import Case
from harness.core.classification import Verdict
from harness.core.devices import Device
from harness.core.errors import InvalidArgument, SetupError
from harness.core.records import Measure
from harness.judge.contracts import Contracts
from harness.judge.digest import short_digest
from harness.judge.outcomes import is_difference, replay_outcome

__all__ = ["replay", "replay_relation", "differs"]


def differs(m: Measure) -> bool:
    """A measure that found a difference (:func:`harness.judge.outcomes.is_difference`): never a run's error."""
    return is_difference(m)


def _part(m: Measure) -> str:
    if m.kind == "oracle":
        state = ("within tolerance" if m.within else
                 "BEYOND TOLERANCE (known defect)" if m.verdict == Verdict.KNOWN_DEFECT else "BEYOND TOLERANCE")
        ratio = "" if m.error_ratio is None else f", error/allowed {m.error_ratio:.3g}"
        return f"oracle {state}{ratio}"
    what = {"repeat": "", "process": " (fresh processes)", "context": f" vs context {m.other}",
            "device": f" vs device {m.other}"}.get(m.kind, f" vs {m.other}")
    if m.identical:
        return f"bit-identical{what}" + (f" over {m.repeats}" if m.repeats else "")
    return (f"DIFFERS{what}" + (f" over {m.repeats}" if m.repeats else "")
            + f" (n_diff {m.n_diff}/{m.n_total}, max ULP {m.max_ulp} at {m.max_ulp_index}: {m.actual} vs {m.expected})")


def _lines(record: Any, measures: Sequence[Measure]) -> list[str]:
    """One line per tensor: dtype, shape, digest and every comparison of it; then the task's own measure."""
    by: dict[str, list[Measure]] = {}
    for m in measures:
        by.setdefault(m.tensor, []).append(m)
    out = []
    for m in by.pop("", []):
        out.append(f"  (task) {m.verdict}: {m.rule}"
                   + (f" -- {m.detail or m.actual}" if (m.detail or m.actual) else ""))
    for name, t in record.tensors.items():
        ms = by.get(name, [])
        digest = short_digest(t.digest) if t.digest else ""
        order = ("repeat", "process", "context", "device", "oracle", "baseline")
        parts = [_part(m) for m in sorted(ms, key=lambda m: order.index(m.kind) if m.kind in order else 9)]
        if not any(m.kind == "repeat" for m in ms):
            parts.insert(0, "one run" if t.repeats == 1 else f"{'bit-identical' if t.bitwise_identical else 'DIFFERS'}"
                                                                 f" over {t.repeats}")
        out.append(f"  {name:18s} {t.dtype:8s} {str(tuple(t.shape)):14s} digest {digest}  " + "; ".join(parts))
    # Values the contracts file declares wrong: say which declaration, as a known crash's task line does.
    out += [f"  ({m.tensor}) {m.verdict}: {m.rule} -- {m.detail}" for m in measures
            if m.kind == "oracle" and m.verdict == Verdict.KNOWN_DEFECT]
    return out


def _check_importable(subject: str) -> None:
    """A replay in a Python that cannot import Chainer is a set-up error (exit 2), never "it differs"."""
    import importlib.util

    if importlib.util.find_spec("chainer") is None:
        raise SetupError(f"python={sys.executable!r} cannot import chainer: run the command with the harness's "
                         f"virtual environment (.venv/bin/python -m harness ...)")


def replay(contracts: Contracts, case: Case, subject: str, devices: Sequence[Device], contexts: Sequence[str],
           repeats: int, out: TextIO | None = None, *, fresh: int = 0, baseline: str | None = None,
           plugins: Sequence[str] = (), timeout: float | None = None, export: str = "",
           max_case_bytes: int | None = None) -> int:
    """Run in worker processes and print; returns the exit code of
    :func:`harness.judge.outcomes.replay_outcome` (0 nothing differs, 1 something does, 3 every run raised the
    same way; a set-up failure raises :class:`SetupError`, exit 2). ``export``: the command that exports what
    differs as a standalone script, printed before the last line where something does."""
    from harness.execute.isolated import Runner, measure_isolated, setup_failure

    out = sys.stdout if out is None else out  # the stream at the call (a test's capture), not at import
    _check_importable(subject)
    device, context = devices[-1], contexts[-1]
    from harness.execute.admission import time_bound

    print(time_bound(case, subject, device.id, (repeats + fresh) * (len(contexts) + len(devices) - 1), timeout),
          file=sys.stderr)
    with Runner(plugins=plugins, timeout=timeout, fresh=fresh, max_case_bytes=max_case_bytes) as runner:
        here = measure_isolated(runner, contracts, subject, case, device, context, repeats, fresh,
                                contexts=list(contexts[:-1]), devices=list(devices[:-1]))
    why = setup_failure(here.record)
    if why is not None:
        raise SetupError(f"no run of {subject} could start here: {why}")
    rec = here.record
    measures = list(here.measures)
    if baseline is not None:
        measures += _against_baseline(contracts, rec, here.arrays, baseline)
    print(f"case {case.id} ({case.family}), subject {subject}, device {device.id}, context {context}, "
          f"{rec.runs} runs ({fresh} in fresh processes), in worker processes"
          + (f"; compared with {', '.join([*contexts[:-1], *(d.id for d in devices[:-1])])}"
             if len(contexts) > 1 or len(devices) > 1 else "")
          + (f"; against the baseline {baseline}" if baseline else ""), file=out)
    outcome = replay_outcome([rec, *here.others], measures)
    if rec.status == "skipped":
        print(f"skipped: {rec.skip_reason}", file=out)
        return outcome.exit_code
    statuses = dict(rec.statuses)
    print(f"statuses: {', '.join(f'{s} x{n}' for s, n in sorted(statuses.items()))}; "
          f"chainer declared nondeterminism: {', '.join(rec.declared_warnings) or 'none'}", file=out)
    if rec.first_error is not None:
        e = rec.first_error
        print(f"error: {e.get('type')} in {e.get('phase')}: {e.get('message')}", file=out)
    if rec.ok_runs and not any(m.kind == "oracle" for m in measures) and not case.bad:
        print("oracle: none applies to this case (no oracle for the subject, or the oracle does not take it: "
              "e.g. explicit out-of-range ids or dropout)", file=out)
    for line in _lines(rec, measures):
        print(line, file=out)
    for other in here.others:  # a compared run that gave no values: what it raised (no comparison was made)
        if not other.ok_runs and other.first_error is not None:
            e = other.first_error
            where = other.context if other.device == rec.device else other.device
            print(f"  ({where}) {other.run_status}: {e.get('type')} in {e.get('phase')}: {e.get('message')}",
                  file=out)
    _export_line(export if outcome.exit_code else "", out)  # something reproduces: a difference or an error
    print(outcome.line, file=out)
    return outcome.exit_code


def _export_line(export: str, out: TextIO) -> None:
    if export:
        print(f"export: {export}", file=out)


def _against_baseline(contracts: Contracts, rec: Any, arrays: Any, baseline: str) -> list[Measure]:
    """This run's tensors against the baseline's task of the same case, subject, device and context."""
    from harness.execute.campaign import load_tasks
    from harness.outputs.gate import _baseline_arrays, against_baseline

    base = load_tasks(baseline).get(rec.key)
    if base is None:
        raise InvalidArgument(f"baseline={baseline!r} holds no task {rec.key!r}: replay --baseline needs a case "
                              f"the baseline ran")
    contract = contracts.find(rec.subject, rec.device_kind, rec.context)
    theirs = _baseline_arrays(baseline, base) or {}
    out = against_baseline(rec, base, arrays or {}, theirs, contract, baseline)
    if not out:
        from harness.judge.verdicts import BIT_IDENTICAL

        out = [Measure(kind="baseline", case_id=rec.case_id, subject=rec.subject, device=rec.device,
                       context=rec.context, tensor=n, other="baseline", identical=True, verdict=BIT_IDENTICAL,
                       rule="digest stable against the baseline") for n in rec.tensors if n in base.tensors]
    return out


def replay_relation(contracts: Contracts, case: Case, subject: str, device: Device, context: str, relation: str,
                    out: TextIO | None = None, *, plugins: Sequence[str] = (), timeout: float | None = None,
                    export: str = "", max_case_bytes: int | None = None) -> int:
    """Run ``case`` and every member of ``relation`` in worker processes, once each, and judge each member's
    tensors against the base case's (as the campaign's measure pass does); 0 when every pair is bit-identical,
    1 otherwise (``export`` as :func:`replay`'s)."""
    from harness.execute.isolated import Runner, setup_failure
    from harness.execute.relations import get_relation, members, pairs
    from harness.judge.verdicts import judge_pair

    out = sys.stdout if out is None else out
    _check_importable(subject)
    rel = get_relation(relation)
    contract = contracts.find(subject, device.kind, context)
    related = members(case, [rel])
    with Runner(plugins=plugins, timeout=timeout, max_case_bytes=max_case_bytes) as runner:
        base = runner.run(case, subject, device, context)
        why = setup_failure(base.record)
        if why is not None:
            raise SetupError(f"no run of {subject} could start here: {why}")
        print(f"case {case.id} ({case.family}), subject {subject}, device {device.id}, context {context}: relation "
              f"{relation} ({rel.description}), {len(related)} member(s), in worker processes", file=out)
        if base.record.status == "skipped" or not base.arrays:
            outcome = replay_outcome([base.record], [])
            print(f"skipped: {base.record.skip_reason}" if outcome.kind == "skipped" else
                  f"the base case gave no values: {outcome.line}", file=out)
            return outcome.exit_code
        if not related:
            print("no member: the relation does not apply to this case (family, batch of one, size or dropout)",
                  file=out)
            return 0
        key = {"case_id": case.id, "subject": subject, "device": device.id, "context": context}
        records, judged = [base.record], []
        for m in related:
            r = runner.run(m.case, subject, device, context)
            records.append(r.record)
            if not r.arrays:
                e = r.record.first_error or {}
                print(f"  {m.label}: the member gave no values ({r.record.run_status}: {e.get('type')} in "
                      f"{e.get('phase')}: {e.get('message')})", file=out)
                continue
            for name, b, a in pairs(case.family, relation, m.index, base.arrays, r.arrays):
                meas = judge_pair("relation", contract, key, name, b, a, f"{relation}:{m.label}", relation=relation)
                state = "bit-identical" if meas.identical else (
                    f"DIFFERS ({meas.n_diff}/{meas.n_total}, max ULP {meas.max_ulp} at {meas.max_ulp_index}: "
                    f"{meas.actual} vs {meas.expected})")
                print(f"  {m.label:12s} {name:28s} {state}", file=out)
                judged.append(meas)
    outcome = replay_outcome(records, judged)
    _export_line(export if outcome.exit_code else "", out)  # something reproduces: a difference or an error
    print(outcome.line, file=out)
    return outcome.exit_code
