"""The command line: ``python -m harness VERB ...``, one function per verb. Nothing imports this module.

Exit codes: 0 done (a finding is not a failure, except for ``gate``), 1 a contract broken
(``gate``, ``contracts check``), 2 usage or set-up error, with a one-line message on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Sequence

from harness.core.errors import HarnessError

__all__ = ["main"]


def _load_plugins(specs: Sequence[str] | None) -> None:
    from harness.subjects.registry import load_entry_points, load_plugin

    load_entry_points()
    for s in specs or ():
        load_plugin(s)


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


# ---- env ------------------------------------------------------------------------------------
def cmd_env(args: argparse.Namespace) -> int:
    from harness.core.env import check_exit, fingerprint

    fp = fingerprint()
    if args.check:
        problems = fp["problems"]
        for p in problems:
            print(f"harness: {p}", file=sys.stderr)
        print(f"harness env: chainer {fp['chainer'].get('version')}, numpy {fp['packages']['numpy']}, "
              f"espnet {fp['packages']['espnet']}, compat patches {fp['compat_patches'] or 'none'}, "
              f"gpu: {fp['gpu']['presence_reason']} (CuPy: {fp['gpu']['reason']})")
        return check_exit(fp)
    if args.json:
        print(json.dumps(fp, indent=2, sort_keys=True))
    else:
        from harness.core.env import flatten_fingerprint

        for k, v in flatten_fingerprint(fp).items():
            print(f"{k:40s} {v}")
    return 0


# ---- subjects ---------------------------------------------------------------------------------
def cmd_subjects(args: argparse.Namespace) -> int:
    from harness.subjects.registry import SUBJECTS

    _load_plugins(args.subject_plugin)
    rows = [s.to_dict() for s in SUBJECTS.values()]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            decl = ", ".join(f"{k}: {'deterministic' if v['deterministic'] else 'nondeterministic' if v['deterministic'] is False else 'unknown'}"
                             for k, v in r["declared"].items())
            print(f"{r['name']:28s} {r['family']:9s} {','.join(r['devices']):8s} {decl}")
    return 0


# ---- cases --------------------------------------------------------------------------------------
def cmd_cases(args: argparse.Namespace) -> int:
    from harness.core.cases import write_corpus
    from harness.generate.strategies import corpus

    cases = corpus(args.family, examples=args.examples, seed=args.seed, profile=args.profile)
    if args.out in (None, "-"):
        for c in cases:
            print(c.to_json())
    else:
        n = write_corpus(cases, args.out)
        print(f"wrote {n} cases to {args.out}", file=sys.stderr)
    return 0


def _read_case(path: str, case_id: str | None) -> Any:
    from harness.core.cases import Case, load_corpus
    from harness.core.errors import CaseError

    if not os.path.exists(path):
        raise CaseError(f"case file={path!r} does not exist")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    stripped = text.strip()
    if "\n" in stripped:  # a corpus
        cases = load_corpus(path)
        if case_id is None:
            raise CaseError(f"{path} holds {len(cases)} cases: pick one with --case-id")
        for c in cases:
            if c.id == case_id:
                return c
        raise CaseError(f"case-id={case_id!r} is not in {path}")
    return Case.from_json(stripped)


# ---- replay --------------------------------------------------------------------------------------
def cmd_replay(args: argparse.Namespace) -> int:
    from harness.judge import bitwise as compare
    from harness.core.contexts import get_context
    from harness.core.devices import parse_device
    from harness.subjects.base import execute
    from harness.subjects.registry import ORACLE_FOR_FAMILY, get_subject

    _load_plugins(args.subject_plugin)
    case = _read_case(args.case, args.case_id)
    subject = get_subject(args.subject)
    device = parse_device(args.device)
    context = get_context(args.context)
    if args.repeats < 1:
        from harness.core.errors import InvalidArgument

        raise InvalidArgument(f"repeats={args.repeats} must be >= 1")
    print(f"case {case.id} ({case.family}), subject {subject.name}, device {device.id}, context {context.name}, "
          f"{args.repeats} repeats")
    results = [execute(subject, case, device, context) for _ in range(args.repeats)]
    statuses = [r.status for r in results]
    if results[0].status == "skipped":
        print(f"skipped: {results[0].skip_reason}")
        return 0
    for r in results:
        if r.error is not None:
            print(f"error: {r.error}")
            break
    warned = sorted({w for r in results for w in r.declared_warnings})
    print(f"statuses: {', '.join(f'{s} x{statuses.count(s)}' for s in sorted(set(statuses)))}; "
          f"chainer declared nondeterminism: {', '.join(warned) or 'none'}")
    ok = [r.arrays for r in results if r.ok]
    if not ok:
        return 0
    comps = compare.compare_results(ok)
    oracle = None
    oname = ORACLE_FOR_FAMILY.get(case.family)
    if oname and oname != subject.name:
        o = execute(get_subject(oname), case, parse_device("cpu"), get_context("default"))
        oracle = o.arrays if o.ok else None
    for name, c in comps.items():
        line = (f"  {name:18s} {c.dtype:8s} {str(c.shape):14s} "
                f"{'bit-identical' if c.bitwise_identical else 'DIFFERS'} over {c.repeats}"
                f"  digest {c.digests[0][:12]}")
        if not c.bitwise_identical:
            line += f"  n_diff {c.n_diff}/{c.n_total} max_ulp {c.max_ulp}"
        if oracle is not None and name in oracle:
            e = compare.compare_oracle(name, ok[0][name], oracle[name])
            line += f"  oracle max_rel {e.max_rel:.3g} ({'ok' if e.within_tolerance else 'BEYOND TOLERANCE'})"
        print(line)
    for name, c in comps.items():
        if not c.bitwise_identical:
            print()
            print(c.message())
    return 0


# ---- report ----------------------------------------------------------------------------------------
def cmd_report(args: argparse.Namespace) -> int:
    from harness.generate.corpora import default_corpus
    from harness.outputs.report import run_report

    _load_plugins(args.subject_plugin)
    return run_report(args, default_corpus)


def _add_campaign_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--subjects", help="comma list of subject names (default: all)")
    p.add_argument("--devices", default="all", help="cpu, gpu, gpu:N, all (default: cpu and every GPU present)")
    p.add_argument("--contexts", help="comma list of context names (default: the default set)")
    p.add_argument("--repeats", type=int, default=5, help="in-process repetitions R (default 5)")
    p.add_argument("--workers-repeats", type=int, default=2, help="fresh-process repetitions K (default 2)")
    p.add_argument("--examples", type=int, default=None, help="generated examples per family")
    p.add_argument("--seed", type=int, default=20261202, help="corpus seed")
    p.add_argument("--corpus", help="a corpus .jsonl to run instead of generating one")
    p.add_argument("--out", help="output directory (default reports/<run-id>)")
    p.add_argument("--subject-plugin", action="append", default=[], metavar="MOD:OBJ")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per run before the worker is killed")
    p.add_argument("--resume", metavar="DIR", help="continue an interrupted campaign in DIR")
    p.add_argument("--shard", help="run shard i/n of the corpus")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-localize", action="store_true", help="do not localize findings")


# ---- dispatch ---------------------------------------------------------------------------------------
def _lazy(module: str, func: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import importlib

        return int(getattr(importlib.import_module(module), func)(args) or 0)

    return run


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    e = sub.add_parser("env", help="the environment fingerprint")
    e.add_argument("--json", action="store_true")
    e.add_argument("--check", action="store_true", help="one line per set-up problem; exit 2 if unusable")
    e.set_defaults(func=cmd_env)

    s = sub.add_parser("subjects", help="list registered subjects")
    s.add_argument("--json", action="store_true")
    s.add_argument("--subject-plugin", action="append", default=[], metavar="MOD:OBJ")
    s.set_defaults(func=cmd_subjects)

    c = sub.add_parser("cases", help="write a corpus of generated cases")
    c.add_argument("--family", default="all", choices=["embed", "lstm", "pipeline", "all"])
    c.add_argument("--examples", type=int, default=20)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--profile", default="ci", choices=["ci", "dev", "audit"])
    c.add_argument("--out")
    c.set_defaults(func=cmd_cases)

    r = sub.add_parser("replay", help="run one case and print what the comparator finds")
    r.add_argument("case", metavar="CASE.json")
    r.add_argument("--case-id")
    r.add_argument("--subject", required=True)
    r.add_argument("--device", default="cpu")
    r.add_argument("--context", default="default")
    r.add_argument("--repeats", type=int, default=5)
    r.add_argument("--subject-plugin", action="append", default=[], metavar="MOD:OBJ")
    r.set_defaults(func=cmd_replay)

    rep = sub.add_parser("report", help="run a campaign and write the report tables")
    _add_campaign_options(rep)
    rep.set_defaults(func=cmd_report)

    ct = sub.add_parser("contracts", help="contracts file tools")
    ct_sub = ct.add_subparsers(dest="contracts_verb", required=True, metavar="ACTION")
    chk = ct_sub.add_parser("check", help="validate a contracts file")
    chk.add_argument("--contracts", help="contracts TOML (default: the shipped one)")
    chk.add_argument("--subject-plugin", action="append", default=[], metavar="MOD:OBJ")
    chk.set_defaults(func=_lazy("harness.outputs.gate", "cmd_contracts_check"))

    g = sub.add_parser("gate", help="check a fresh run against the contracts (and a baseline)")
    g.add_argument("--contracts")
    g.add_argument("--baseline", metavar="DIR", help="a stored report to compare digests with")
    g.add_argument("--devices", default="all")
    g.add_argument("--corpus")
    g.add_argument("--out")
    g.add_argument("--junit", metavar="FILE")
    g.add_argument("--repeats", type=int, default=3)
    g.add_argument("--workers-repeats", type=int, default=1)
    g.add_argument("--subject-plugin", action="append", default=[], metavar="MOD:OBJ")
    g.add_argument("--quiet", action="store_true")
    g.set_defaults(func=_lazy("harness.outputs.gate", "cmd_gate"))

    a = sub.add_parser("audit", help="digest every subject on a corpus into an audit file")
    a.add_argument("--corpus")
    a.add_argument("--devices", default="all")
    a.add_argument("--contexts", default="default")
    a.add_argument("--out", required=True)
    a.add_argument("--keep-arrays", metavar="DIR")
    a.add_argument("--shard")
    a.add_argument("--repeats", type=int, default=2)
    a.add_argument("--subjects")
    a.add_argument("--subject-plugin", action="append", default=[], metavar="MOD:OBJ")
    a.add_argument("--quiet", action="store_true")
    a.set_defaults(func=_lazy("harness.outputs.audit", "cmd_audit"))

    cmp_ = sub.add_parser("compare", help="what changed between two audit files")
    cmp_.add_argument("a", metavar="A.json")
    cmp_.add_argument("b", metavar="B.json")
    cmp_.add_argument("--out", metavar="DIR")
    cmp_.set_defaults(func=_lazy("harness.outputs.audit", "cmd_compare"))

    m = sub.add_parser("merge", help="many audit files as one matrix")
    m.add_argument("files", nargs="+", metavar="AUDIT.json")
    m.add_argument("--out", metavar="DIR", required=True)
    m.set_defaults(func=_lazy("harness.outputs.audit", "cmd_merge"))

    lo = sub.add_parser("localize", help="the first Chainer function whose outputs differ", add_help=False)
    lo.add_argument("rest", nargs=argparse.REMAINDER)
    lo.set_defaults(func=lambda a: __import__("harness.outputs.localize", fromlist=["main_localize"]).main_localize(a.rest))

    b = sub.add_parser("bench", help="measure the harness against the bare computation")
    b.add_argument("--out", metavar="DIR")
    b.add_argument("--quick", action="store_true", help="smaller sizes, for tests")
    b.set_defaults(func=_lazy("harness.outputs.bench", "cmd_bench"))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HarnessError as exc:
        print(f"harness: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("harness: interrupted; finished rows are on disk (use --resume DIR)", file=sys.stderr)
        return 130
