"""``harness replay``: run one case from its JSON alone and say what the judges find.

One context and device: R runs, measured run to run and against the oracle. Two contexts
(``--contexts A,B``) or two devices (``--devices A,B``): B is measured against A as well, so a cross-context
or cross-device finding of a report reproduces from its printed command. Exit codes: 0 when every
comparison is bit-identical and within tolerance (or the only run was skipped), 1 when any differs or is
beyond tolerance, 2 for bad arguments.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence, TextIO

from harness.core.cases import Case
from harness.core.devices import Device
from harness.core.records import Measure
from harness.execute.inprocess import measure_here
from harness.judge import bitwise
from harness.judge.contracts import Contracts

__all__ = ["replay", "replay_relation", "differs"]


def differs(m: Measure) -> bool:
    """A measure that found a difference: bits that differ, or an error beyond its tolerance, or a bad
    verdict of a task."""
    if m.kind == "oracle":
        return m.within is False
    if m.kind == "task":
        return m.verdict in ("broken", "error")
    return m.identical is False


def _part(m: Measure) -> str:
    if m.kind == "oracle":
        state = "within tolerance" if m.within else "BEYOND TOLERANCE"
        ratio = "" if m.error_ratio is None else f", error/allowed {m.error_ratio:.3g}"
        return f"oracle {state}{ratio}"
    what = {"repeat": "", "process": " (fresh processes)", "context": f" vs context {m.other}",
            "device": f" vs device {m.other}"}.get(m.kind, f" vs {m.other}")
    if m.identical:
        return f"bit-identical{what}" + (f" over {m.repeats}" if m.repeats else "")
    return (f"DIFFERS{what}" + (f" over {m.repeats}" if m.repeats else "")
            + f" (n_diff {m.n_diff}/{m.n_total}, max ULP {m.max_ulp} at {m.max_ulp_index}: {m.actual} vs {m.expected})")


def _lines(here: Any) -> list[str]:
    """One line per tensor: dtype, shape, digest and every comparison of it; then the task's own measure."""
    by: dict[str, list[Measure]] = {}
    for m in here.measures:
        by.setdefault(m.tensor, []).append(m)
    out = []
    for m in by.pop("", []):
        out.append(f"  (task) {m.verdict}: {m.rule}" + (f" -- {m.detail or m.actual}" if (m.detail or m.actual) else ""))
    for name, t in here.record.tensors.items():
        ms = by.get(name, [])
        digest = bitwise.short_digest(t.digest) if t.digest else ""
        parts = [_part(m) for m in sorted(ms, key=lambda m: ("repeat", "process", "context", "device",
                                                                "oracle").index(m.kind)
                                           if m.kind in ("repeat", "process", "context", "device", "oracle") else 9)]
        if not any(m.kind == "repeat" for m in ms):
            parts.insert(0, f"one run" if t.repeats == 1 else f"{'bit-identical' if t.bitwise_identical else 'DIFFERS'}"
                                                                 f" over {t.repeats}")
        out.append(f"  {name:18s} {t.dtype:8s} {str(tuple(t.shape)):14s} digest {digest}  " + "; ".join(parts))
    return out


def replay(contracts: Contracts, case: Case, subject: str, devices: Sequence[Device], contexts: Sequence[str],
           repeats: int, out: TextIO = sys.stdout) -> int:
    """Run and print; returns the exit code (0 nothing differs, 1 something does)."""
    device, context = devices[-1], contexts[-1]
    here = measure_here(contracts, subject, case, device, context, repeats, contexts=list(contexts[:-1]),
                        devices=list(devices[:-1]))
    print(f"case {case.id} ({case.family}), subject {subject}, device {device.id}, context {context}, "
          f"{len(here.results)} repeats" + (f"; compared with {', '.join([*contexts[:-1], *(d.id for d in devices[:-1])])}"
                                           if len(contexts) > 1 or len(devices) > 1 else ""), file=out)
    if here.results[0].status == "skipped":
        print(f"skipped: {here.results[0].skip_reason}", file=out)
        return 0
    statuses = [r.status for r in here.results]
    warned = sorted({w for r in here.results for w in r.declared_warnings})
    print(f"statuses: {', '.join(f'{s} x{statuses.count(s)}' for s in sorted(set(statuses)))}; "
          f"chainer declared nondeterminism: {', '.join(warned) or 'none'}", file=out)
    for r in here.results:
        if r.error is not None:
            print(f"error: {r.error}", file=out)
            break
    if here.record.ok_runs and not any(m.kind == "oracle" for m in here.measures) and not case.bad:
        print("oracle: none applies to this case (no oracle for the subject, or the oracle does not take it: "
              "e.g. explicit out-of-range ids or dropout)", file=out)
    for line in _lines(here):
        print(line, file=out)
    found = [m for m in here.measures if differs(m)]
    print(f"{len(found)} comparison(s) differ" if found else "nothing differs", file=out)
    return 1 if found else 0


def replay_relation(contracts: Contracts, case: Case, subject: str, device: Device, context: str, relation: str,
                    out: TextIO = sys.stdout) -> int:
    """Run ``case`` and every member of ``relation`` here, once each, and judge each member's tensors against
    the base case's (as the campaign's measure pass does); 0 when every pair is bit-identical, 1 otherwise."""
    from harness.core.contexts import get_context
    from harness.execute.relations import get_relation, members, pairs
    from harness.judge.verdicts import judge_pair
    from harness.subjects.base import execute
    from harness.subjects.registry import get_subject

    rel = get_relation(relation)
    subj, ctx = get_subject(subject), get_context(context)
    contract = contracts.find(subject, device.kind, context)
    base = execute(subj, case, device, ctx)
    related = members(case, [rel])
    print(f"case {case.id} ({case.family}), subject {subject}, device {device.id}, context {context}: relation "
          f"{relation} ({rel.description}), {len(related)} member(s)", file=out)
    if base.status == "skipped":
        print(f"skipped: {base.skip_reason}", file=out)
        return 0
    if not base.ok:
        print(f"the base case did not run: {base.error}", file=out)
        return 1
    if not related:
        print("no member: the relation does not apply to this case (family, batch of one, size or dropout)",
              file=out)
        return 0
    key = {"case_id": case.id, "subject": subject, "device": device.id, "context": context}
    found = 0
    for m in related:
        r = execute(subj, m.case, device, ctx)
        if not r.ok:
            print(f"  {m.label}: the member did not run: {r.error}", file=out)
            found += 1
            continue
        for name, b, a in pairs(case.family, relation, m.index, base.arrays, r.arrays):
            meas = judge_pair("relation", contract, key, name, b, a, f"{relation}:{m.label}", relation=relation)
            state = "bit-identical" if meas.identical else (
                f"DIFFERS ({meas.n_diff}/{meas.n_total}, max ULP {meas.max_ulp} at {meas.max_ulp_index}: "
                f"{meas.actual} vs {meas.expected})")
            print(f"  {m.label:12s} {name:28s} {state}", file=out)
            found += int(meas.identical is False)
    print(f"{found} comparison(s) differ" if found else "nothing differs", file=out)
    return 1 if found else 0
