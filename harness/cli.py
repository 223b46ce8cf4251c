"""Check that Chainer's embeddings and LSTMs give the same bits every time, on every device and setting.

``python -m harness VERB --help`` explains each verb. Every verb checks all its arguments before it
starts any work; a bad one is a single ``harness: error: ...`` line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from typing import Any, NoReturn, Sequence

from harness.cli_options import add_options, add_reproducer, checked
from harness.core import argcheck, options
from harness.core.errors import HarnessError, InvalidArgument
from harness.judge.reproducer import Reproducer

__all__ = ["main", "build_parser"]

_DESCRIPTION = """\
Check that Chainer's embeddings (F.embed_id, L.EmbedID, ESPnet's deterministic EmbedID) and LSTMs
(NStepLSTM and friends) give the same bits every time: run generated cases repeatedly on CPU and GPU,
in fresh processes and under different settings, and compare the bits and the error against a float64
oracle.

  python -m harness report            run the default campaign, write tables under reports/
  python -m harness gate              check the determinism contracts (for CI; exit 1 when broken)
  python -m harness replay CASE.json  rerun one case and show what differs
"""

_COMMON_CODES = "  2  a usage or set-up error (one line on stderr, nothing run)\n  130  interrupted"


def _codes(*lines: str) -> str:
    return "Exit codes:\n" + "".join(f"  {ln}\n" for ln in lines) + _COMMON_CODES


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (``harness: error: VERB: ...``), exit code 2."""

    def error(self, message: str) -> NoReturn:
        verb = self.prog.removeprefix("python -m harness").strip()
        where = f"{verb}: " if verb else ""
        self.exit(2, f"harness: error: {where}{message} (see python -m harness {verb} --help)\n".replace("  ", " "))


# ---- the verbs: each builds its options record from the options given (the record holds the defaults) ----
def _given_values(args: argparse.Namespace, *dests: str, **fields: str) -> dict[str, Any]:
    """``{field: value}`` of the options the command line gave: ``dests`` by their own name, ``fields`` by
    another (``plugins="subject_plugin"``); a list becomes a tuple."""
    pairs = [(d, d) for d in dests] + list(fields.items())
    return {f: tuple(v) if isinstance(v, list) else v
            for f, d in pairs if d in args._given for v in (getattr(args, d),)}


def cmd_env(args: argparse.Namespace) -> int:
    from harness.verbs.env import EnvOptions, env

    return env(EnvOptions(**_given_values(args, "json", "check")))


def cmd_subjects(args: argparse.Namespace) -> int:
    from harness.verbs.subjects import SubjectsOptions, subjects

    return subjects(SubjectsOptions(**_given_values(args, "json", plugins="subject_plugin")))


def cmd_cases(args: argparse.Namespace) -> int:
    from harness.verbs.cases import CasesOptions, cases

    return cases(CasesOptions(**_given_values(args, "family", "examples", "seed", "profile", "out", "coverage",
                                              "corpus")))


def cmd_contracts_check(args: argparse.Namespace) -> int:
    from harness.verbs.contracts import ContractsCheckOptions, check

    return check(ContractsCheckOptions(**_given_values(args, "contracts", plugins="subject_plugin")))


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.verbs.compare import CompareOptions, compare

    return compare(CompareOptions(**_given_values(args, "a", "b", "out", "exit_code")))


def cmd_merge(args: argparse.Namespace) -> int:
    from harness.verbs.compare import MergeOptions, merge

    return merge(MergeOptions(**_given_values(args, "files", "out")))


def cmd_report(args: argparse.Namespace) -> int:
    from harness.verbs.report import ReportOptions, report

    return report(options.record_from(ReportOptions, vars(args), **_given_values(
        args, "subjects", "devices", "contexts", "repeats", "fresh", "jobs", "timeout", "relations", "examples", "seed",
        "corpus", "shard", "profile", "max_case_bytes", "keep", "keep_arrays", "out", "resume", "quiet",
        "shrink_budget", plugins="subject_plugin"), localize=not args.no_localize, shrink=not args.no_shrink))


def cmd_audit(args: argparse.Namespace) -> int:
    from harness.verbs.audit import AuditOptions, audit

    return audit(options.record_from(AuditOptions, vars(args), **_given_values(
        args, "out", "corpus", "devices", "contexts", "keep_arrays", "shard", "repeats", "jobs", "subjects", "quiet",
        "profile", plugins="subject_plugin")))


def cmd_gate(args: argparse.Namespace) -> int:
    from harness.verbs.gate import GateOptions, gate

    return gate(options.record_from(GateOptions, vars(args), **_given_values(
        args, "contracts", "baseline", "devices", "corpus", "out", "junit", "repeats", "fresh", "jobs", "quiet",
        "shrink_budget", "profile", plugins="subject_plugin"), shrink=not args.no_shrink))


# ---- replay, shrink, localize, export: the verbs of one reproducer -------------------------------------
def _reproducer(verb: str, args: argparse.Namespace) -> Reproducer:
    return Reproducer.from_options(verb, vars(args))


def _record(cls: Any, verb: str, args: argparse.Namespace, *dests: str) -> Any:
    """``verb``'s options record: its reproducer, and ``dests`` where the command line gave them (the record
    holds the defaults)."""
    given = {d: getattr(args, d) for d in dests if d in args._given}
    return cls(_reproducer(verb, args), **given)


def cmd_replay(args: argparse.Namespace) -> int:
    from harness.verbs.replay import ReplayOptions, replay

    return replay(_record(ReplayOptions, "replay", args, "timeout", "max_case_bytes"))


def cmd_shrink(args: argparse.Namespace) -> int:
    from harness.verbs.shrink import ShrinkOptions, shrink

    return shrink(_record(ShrinkOptions, "shrink", args, "budget", "max_runs", "timeout", "out", "quiet",
                          "max_case_bytes"))


def cmd_localize(args: argparse.Namespace) -> int:
    from harness.verbs.localize import LocalizeOptions, localize

    return localize(_record(LocalizeOptions, "localize", args, "json", "timeout", "max_case_bytes"))


def cmd_trajectory(args: argparse.Namespace) -> int:
    from harness.verbs.trajectory import TrajectoryOptions, trajectory

    if args.subject is None:
        raise InvalidArgument("trajectory needs --subject S (a model subject: python -m harness subjects)")
    given = _given_values(args, "case_id", "fresh", "against", "steps", "out", "timeout", "max_case_bytes",
                          plugins="subject_plugin")
    contexts = argcheck.name_list("contexts", args.contexts) or []
    return trajectory(TrajectoryOptions(args.case, args.subject, contexts=tuple(contexts),
                                        localize=not args.no_localize, **given))


def cmd_export(args: argparse.Namespace) -> int:
    import importlib

    export = importlib.import_module("harness.verbs.export")  # (written beside this verb's parser)
    return int(export.export(export.ExportOptions(_reproducer("export", args), out=args.out,
                                                  markdown=args.markdown)) or 0)


# ---- what the option table cannot check alone, and what the command line gave ---------------------------
def _check_combinations(args: argparse.Namespace) -> None:
    """The checks that need two options (each value alone was checked by its type=)."""
    from harness.verbs.common import check_environment

    check_environment()  # every variable the harness reads: one line naming a bad one, before any work
    argcheck.verb_outputs_apart(args.verb, vars(args))
    # (a rule between two options is its record's: the verb's options record refuses it as it is built)


def _given_dests(args: argparse.Namespace) -> set[str]:
    """The options the command line gave: every one left out parsed as None (a switch as False, a repeatable
    option as [])."""
    return {k for k, v in vars(args).items() if v is not None and v is not False and v != []}


# ---- the parser: each option from the one table (harness.cli_options) ------------------------------------
def _verb(sub: Any, name: str, help: str, description: str, codes: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=description, epilog=codes,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _add_record(p: argparse.ArgumentParser, verb: str) -> None:
    """The options ``verb``'s record declares on its fields (:mod:`harness.core.options`)."""
    import importlib

    from harness.cli_options import RECORDS

    module, _, name = RECORDS[verb].partition(":")
    options.add_options(p, getattr(importlib.import_module(module), name))


def build_parser() -> argparse.ArgumentParser:
    """The one argparse tree of every verb."""
    p = _Parser(prog="python -m harness", description=_DESCRIPTION, epilog=_codes(
        "0  done (see each verb's --help for what else it may return)", "1  a finding that fails the verb "
        "(gate, contracts check, replay, shrink, compare --exit-code, bisect)", "3  replay: every run raised the "
        "same way (an error reproduced, not a difference)"), formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    e = _verb(sub, "env", "the environment fingerprint", "Print the environment fingerprint: Python, Chainer, "
              "NumPy, CuPy, CUDA, BLAS, GPU, environment variables.",
              _codes("0  printed (with --check: the CPU stack is usable)",
                     "2  with --check: Chainer or ESPnet unusable"))
    add_options(e, "env", "--json", "--check")
    e.set_defaults(func=cmd_env)

    s = _verb(sub, "subjects", "list registered subjects", "List the registered subjects, their family, devices "
              "and declared determinism.", _codes("0  listed"))
    add_options(s, "subjects", "--json", "--subject-plugin")
    s.set_defaults(func=cmd_subjects)

    c = _verb(sub, "cases", "write a corpus of generated cases", "Generate cases and write them as a JSON-lines "
              "corpus (the same seed writes the same bytes).", _codes("0  written"))
    add_options(c, "cases", "--family", "--examples", "--seed", "--profile", "--out", "--coverage", "--corpus")
    c.set_defaults(func=cmd_cases)

    r = _verb(sub, "replay", "run one case and print what the judges find",
              "Run one case (from its JSON alone) several times and print, per tensor, whether the repetitions "
              "are bit-identical and how far they are from the oracle; with --contexts A,B or --devices A,B, "
              "also whether B's results are bit-identical to A's (the command a report prints for a finding).",
              _codes("0  bit-identical over the repeats (and across --contexts/--devices) and within the oracle's "
                     "tolerance (or skipped, said so)",
                     "1  a difference: DIFFERS between repeats, contexts or devices, or BEYOND TOLERANCE, or the "
                     "runs disagree (some raised, some did not)",
                     "3  every run raised the same way: an error, not a difference"))
    add_reproducer(r, "replay", "--timeout", "--max-case-bytes")
    r.set_defaults(func=cmd_replay)

    rep = _verb(sub, "report", "run a campaign and write the report tables",
                "Run the campaign (every case x subject x device x context, R times in a pooled worker and once "
                "in each of --fresh N fresh workers, the members of the invariance relations beside it) and write "
                "results.csv.gz, summary.md/html and the findings. An existing "
                "run directory is never mixed into: --out must be new or empty; --resume DIR continues one.",
                _codes("0  the report was written (findings are rows, not failures)"))
    add_options(rep, "report", "--subjects", "--devices", "--contexts", "--repeats", "--fresh", "--jobs", "--relations",
                "--max-case-bytes", "--keep", "--keep-arrays", "--examples", "--seed", "--corpus", "--out",
                "--subject-plugin", "--timeout", "--resume", "--shard", "--quiet", "--no-localize", "--profile",
                "--shrink-budget", "--no-shrink")
    _add_record(rep, "report")
    rep.set_defaults(func=cmd_report)

    ct = _verb(sub, "contracts", "contracts file tools", "Tools for the determinism contracts file.",
               _codes("0  see the action"))
    ct_sub = ct.add_subparsers(dest="contracts_verb", required=True, metavar="ACTION")
    chk = _verb(ct_sub, "check", "validate a contracts file", "Validate a contracts file against the registered "
                "subjects and contexts.", _codes("0  valid", "1  problems, one line each"))
    add_options(chk, "contracts", "--contracts", "--subject-plugin")
    chk.set_defaults(func=cmd_contracts_check)

    g = _verb(sub, "gate", "check a fresh run against the contracts (and a baseline)",
              "Run the gate campaign in worker processes and check every task against the determinism "
              "contracts, and (with --baseline) the digests against a stored run.",
              _codes("0  every check passed", "1  a contract broken (the dossiers are on stderr)"))
    add_options(g, "gate", "--contracts", "--baseline", "--devices", "--corpus", "--out", "--junit", "--repeats",
                "--fresh", "--jobs", "--subject-plugin", "--quiet", "--shrink-budget", "--no-shrink", "--profile")
    _add_record(g, "gate")
    g.set_defaults(func=cmd_gate)

    sh = _verb(sub, "shrink", "reduce a case while the same finding still reproduces",
               "Shrink a case: drop sequences and ids, shorten lengths, lower the vocabulary, sizes and layers, "
               "simplify settings, keeping each step only while the same finding (kind, tensor kind) still "
               "reproduces. Every run is in worker processes. The findings' dossiers print this command.",
               _codes("0  a minimal case was written (or the case was already minimal)",
                      "1  the finding does not reproduce on the case given"))
    add_reproducer(sh, "shrink", "--budget", "--max-runs", "--timeout", "--out", "--quiet", "--max-case-bytes")
    sh.set_defaults(func=cmd_shrink)

    a = _verb(sub, "audit", "digest every subject on a corpus into an audit file",
              "Run every subject on a corpus and write an audit file: per case x subject x device x context, the "
              "digest of every tensor and whether the repetitions agreed, with the environment fingerprint.",
              _codes("0  the audit file was written"))
    add_options(a, "audit", "--corpus", "--devices", "--contexts", "--out", "--keep-arrays", "--shard", "--repeats",
                "--jobs", "--subjects", "--subject-plugin", "--quiet", "--profile")
    _add_record(a, "audit")
    a.set_defaults(func=cmd_audit)

    cmp_ = _verb(sub, "compare", "what changed between two audit files",
                 "Compare two audit files entry by entry: per subject x device x context, how many tensors "
                 "changed digest, by how much, a verdict, and the environment fields that differ.",
                 _codes("0  compared (with --exit-code: the same: every entry present in both is identical)",
                        "1  with --exit-code: changed (a verdict other than identical, or an entry in one file "
                        "only), as git diff --exit-code"))
    cmp_.add_argument("a", metavar="A.json", type=checked("a", argcheck.readable_file), help="the first audit file")
    cmp_.add_argument("b", metavar="B.json", type=checked("b", argcheck.readable_file), help="the second audit file")
    add_options(cmp_, "compare", "--out", "--exit-code")
    cmp_.set_defaults(func=cmd_compare)

    m = _verb(sub, "merge", "many audit files as one matrix",
              "Merge audit files into one subject/device/context x machine matrix (shards of one run join one "
              "column).", _codes("0  merged and written"))
    m.add_argument("files", nargs="+", metavar="AUDIT.json", type=checked("files", argcheck.readable_file),
                   help="audit files")
    add_options(m, "merge", "--out")
    m.set_defaults(func=cmd_merge)

    lo = _verb(sub, "localize", "the first Chainer function whose outputs differ",
               "Record a digest of every Chainer function node's inputs and outputs over two runs (repeats, two "
               "contexts or two devices) and name the first node whose outputs differ while its inputs matched.",
               _codes("0  it ran (the localization is printed, also when nothing differed)"))
    add_reproducer(lo, "localize", "--json", "--max-case-bytes", "--timeout")
    lo.set_defaults(func=cmd_localize)

    ex = _verb(sub, "export", "write a standalone script that reproduces a finding",
               "Write one self-contained Python file that reproduces a finding without the harness: it rebuilds "
               "the case's inputs, calls the library as the subject does, checks the finding's claim and exits 1 "
               "while the defect is there. Every finding prints this command beside its replay command.",
               _codes("0  the script was written"))
    add_reproducer(ex, "export", "--out", "--markdown")
    ex.set_defaults(func=cmd_export)
    _add_bisect(sub)

    tr = _verb(sub, "trajectory", "train a model case K steps twice: where the runs first differ, and whether "
               "it matters", "Train a model case (family model) K optimizer steps twice in worker processes: run "
               "to run (the default), in fresh processes (--fresh 1), in two contexts (--contexts A,B) or by "
               "another subject (--against S). Print whether every step is bit-identical or the first step that "
               "differs and how far the parameters and losses end apart, beside the same steps from a start one "
               "ULP away in one weight (the training's own instability); with --out, write the table and the "
               "figure.", _codes("0  bit-identical at every step", "1  the runs differ (the line says where "
                                                                         "first and by how much)"))
    add_options(tr, "trajectory", "case", "--case-id", "--subject", "--subject-plugin", "--contexts", "--fresh",
                "--against", "--steps", "--out", "--timeout", "--max-case-bytes", "--no-localize")
    tr.set_defaults(func=cmd_trajectory)
    return p


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args._given = _given_dests(args)
    try:
        _check_combinations(args)
        return int(args.func(args) or 0)
    except HarnessError as exc:
        print(f"harness: error: {type(exc).__name__}: {_first_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("harness: interrupted; finished rows are on disk (use --resume DIR)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `harness replay ... | head`: the reader left. Point stdout at /dev/null so that Python's own flush at
        # exit does not raise again; the verb's result no longer has a reader, so no exit code can mislead.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell pipeline reports it
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(f"harness: error: disk full: {exc.strerror} writing {exc.filename or 'a file'}; what finished is "
              f"kept (a report continues with --resume DIR)", file=sys.stderr)
        return 2
    except SystemExit as exc:
        # argparse has already run: a SystemExit now comes from code the harness called (a plug-in, a library),
        # never from the verb itself, and must not pass for the verb's own exit code (0 reads "identical").
        print(f"harness: error: a plug-in or library ended the process (SystemExit({exc.code!r})) while "
              f"{args.verb} ran: nothing it would have written "
              f"can be trusted", file=sys.stderr)
        return 2


def _add_bisect(sub: Any) -> None:
    """``harness bisect``: its options, and the one place they become a :class:`BisectOptions`."""
    b = _verb(sub, "bisect", "which package and release changes a case's bits",
              "Between two environments that disagree on a case (pins, or two fingerprints: a run or baseline "
              "directory, environment.json, an audit file), install each side in throwaway environments and run "
              "the case's exported reproducer there (--save-outputs), change one package at a time to find which "
              "one changes the bits, then bisect its releases between the two pins and name the first that does. "
              "The CPU, the OpenBLAS kernels and BLAS threads and the variables the harness sets are pinned in "
              "every probe and named with the answer (--env pins more).",
              _codes("0  the two ends agree on the case", "1  a package and release named (or several packages "
                     "change the bits only together)", "2  bad input, an end that cannot be installed or run "
                     "(its cause's line), or an error at both ends"))
    add_options(b, "bisect", "case", "--case-id", "--subject", "--context", "--subject-plugin")  # the reproducer's
    add_options(b, "bisect", "--good", "--good-env", "--bad", "--bad-env", "--env", "--cache", "--find-links",
                "--no-index", "--installer", "--timeout", "--quiet")

    def run(args: argparse.Namespace) -> int:
        from harness.upstream.bisect import parse_pins, pins_from_environment
        from harness.upstream.bisect_conditions import parse_env
        from harness.verbs.bisect import BisectOptions, bisect

        found = {e: pins_from_environment(getattr(args, f"{e}_env")) if getattr(args, f"{e}_env") else {}
                 for e in ("good", "bad")}
        shared = set(found["good"]) & set(found["bad"])  # a fingerprint may list a package the other lacks
        ends = {e: {**{n: found[e][n] for n in shared}, **parse_pins(getattr(args, e) or [], e)} for e in found}
        for end, pins in ends.items():
            if not pins:
                raise InvalidArgument(f"{end}: no pins (give --{end} NAME==VERSION or --{end}-env PATH)")
        return bisect(BisectOptions(
            good=ends["good"], bad=ends["bad"], env=parse_env(args.env or []),
            **_given_values(args, "case", "subject", "case_id", "context", "cache", "no_index", "installer",
                            "timeout", "quiet", "find_links", plugins="subject_plugin")))

    b.set_defaults(func=run)
