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

from harness.core import argcheck, options
from harness.core.errors import HarnessError
from harness.judge.reproducer import OPTIONS, Reproducer
from harness.judge.reproducer import VERBS as REPRODUCER_VERBS

__all__ = ["main", "build_parser", "options_of"]

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


# ---- the verbs: each one record whose fields declare its options, and one function over it --------------
#: Each verb's options record and function: "module:Record:function".
_RECORDS = {"env": "harness.verbs.env:EnvOptions:env", "subjects": "harness.verbs.subjects:SubjectsOptions:subjects",
            "cases": "harness.verbs.cases:CasesOptions:cases",
            "contracts": "harness.verbs.contracts:ContractsCheckOptions:check",
            "compare": "harness.verbs.compare:CompareOptions:compare",
            "merge": "harness.verbs.compare:MergeOptions:merge", "report": "harness.verbs.report:ReportOptions:report",
            "gate": "harness.verbs.gate:GateOptions:gate", "audit": "harness.verbs.audit:AuditOptions:audit",
            "replay": "harness.verbs.replay:ReplayOptions:replay",
            "shrink": "harness.verbs.shrink:ShrinkOptions:shrink",
            "localize": "harness.verbs.localize:LocalizeOptions:localize",
            "export": "harness.verbs.export:ExportOptions:export",
            "trajectory": "harness.verbs.trajectory:TrajectoryOptions:trajectory",
            "bisect": "harness.verbs.bisect:BisectCommandOptions:bisect_command"}


def _record_of(verb: str) -> tuple[Any, Any]:
    """``verb``'s options record and function."""
    import importlib

    module, record, function = _RECORDS[verb].split(":")
    mod = importlib.import_module(module)
    return getattr(mod, record), getattr(mod, function)


def _record_for(verb: str, args: argparse.Namespace) -> Any:
    """``verb``'s options record from the parsed values (the record checks what needs two options)."""
    fixed: dict[str, Any] = {}
    if verb in REPRODUCER_VERBS:
        fixed["reproducer"] = Reproducer.from_options(verb, vars(args))
    return options.record_from(_record_of(verb)[0], vars(args), **fixed)


def _run_record(verb: str) -> Any:
    """The command of ``verb``: its record from the parsed values, then its function."""
    def run(args: argparse.Namespace) -> int:
        return int(_record_of(verb)[1](_record_for(verb, args)) or 0)

    return run


def options_of(argv: Sequence[str]) -> Any:
    """The options record ``python -m harness *argv`` would run its verb with (every value parsed and checked, the
    rules between options applied), without running it: what a Python caller builds by hand."""
    args = build_parser().parse_args(argv)
    return _record_for(args.verb, args)


# ---- what no single option's check can see -------------------------------------------------------------
def _check_before_work(args: argparse.Namespace) -> None:
    """What no single value's check sees (each value alone was checked by its type=): the environment, and no
    output file among the inputs."""
    from harness.verbs.common import check_environment

    check_environment()  # every variable the harness reads: one line naming a bad one, before any work
    if args.verb in _RECORDS:  # no output is one of the inputs (the fields' file roles say which is which)
        values = vars(args)
        outputs, inputs = options.file_roles(_record_of(args.verb)[0], values)
        if args.verb in REPRODUCER_VERBS:
            inputs.update({o.dest: values.get(o.dest) for o in OPTIONS if args.verb in o.verbs and o.role == "input"})
        argcheck.verb_files_apart(args.verb, outputs, inputs, values.get("plugins") or values.get("subject_plugin"))
    # (a rule between two options is its record's: the verb's options record refuses it as it is built)


# ---- the parser: each verb's from its record's fields --------------------------------------------------
def _verb(sub: Any, name: str, help: str, description: str, codes: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=description, epilog=codes,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _add_record(p: argparse.ArgumentParser, verb: str) -> None:
    """The options ``verb``'s record declares on its fields (:mod:`harness.core.options`), after the reproducer's
    where the verb runs one (the verb's module names its default repeats and fresh runs), and its command."""
    record = _record_of(verb)[0]
    if verb in REPRODUCER_VERBS:
        module = vars(sys.modules[record.__module__])
        for o in OPTIONS:
            if verb in o.verbs:
                shown = module.get(o.dest.upper()) if o.dest in ("repeats", "fresh") else None  # REPEATS, FRESH
                options.add_flag(p, o.flag_for(verb), o.dest, shown)
    options.add_options(p, record)
    p.set_defaults(func=_run_record(verb))


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
    _add_record(e, "env")

    s = _verb(sub, "subjects", "list registered subjects", "List the registered subjects, their family, devices "
              "and declared determinism.", _codes("0  listed"))
    _add_record(s, "subjects")

    c = _verb(sub, "cases", "write a corpus of generated cases", "Generate cases and write them as a JSON-lines "
              "corpus (the same seed writes the same bytes).", _codes("0  written"))
    _add_record(c, "cases")

    r = _verb(sub, "replay", "run one case and print what the judges find",
              "Run one case (from its JSON alone) several times and print, per tensor, whether the repetitions "
              "are bit-identical and how far they are from the oracle; with --contexts A,B or --devices A,B, "
              "also whether B's results are bit-identical to A's (the command a report prints for a finding).",
              _codes("0  bit-identical over the repeats (and across --contexts/--devices) and within the oracle's "
                     "tolerance (or skipped, said so)",
                     "1  a difference: DIFFERS between repeats, contexts or devices, or BEYOND TOLERANCE, or the "
                     "runs disagree (some raised, some did not)",
                     "3  every run raised the same way: an error, not a difference"))
    _add_record(r, "replay")

    rep = _verb(sub, "report", "run a campaign and write the report tables",
                "Run the campaign (every case x subject x device x context, R times in a pooled worker and once "
                "in each of --fresh N fresh workers, the members of the invariance relations beside it) and write "
                "results.csv.gz, summary.md/html and the findings. An existing "
                "run directory is never mixed into: --out must be new or empty; --resume DIR continues one.",
                _codes("0  the report was written (findings are rows, not failures)"))
    _add_record(rep, "report")

    ct = _verb(sub, "contracts", "contracts file tools", "Tools for the determinism contracts file.",
               _codes("0  see the action"))
    ct_sub = ct.add_subparsers(dest="contracts_verb", required=True, metavar="ACTION")
    chk = _verb(ct_sub, "check", "validate a contracts file", "Validate a contracts file against the registered "
                "subjects and contexts.", _codes("0  valid", "1  problems, one line each"))
    _add_record(chk, "contracts")

    g = _verb(sub, "gate", "check a fresh run against the contracts (and a baseline)",
              "Run the gate campaign in worker processes and check every task against the determinism "
              "contracts, and (with --baseline) the digests against a stored run.",
              _codes("0  every check passed", "1  a contract broken (the dossiers are on stderr)"))
    _add_record(g, "gate")

    sh = _verb(sub, "shrink", "reduce a case while the same finding still reproduces",
               "Shrink a case: drop sequences and ids, shorten lengths, lower the vocabulary, sizes and layers, "
               "simplify settings, keeping each step only while the same finding (kind, tensor kind) still "
               "reproduces. Every run is in worker processes. The findings' dossiers print this command.",
               _codes("0  a minimal case was written (or the case was already minimal)",
                      "1  the finding does not reproduce on the case given"))
    _add_record(sh, "shrink")

    a = _verb(sub, "audit", "digest every subject on a corpus into an audit file",
              "Run every subject on a corpus and write an audit file: per case x subject x device x context, the "
              "digest of every tensor and whether the repetitions agreed, with the environment fingerprint.",
              _codes("0  the audit file was written"))
    _add_record(a, "audit")

    cmp_ = _verb(sub, "compare", "what changed between two audit files",
                 "Compare two audit files entry by entry: per subject x device x context, how many tensors "
                 "changed digest, by how much, a verdict, and the environment fields that differ.",
                 _codes("0  compared (with --exit-code: the same: every entry present in both is identical)",
                        "1  with --exit-code: changed (a verdict other than identical, or an entry in one file "
                        "only), as git diff --exit-code"))
    _add_record(cmp_, "compare")

    m = _verb(sub, "merge", "many audit files as one matrix",
              "Merge audit files into one subject/device/context x machine matrix (shards of one run join one "
              "column).", _codes("0  merged and written"))
    _add_record(m, "merge")

    lo = _verb(sub, "localize", "the first Chainer function whose outputs differ",
               "Record a digest of every Chainer function node's inputs and outputs over two runs (repeats, two "
               "contexts or two devices) and name the first node whose outputs differ while its inputs matched.",
               _codes("0  it ran (the localization is printed, also when nothing differed)"))
    _add_record(lo, "localize")

    ex = _verb(sub, "export", "write a standalone script that reproduces a finding",
               "Write one self-contained Python file that reproduces a finding without the harness: it rebuilds "
               "the case's inputs, calls the library as the subject does, checks the finding's claim and exits 1 "
               "while the defect is there. Every finding prints this command beside its replay command.",
               _codes("0  the script was written"))
    _add_record(ex, "export")
    _add_bisect(sub)

    tr = _verb(sub, "trajectory", "train a model case K steps twice: where the runs first differ, and whether "
               "it matters", "Train a model case (family model) K optimizer steps twice in worker processes: run "
               "to run (the default), in fresh processes (--fresh 1), in two contexts (--contexts A,B) or by "
               "another subject (--against S). Print whether every step is bit-identical or the first step that "
               "differs and how far the parameters and losses end apart, beside the same steps from a start one "
               "ULP away in one weight (the training's own instability); with --out, write the table and the "
               "figure.", _codes("0  bit-identical at every step", "1  the runs differ (the line says where "
                                                                         "first and by how much)"))
    _add_record(tr, "trajectory")
    return p


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_before_work(args)
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
    _add_record(b, "bisect")
