"""The CI gate: check runs against the determinism contracts, and a fresh campaign against a baseline.

The checks are plain functions from results to :class:`Violation` lists; only ``assert_*``
raise (:class:`~harness.core.errors.ContractViolation`, whose message is the dossier: the contract
that broke, the tensor, the comparator's statistics, the case JSON and the replay command).
The pytest suites call them in-process; ``python -m harness gate`` runs a campaign in worker
processes and checks every task record. Exit codes: 0 pass, 1 contract broken, 2 usage/set-up.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence
from xml.sax.saxutils import escape

import numpy as np

from harness.judge import bitwise as compare
from harness.core.cases import Case
from harness.judge.contracts import BadInputRule, Contract, Contracts, load_contracts, validate
from harness.core.errors import ContractViolation
from harness.subjects.base import RunResult
from harness.subjects.registry import SUBJECTS as _SUBJECTS


def _role(name: str) -> str:
    return _SUBJECTS[name].role if name in _SUBJECTS else "subject"

__all__ = ["Violation", "replay_command", "check_repeats", "check_oracle", "check_across", "check_bad_input",
           "assert_no_violations", "no_contract", "cmd_gate", "cmd_contracts_check", "gate_campaign",
           "check_baseline"]


def replay_command(case_path: str, subject: str, device: str, context: str = "default") -> str:
    """The command that reproduces one run from the case's JSON alone."""
    return f"python -m harness replay {case_path} --subject {subject} --device {device} --context {context}"


@dataclass(frozen=True)
class Violation:
    """One broken contract, with everything needed to reproduce it."""

    kind: str            # not reproducible | not reproducible across processes | differs across contexts | ...
    subject: str
    device: str
    context: str
    tensor: str
    detail: str          # the comparator's message
    contract: str        # the contract line, described
    case: Case | None = None

    def dossier(self) -> str:
        lines = [f"Contract broken: {self.kind}", f"Contract: {self.contract}",
                 f"Subject: {self.subject}   Device: {self.device}   Context: {self.context}"]
        if self.tensor:
            lines.append(f"Tensor: {self.tensor}")
        lines += ["", self.detail.rstrip()]
        if self.case is not None:
            path = f"case-{self.case.id}.json"
            lines += ["", f"Case ({self.case.id}): {self.case.to_json()}",
                      f"Reproduce: save the case JSON as {path}, then",
                      f"  {replay_command(path, self.subject, self.device, self.context)}"]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "subject": self.subject, "device": self.device, "context": self.context,
                "tensor": self.tensor, "detail": self.detail, "contract": self.contract,
                "case_id": None if self.case is None else self.case.id}


def no_contract(subject: str, device: str, context: str, case: Case | None = None) -> Violation:
    """The failure for a subject x device x context that the contracts file does not cover."""
    return Violation("no contract", subject, device, context, "",
                     f"No contract line covers subject={subject!r} device={device!r} context={context!r}: "
                     f"add one to contracts.toml (a missing line is a failure, not a pass).", "(none)", case)


def check_repeats(contract: Contract, case: Case, subject: str, device: str, context: str,
                  reps: Sequence[Mapping[str, np.ndarray]], processes: Sequence[str] | None = None) -> list[Violation]:
    """Run-to-run checks. ``processes`` labels each repetition ('pool' or 'fresh:k'); the pool's
    repetitions are checked against ``reproducible``, the fresh ones against ``across_processes``."""
    out: list[Violation] = []
    processes = list(processes) if processes is not None else ["pool"] * len(reps)
    pool = [r for r, p in zip(reps, processes) if p == "pool"]
    fresh = [r for r, p in zip(reps, processes) if p != "pool"]
    if contract.reproducible and len(pool) > 1:
        for name, c in compare.compare_results(pool).items():
            if not c.bitwise_identical:
                out.append(Violation("not reproducible run to run", subject, device, context, name,
                                     f"{c.message()}\nRepetitions that disagreed: {c.n_unique} distinct results "
                                     f"in {c.repeats} runs", contract.describe(), case))
    if contract.across_processes and pool and fresh:
        for name, c in compare.compare_results([pool[0], *fresh]).items():
            if not c.bitwise_identical:
                out.append(Violation("not reproducible across processes", subject, device, context, name,
                                     c.message(), contract.describe(), case))
    return out


def check_across(contract: Contract, case: Case, subject: str, device: str, context: str,
                 arrays: Mapping[str, np.ndarray], other_context: str,
                 other: Mapping[str, np.ndarray]) -> list[Violation]:
    """Bits must match another context's (when the contract names it in ``identical_across``)."""
    if other_context not in contract.identical_across:
        return []
    out = []
    for name in sorted(set(arrays) | set(other)):
        if name not in arrays or name not in other:
            out.append(Violation(f"differs from context {other_context}", subject, device, context, name,
                                 f"tensor {name} is missing in one of the two contexts", contract.describe(), case))
            continue
        c = compare.compare_pair(name, arrays[name], other[name])
        if not c.bitwise_identical:
            out.append(Violation(f"differs from context {other_context}", subject, device, context, name,
                                 c.message(), contract.describe(), case))
    return out


def check_oracle(contract: Contract, case: Case, subject: str, device: str, context: str,
                 arrays: Mapping[str, np.ndarray], oracle: Mapping[str, np.ndarray]) -> list[Violation]:
    """Every tensor the oracle also has must be within the contract's tolerance of it."""
    if contract.oracle != "within":
        return []
    from harness.core.cases import build_arrays
    from harness.subjects.oracle import rounding_bounds

    out = []
    bounds: dict[str, dict[str, np.ndarray]] = {}
    for name in sorted(set(arrays) & set(oracle)):
        a = arrays[name]
        if a.dtype.kind != "f":
            continue
        if a.dtype.name not in bounds:
            bounds[a.dtype.name] = rounding_bounds(case.family, case.spec, build_arrays(case), a.dtype.name)
        atol, rtol, source = contract.tolerance_for(a.dtype.name, _n_terms(case))
        e = compare.compare_oracle(name, a, oracle[name], atol=atol, rtol=rtol, source=source,
                                   bound=bounds[a.dtype.name].get(name), normwise=name.startswith("grad"))
        if not e.within_tolerance:
            out.append(Violation("gradient error beyond tolerance", subject, device, context, name,
                                 e.message(), contract.describe(), case))
    return out


def _n_terms(case: Case) -> int:
    # How many terms a gradient element may sum: repeats of an id, or time steps times batch.
    s = case.spec
    if case.family == "embed":
        return max(1, int(np.prod(s["ids_shape"])) if s["ids_shape"] else 1)
    return max(1, int(sum(s["lengths"])))


def _matches(error_type: str, names: Iterable[str]) -> bool:
    return error_type in set(names)


def check_bad_input(rules: Sequence[BadInputRule], case: Case, result: RunResult) -> list[Violation]:
    """A bad input must do what its rule (or, without one, the case's own ``expect``) says."""
    out = []
    subject, device = result.subject, result.device
    kind = device.split(":")[0]
    expect = dict(case.expect or {})
    if not rules and expect.get("kind") == "raises":
        applies = "subjects" not in expect or subject in expect["subjects"]
        devs = expect.get("devices")
        applies = applies and (devs is None or kind in devs)
        if applies:
            rules = [BadInputRule(tag="(case expect)", subjects=(subject,), device=kind, outcome="raises",
                                  errors=tuple(expect.get("errors", ())), reason=expect.get("behaviour", ""))]
    for r in rules:
        got = "no error" if result.error is None else f"{result.error.type} in {result.error.phase}: {result.error.message}"
        if result.status in ("crashed", "timeout"):
            out.append(Violation(f"bad input {r.tag}: the subject {result.status}", subject, device,
                                 result.context, "", got, r.reason, case))
        elif r.outcome == "raises" and (result.error is None or not _matches(result.error.type, r.errors)):
            out.append(Violation(f"bad input {r.tag} must raise {' or '.join(r.errors)}", subject, device,
                                 result.context, "", f"Got: {got}", r.reason, case))
        elif r.outcome == "no_error" and result.error is not None:
            out.append(Violation(f"bad input {r.tag} must not raise", subject, device, result.context, "",
                                 f"Got: {got}", r.reason, case))
    return out


def assert_no_violations(violations: Sequence[Violation]) -> None:
    """Raise ContractViolation with every dossier (first one in full) when there is any violation."""
    if not violations:
        return
    head = f"{len(violations)} contract violation(s)\n\n"
    body = violations[0].dossier()
    rest = "".join(f"\n- {v.kind}: {v.subject} [{v.device}] {v.context} {v.tensor}" for v in violations[1:20])
    raise ContractViolation(head + body + (("\n\nAlso:" + rest) if rest else ""))


# ---- campaign gate -------------------------------------------------------------------------------------
def gate_campaign(run_dir: str, contracts: Contracts) -> list[Violation]:
    """Check every finished task of a campaign directory against the contracts."""
    from harness.core.cases import load_corpus
    from harness.execute.campaign import load_arrays, load_tasks
    from harness.subjects.registry import ORACLE_FOR_FAMILY

    cases = {c.id: c for c in load_corpus(os.path.join(run_dir, "corpus.jsonl"))}
    tasks = load_tasks(run_dir)
    by = {(r["case_id"], r["subject"], r["device"], r["context"]): r for r in tasks.values()}
    arrays_cache: dict[str, dict[str, np.ndarray]] = {}

    def arrays(rec: Mapping[str, Any]) -> dict[str, np.ndarray]:
        f = rec.get("array_file")
        if f not in arrays_cache:
            arrays_cache[f] = load_arrays(run_dir, f)
        return arrays_cache[f]

    out: list[Violation] = []
    for rec in tasks.values():
        if _role(rec["subject"]) == "oracle" or rec["status"] == "skipped":
            continue
        case = cases[rec["case_id"]]
        kind = rec["device"].split(":")[0]
        rules = contracts.bad_rules(rec["subject"], kind, case.tags, rec["context"])
        if case.bad or rules:
            err = rec["errors"][0] if rec["errors"] else None
            from harness.subjects.base import ErrorInfo

            # A task's own status folds crashes and timeouts into "error"; the per-run counts keep them.
            runs = rec.get("statuses", {})
            status = next((s for s in ("crashed", "timeout") if runs.get(s)), "error" if err else "ok")
            res = RunResult(rec["subject"], case.id, rec["device"], rec["context"], status,
                            error=None if err is None else ErrorInfo.from_dict(err))
            out.extend(check_bad_input(rules, case, res))
            continue
        contract = contracts.find(rec["subject"], kind, rec["context"])
        if contract is None:
            out.append(no_contract(rec["subject"], kind, rec["context"], case))
            continue
        if rec["status"] != "ok":
            e = rec["errors"][0] if rec["errors"] else {"type": rec["status"], "message": "", "phase": ""}
            out.append(Violation(f"run {rec['status']}", rec["subject"], rec["device"], rec["context"], "",
                                 f"{e['type']} in {e.get('phase')}: {e['message']}", contract.describe(), case))
            continue
        procs = rec.get("rep_processes", [])
        for name, digests in rec.get("rep_digests", {}).items():
            pool = {d for d, p in zip(digests, procs) if p == "pool"}
            fresh = {d for d, p in zip(digests, procs) if p != "pool"}
            t = rec["tensors"].get(name, {})
            stats = (f"Mismatched elements: {t.get('n_diff')} / {t.get('n_total')} "
                     f"({100 * (t.get('frac_diff') or 0):.1f}%)\nGreatest ULP distance: {t.get('max_ulp')} at index "
                     f"{tuple(t.get('max_ulp_index') or ())}\nUnique results: {t.get('n_unique')} of {t.get('repeats')} runs")
            if contract.reproducible and len(pool) > 1:
                out.append(Violation("not reproducible run to run", rec["subject"], rec["device"], rec["context"],
                                     name, stats, contract.describe(), case))
            elif contract.across_processes and fresh and (fresh | pool) != pool:
                out.append(Violation("not reproducible across processes", rec["subject"], rec["device"],
                                     rec["context"], name, stats, contract.describe(), case))
        for other_ctx in contract.identical_across:
            other = by.get((rec["case_id"], rec["subject"], rec["device"], other_ctx))
            if other is None or other["status"] != "ok" or other_ctx == rec["context"]:
                continue
            out.extend(check_across(contract, case, rec["subject"], rec["device"], rec["context"],
                                    arrays(rec), other_ctx, arrays(other)))
        oname = ORACLE_FOR_FAMILY.get(case.family)
        orec = by.get((case.id, oname, "cpu", "default"))
        if orec is not None and orec["status"] == "ok":
            out.extend(check_oracle(contract, case, rec["subject"], rec["device"], rec["context"], arrays(rec),
                                    arrays(orec)))
    return out


def check_baseline(run_dir: str, baseline_dir: str, contracts: Contracts) -> list[Violation]:
    """Digests the contract says must be stable must equal the baseline's; oracle error must not grow."""
    from harness.core.cases import load_corpus
    from harness.execute.campaign import load_tasks

    cases = {c.id: c for c in load_corpus(os.path.join(run_dir, "corpus.jsonl"))}
    new, old = load_tasks(run_dir), load_tasks(baseline_dir)
    if not old:
        from harness.core.errors import InvalidArgument

        raise InvalidArgument(f"baseline={baseline_dir!r} holds no tasks.jsonl: not a report directory")
    out = []
    for key, rec in new.items():
        base = old.get(key)
        if base is None or rec["status"] != "ok" or base["status"] != "ok":
            continue
        kind = rec["device"].split(":")[0]
        contract = contracts.find(rec["subject"], kind, rec["context"])
        if contract is None or not (contract.reproducible or contract.across_processes):
            continue
        for name, t in rec["tensors"].items():
            b = base["tensors"].get(name)
            if b is not None and b.get("digest") != t.get("digest"):
                out.append(Violation("digest changed against the baseline", rec["subject"], rec["device"],
                                     rec["context"], name,
                                     f"baseline digest {b.get('digest')}\nnew digest      {t.get('digest')}\n"
                                     f"baseline: {baseline_dir}", contract.describe(), cases.get(rec["case_id"])))
    out.extend(_oracle_growth(run_dir, baseline_dir, cases))
    return out


def _oracle_growth(run_dir: str, baseline_dir: str, cases: Mapping[str, Case]) -> list[Violation]:
    """Rows within tolerance in the baseline and beyond it now."""
    base_csv = os.path.join(baseline_dir, "results.csv")
    if not os.path.exists(base_csv):
        return []
    import pandas as pd

    from harness.outputs import tables

    now = tables.results_frame(run_dir)
    base = pd.read_csv(base_csv)
    keys = ["case_id", "subject", "device", "context", "tensor"]
    if "within_tolerance" not in base.columns or "within_tolerance" not in now.columns:
        return []
    m = now.merge(base[keys + ["within_tolerance", "oracle_max_rel"]], on=keys, suffixes=("", "_base"))
    grew = m[(m["within_tolerance_base"] == True) & (m["within_tolerance"] == False)]  # noqa: E712
    return [Violation("gradient error grew beyond tolerance", r.subject, r.device, r.context, r.tensor,
                      f"oracle max rel {r.oracle_max_rel:.3g} (baseline {r.oracle_max_rel_base:.3g})",
                      "oracle tolerance", cases.get(r.case_id)) for r in grew.itertuples()]


def _junit(path: str, checked: Sequence[str], violations: Sequence[Violation], seconds: float) -> None:
    by_case: dict[str, list[Violation]] = {}
    for v in violations:
        by_case.setdefault(f"{v.subject}[{v.device}]::{v.context}", []).append(v)
    names = sorted(set(checked) | set(by_case))
    lines = ['<?xml version="1.0" encoding="utf-8"?>',
             f'<testsuite name="harness-gate" tests="{len(names)}" failures="{len(by_case)}" time="{seconds:.1f}">']
    for n in names:
        vs = by_case.get(n, [])
        lines.append(f'  <testcase classname="harness.outputs.gate" name="{escape(n, {chr(34): "&quot;"})}">')
        if vs:
            msg = escape(vs[0].kind, {'"': "&quot;"})
            lines.append(f'    <failure message="{msg}">{escape(chr(10).join(v.dossier() for v in vs[:5]))}</failure>')
        lines.append("  </testcase>")
    lines.append("</testsuite>")
    from harness.core.fileio import atomic_write

    atomic_write(path, "\n".join(lines) + "\n")


def cmd_contracts_check(args: argparse.Namespace) -> int:
    """``harness contracts check``: 0 when valid, 1 with one line per bad line."""
    from harness.core.contexts import CONTEXTS
    from harness.subjects.registry import SUBJECTS, load_entry_points, load_plugin

    load_entry_points()
    for p in getattr(args, "subject_plugin", None) or ():
        load_plugin(p)
    contracts = load_contracts(args.contracts)
    problems = validate(contracts, SUBJECTS, CONTEXTS)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"contracts check: {len(problems)} problem(s) in {contracts.path}", file=sys.stderr)
        return 1
    print(f"contracts check: {contracts.path}: {len(contracts.contracts)} contracts, "
          f"{len(contracts.bad_inputs)} bad-input rules, all valid")
    return 0


def cmd_gate(args: argparse.Namespace) -> int:
    """``harness gate``: run the gate campaign and check it (and a baseline). 0 / 1 / 2."""
    from harness.core.cases import load_corpus
    from harness.core.contexts import CONTEXTS, get_context
    from harness.generate.corpora import gate_corpus
    from harness.core.devices import parse_devices
    from harness.outputs.report import new_run_dir
    from harness.execute.campaign import Campaign, CampaignSettings, plan
    from harness.subjects.registry import SUBJECTS, load_entry_points, load_plugin, subjects_for

    t0 = time.perf_counter()
    load_entry_points()
    for p in args.subject_plugin or ():
        load_plugin(p)
    contracts = load_contracts(args.contracts)
    problems = validate(contracts, SUBJECTS, CONTEXTS)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        return 2
    cases = load_corpus(args.corpus) if args.corpus else gate_corpus()
    from harness.core.contexts import DEFAULT_CONTEXTS

    contexts = sorted({c.context for c in contracts.contracts if c.context != "*"} |
                      {x for c in contracts.contracts for x in c.identical_across} | set(DEFAULT_CONTEXTS))
    subjects = subjects_for(None)
    run_dir = args.out or new_run_dir()
    camp = Campaign(run_dir, CampaignSettings(repeats=args.repeats, fresh=args.workers_repeats,
                                              plugins=tuple(args.subject_plugin or ()), quiet=args.quiet))
    camp.write_inputs(cases, {"subjects": [s.name for s in subjects], "devices": args.devices.split(","),
                              "contexts": contexts, "gate": True})
    tasks = plan(cases, subjects, parse_devices(args.devices), [get_context(c) for c in contexts])
    camp.run(tasks)
    violations = gate_campaign(run_dir, contracts)
    if args.baseline:
        violations += check_baseline(run_dir, args.baseline, contracts)
    checked = sorted({f"{t.subject}[{t.device}]::{t.context}" for t in tasks})
    if args.junit:
        _junit(args.junit, checked, violations, time.perf_counter() - t0)
    for v in violations[:10]:
        print(v.dossier() + "\n", file=sys.stderr)
    print(f"gate: {len(tasks)} tasks, {len(checked)} subject/device/context checks, "
          f"{len(violations)} violation(s); results in {run_dir}")
    from harness.core.fileio import atomic_json

    atomic_json(os.path.join(run_dir, "violations.json"), [v.to_dict() for v in violations])
    return 1 if violations else 0
