"""Check that Chainer's embeddings and LSTMs give the same bits every time, on every device and setting.

``python -m harness VERB --help`` explains each verb. Every verb checks all its arguments before it
starts any work; a bad one is a single ``harness: error: ...`` line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NoReturn, Sequence

from harness.core import argcheck, rundir
from harness.core.errors import HarnessError, InvalidArgument
from harness.judge.reproducer import OPTION, OPTIONS, Option, Reproducer

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

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
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


def _cluster(args: argparse.Namespace) -> Any:
    from harness.outputs.fleet import ClusterOptions

    return ClusterOptions(**_given_values(args, "spread", address="cluster", workers="cluster_workers"))


def cmd_report(args: argparse.Namespace) -> int:
    from harness.verbs.report import ReportOptions, report

    return report(ReportOptions(**_given_values(args, "subjects", "devices", "contexts", "repeats", "fresh", "jobs",
                                                "timeout", "relations", "examples", "seed", "corpus", "shard",
                                                "profile", "max_case_bytes", "keep", "keep_arrays", "out", "resume",
                                                "quiet", "shrink_budget", plugins="subject_plugin"),
                                localize=not args.no_localize, shrink=not args.no_shrink, cluster=_cluster(args)))


def cmd_audit(args: argparse.Namespace) -> int:
    from harness.verbs.audit import AuditOptions, audit

    return audit(AuditOptions(**_given_values(args, "out", "corpus", "devices", "contexts", "keep_arrays", "shard",
                                              "repeats", "jobs", "subjects", "quiet", "profile",
                                              plugins="subject_plugin"), cluster=_cluster(args)))


def cmd_gate(args: argparse.Namespace) -> int:
    from harness.verbs.gate import GateOptions, gate

    return gate(GateOptions(**_given_values(args, "contracts", "baseline", "devices", "corpus", "out", "junit",
                                            "repeats", "fresh", "jobs", "quiet", "shrink_budget", "profile",
                                            plugins="subject_plugin"),
                            shrink=not args.no_shrink, cluster=_cluster(args)))


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


def cmd_export(args: argparse.Namespace) -> int:
    import importlib

    export = importlib.import_module("harness.verbs.export")  # (written beside this verb's parser)
    return int(export.export(export.ExportOptions(_reproducer("export", args), out=args.out,
                                                  markdown=args.markdown)) or 0)


# ---- the argument vocabulary: every single value is checked while the command line is read ----------
# Each option's type= is built here from harness.core.argcheck (or a registry's own parser); a bad value is
# argparse's one-line usage error (exit 2) before any verb starts, and no verb checks it again. A check that
# needs two options, or the plug-ins loaded, is in _check_combinations or the verb.
def _checked(name: str, check: Callable[[str, Any], Any]) -> Callable[[str], str]:
    """``type=`` that checks the text and keeps it as it is (the verbs read the text)."""
    def keep(n: str, text: str) -> str:
        check(n, text)
        return text

    return argcheck.converter(name, keep)


def _contexts(name: str, text: str) -> None:
    from harness.core.contexts import get_context

    for n in argcheck.name_list(name, text) or ():
        get_context(n)  # UnknownContext names the known ones


def _relations(name: str, text: str) -> None:
    from harness.execute.relations import parse_relations

    parse_relations(",".join(argcheck.name_list(name, text) or ()))  # '' names nothing: refused, as --subjects ''


def _one_relation(name: str, text: str) -> None:
    from harness.execute.relations import get_relation

    get_relation(text)


def _one_context(name: str, text: str) -> None:
    from harness.core.contexts import get_context

    get_context(text)


def _one_device(name: str, text: str) -> None:
    from harness.core.devices import parse_device

    parse_device(text)


def _one_of(*values: str) -> Callable[[str, str], None]:
    def check(name: str, text: str) -> None:
        if text not in values:
            raise InvalidArgument(f"{name}={text!r} must be one of {', '.join(values)}")

    return check


def _out_file(name: str, text: str) -> None:
    if text != "-":
        argcheck.writable_file(name, text)


def _non_negative_seconds(name: str) -> Callable[[str], float]:
    return argcheck.converter(name, lambda n, v: 0.0 if v == 0 else argcheck.positive_seconds(n, v), float,
                              "a number of seconds")


def _corpus_seed() -> int:
    from harness.generate.corpora import DEFAULT_SEED

    return DEFAULT_SEED


def _profiles() -> list[str]:
    from harness.generate.profiles import PROFILES

    return list(PROFILES)


def _check_combinations(args: argparse.Namespace) -> None:
    """The checks that need two options (each value alone was checked by its type=)."""
    given = args._given
    argcheck.verb_outputs_apart(args.verb, vars(args))
    argcheck.mode_ignores(args.verb, vars(args), given)
    if "profile" in given and args.verb in ("gate", "audit"):  # (a report's record checks its own)
        argcheck.profile_or_corpus(args.profile, getattr(args, "corpus", None))
    if hasattr(args, "cluster") and args.cluster is None:
        if "cluster_workers" in given:
            raise InvalidArgument(f"cluster-workers={args.cluster_workers} needs --cluster local (without "
                                  f"--cluster the local worker pool runs the tasks)")
        if getattr(args, "spread", None) not in (None, "shard"):
            raise InvalidArgument(f"spread={args.spread!r} needs --cluster (one campaign per cluster worker)")


# ---- the parser -------------------------------------------------------------------------------------
# Every option is declared once: the reproducer's from harness.judge.reproducer.OPTIONS, every other one in
# _options() below, each with one help text (its default, which may differ by verb, is filled in from
# _defaults()). A value the command line leaves out parses as None, so that "given" and "left out" differ
# (--resume compares only what was given): each verb's options record holds its defaults.
@dataclass(frozen=True)
class _Opt:
    """One option of the verbs beside the reproducer's: its help text and value check (by verb where the
    verbs read the value differently: ``--out`` is a directory for some, a file for others)."""

    help: str
    check: Callable[[str], Any] | Mapping[str, Callable[[str], Any]] | None = None
    metavar: str | None = None
    switch: bool = False
    choices: tuple[str, ...] | None = None
    required: tuple[str, ...] = ()     # the verbs that need it


def _options() -> dict[str, _Opt]:
    seconds = argcheck.seconds
    keep_arrays = ("findings", "all")
    return {
        "--json": _Opt("print it as JSON", switch=True),
        "--check": _Opt("one line per set-up problem; exit 2 if unusable", switch=True),
        "--family": _Opt("which family of cases (default {default})", choices=("embed", "lstm", "pipeline", "all")),
        "--examples": _Opt("generated examples per family, >= 1 (default {default}; not with --corpus)",
                           argcheck.ints("examples", 1)),
        "--seed": _Opt("the corpus seed (default {default}; not with --corpus)", argcheck.ints("seed", 0)),
        "--profile": _Opt("sizes and counts of the generated cases, the pytest profiles' names: ci (the default "
                          "corpus), dev, audit (more and larger cases), realistic (real model shapes from "
                          "published recipes; fewer repeats); not with --corpus; cases --coverage: the profile's "
                          "default corpus (default {default})",
                          choices=tuple(_profiles())),
        "--corpus": _Opt("a corpus .jsonl to run instead of generating one (cases --coverage: to read; default: "
                         "the verb's own corpus)", _checked("corpus", argcheck.readable_file), metavar="FILE"),
        "--coverage": _Opt("print which edge kinds, size boundaries and recipe configurations a corpus reaches "
                           "(the profile's default corpus, or --corpus FILE) instead of writing cases", switch=True),
        "--out": _Opt("where to write: report and gate, a new (absent or empty) run directory (default "
                      "reports/<run-id>); compare and merge, the directory of their tables; cases, the corpus file "
                      "(default or '-': stdout); shrink, the minimal case (default: beside CASE.json, named by its "
                      "id); audit, the audit file (JSON); export, the script",
                      {"cases": _checked("out", _out_file), "report": _checked("out", argcheck.writable_dir),
                       "gate": _checked("out", argcheck.run_dir_for_output),
                       "shrink": _checked("out", argcheck.writable_file),
                       "audit": _checked("out", argcheck.writable_file),
                       "compare": _checked("out", argcheck.writable_dir),
                       "merge": _checked("out", argcheck.writable_dir),
                       "export": _checked("out", argcheck.writable_file)},
                      metavar="PATH", required=("audit", "merge", "export")),
        "--markdown": _Opt("also write the text of an upstream bug report (title, environment, script, output)",
                           _checked("markdown", argcheck.writable_file), metavar="FILE"),
        "--junit": _Opt("write a JUnit XML file of the checks", _checked("junit", argcheck.writable_file),
                        metavar="FILE"),
        "--subjects": _Opt("comma list of subject names (default: every registered subject; audit: all but the "
                           "control.* self-tests)", _checked("subjects", argcheck.name_list)),
        "--relations": _Opt("invariance relations to run, comma list of alone, subbatch, order, padding, "
                            "duplicate; 'all' (the default) or 'none'", _checked("relations", _relations)),
        "--jobs": _Opt("lanes of workers running tasks at once on this machine, each task still R runs in one "
                       "pooled worker and K fresh; 0: $HARNESS_JOBS, else one per CPU, at most 4; GPU tasks run "
                       "in one lane (default {default})", argcheck.ints("jobs", 0), metavar="N"),
        "--timeout": _Opt("seconds a run may take before its process is killed, > 0 (default {default})",
                          seconds("timeout")),
        "--max-case-bytes": _Opt("refuse a case whose inputs need more (default $HARNESS_MAX_CASE_BYTES or a "
                                 "quarter of this machine's memory)", argcheck.ints("max-case-bytes", 1),
                                 metavar="BYTES"),
        "--keep": _Opt("keep the newest N run directories under reports/, delete older ones (default 10; 0 keeps "
                       "only this run)", argcheck.ints("keep", 0), metavar="N"),
        "--keep-arrays": _Opt("report: keep repetition 0's arrays of the tasks with findings (findings, the "
                              "default) or of every task (all); audit: also keep every entry's arrays as .npz "
                              "files in this directory",
                              {"report": _checked("keep-arrays", _one_of(*keep_arrays)),
                               "audit": _checked("keep-arrays", argcheck.writable_dir)}, metavar="findings|all|DIR"),
        "--resume": _Opt("continue an interrupted campaign in DIR (flags given must agree with its campaign.json)",
                         metavar="DIR"),
        "--shard": _Opt("run shard i of n of the corpus (1-based)", _checked("shard", argcheck.shard),
                        metavar="I/N"),
        "--quiet": _Opt("print no progress (bar or steps)", switch=True),
        "--no-localize": _Opt("do not localize findings", switch=True),
        "--shrink-budget": _Opt("seconds to spend shrinking the findings' cases to minimal ones (default "
                                "{default})", _non_negative_seconds("shrink-budget"), metavar="SECONDS"),
        "--no-shrink": _Opt("do not shrink the findings' cases", switch=True),
        "--budget": _Opt("seconds to spend at most (default {default})", seconds("budget")),
        "--max-runs": _Opt("worker runs to spend at most (default {default})", argcheck.ints("max-runs", 1)),
        "--exit-code": _Opt("exit 1 when anything changed, 0 when the same", switch=True),
        "--cluster": _Opt("run the tasks on a Dask cluster: tcp://host:8786, 'local' (a LocalCluster here) or "
                          "'local-cuda' (one worker per GPU; needs dask-cuda). Default: the local worker pool",
                          metavar="ADDRESS"),
        "--spread": _Opt("shard: each task once somewhere (one column); every: every worker runs the whole corpus "
                         "(one column per worker, each with its own fingerprint) (default {default})",
                         choices=("shard", "every")),
        "--cluster-workers": _Opt("worker processes of --cluster local (default {default})",
                                  argcheck.ints("cluster-workers", 1), metavar="N"),
    }


#: What a None default reads as in --help.
_NONE_SAYS = {"examples": "the corpus's own", "profile": "the audit corpus file",
              "timeout": "scaled with the case's estimated work"}


def _defaults(verb: str) -> dict[str, Any]:
    """The defaults of ``verb``'s options, by dest, as --help shows them: its options record's (a field left
    None there takes the campaign settings' default, or the corpus's own seed and profile)."""
    import importlib

    from harness.execute.settings import CampaignSettings
    from harness.outputs.fleet import ClusterOptions

    if not _RECORDS.get(verb):
        return {}  # (export's record is written beside this parser)
    module, _, name = _RECORDS[verb].partition(":")
    mod = importlib.import_module(module)
    fields = dataclasses.fields(getattr(mod, name))
    out = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    out.update({k.lower(): v for k, v in vars(mod).items() if k in ("REPEATS", "FRESH")})
    if any(f.name == "cluster" for f in fields):
        out.update(spread=ClusterOptions.spread, cluster_workers=ClusterOptions.workers)
    if verb == "report":  # (None there: not given, which --resume does not compare)
        out.update({k: getattr(CampaignSettings, k) for k in ("repeats", "fresh", "jobs", "timeout")},
                   seed=_corpus_seed(), profile="ci")
    return out


#: The verbs with an options record (harness/verbs/): the record holds their defaults.
_RECORDS = {"replay": "harness.verbs.replay:ReplayOptions", "shrink": "harness.verbs.shrink:ShrinkOptions",
            "localize": "harness.verbs.localize:LocalizeOptions", "gate": "harness.verbs.gate:GateOptions",
            "cases": "harness.verbs.cases:CasesOptions", "env": "harness.verbs.env:EnvOptions",
            "subjects": "harness.verbs.subjects:SubjectsOptions",
            "contracts": "harness.verbs.contracts:ContractsCheckOptions",
            "compare": "harness.verbs.compare:CompareOptions", "merge": "harness.verbs.compare:MergeOptions",
            "report": "harness.verbs.report:ReportOptions", "audit": "harness.verbs.audit:AuditOptions",
            "bisect": "harness.verbs.bisect:BisectOptions", "export": ""}


def _add(p: Any, verb: str, *flags: str) -> None:
    """Options of the table (:func:`_options`, or the reproducer's) on ``verb``'s parser, in order."""
    table, defaults = _options(), _defaults(verb)
    for flag in flags:
        if flag in OPTION:
            _add_option(p, OPTION[flag], verb, defaults)
            continue
        o = table[flag]
        dest = flag[2:].replace("-", "_")
        kw: dict[str, Any] = {"help": _help(o.help, defaults.get(dest), dest)}
        if o.switch:
            kw["action"] = "store_true"
        else:
            kw.update(type=o.check.get(verb) if isinstance(o.check, Mapping) else o.check, metavar=o.metavar,
                      choices=o.choices)
        if verb in o.required:
            kw["required"] = True
        p.add_argument(flag, **kw)


def _help(text: str, default: Any, dest: str) -> str:
    return text.replace("{default}", _NONE_SAYS.get(dest, "none") if default is None else str(default))


def _value_type(check: str, name: str) -> Callable[[str], Any] | None:
    """The ``type=`` of a reproducer option's value check (:attr:`harness.judge.reproducer.Option.check`)."""
    if not check:
        return None
    return {"file": lambda: _checked(name, argcheck.readable_file), "device": lambda: _checked(name, _one_device),
            "devices": lambda: _checked(name, argcheck.device_list), "context": lambda: _checked(name, _one_context),
            "contexts": lambda: _checked(name, _contexts), "relation": lambda: _checked(name, _one_relation),
            "run-dir": lambda: _checked(name, rundir.baseline_dir), "count>=2": lambda: argcheck.ints(name, 2),
            "count>=1": lambda: argcheck.ints(name, 1), "count>=0": lambda: argcheck.ints(name, 0)}[check]()


def _add_option(p: Any, o: Option, verb: str, defaults: Mapping[str, Any]) -> None:
    """One option of the reproducer's table on a parser."""
    kw: dict[str, Any] = {"help": _help(o.help, defaults.get(o.dest), o.dest)}
    if o.metavar:
        kw["metavar"] = o.metavar
    if o.shape == "many":
        kw.update(action="append", default=[])
    elif o.shape == "switch":
        kw["action"] = "store_true"
    else:
        kw["type"] = _value_type(o.check_of(verb), o.dest.replace("_", "-"))
    if verb in o.required:
        kw["required"] = True
    p.add_argument(o.flag, **kw)


def _add_reproducer(p: argparse.ArgumentParser, verb: str, *flags: str) -> None:
    """The options of the reproducer that ``verb`` takes, in the table's order, then ``flags``."""
    _add(p, verb, *[o.flag for o in OPTIONS if verb in o.verbs], *flags)


def _given_dests(args: argparse.Namespace) -> set[str]:
    """The options the command line gave: every one left out parsed as None (a switch as False, a repeatable
    option as [])."""
    return {k for k, v in vars(args).items() if v is not None and v is not False and v != []}


def _verb(sub: Any, name: str, help: str, description: str, codes: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=description, epilog=codes,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


_CLUSTER = ("--cluster", "--spread", "--cluster-workers")


def _add_cluster(p: argparse.ArgumentParser, verb: str) -> None:
    _add(p.add_argument_group("fleet (Dask)"), verb, *_CLUSTER)


def build_parser() -> argparse.ArgumentParser:
    """The one argparse tree of every verb."""
    p = _Parser(prog="python -m harness", description=_DESCRIPTION, epilog=_codes(
        "0  done (see each verb's --help for what else it may return)", "1  a finding that fails the verb "
        "(gate, contracts check, replay, shrink, compare --exit-code, bisect)", "3  replay: every run raised the "
        "same way (an error reproduced, not a difference)"), formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    e = _verb(sub, "env", "the environment fingerprint", "Print the environment fingerprint: Python, Chainer, "
              "NumPy, CuPy, CUDA, BLAS, GPU, environment variables.",
              _codes("0  printed (with --check: the CPU stack is usable)", "2  with --check: Chainer or ESPnet unusable"))
    _add(e, "env", "--json", "--check")
    e.set_defaults(func=cmd_env)

    s = _verb(sub, "subjects", "list registered subjects", "List the registered subjects, their family, devices "
              "and declared determinism.", _codes("0  listed"))
    _add(s, "subjects", "--json", "--subject-plugin")
    s.set_defaults(func=cmd_subjects)

    c = _verb(sub, "cases", "write a corpus of generated cases", "Generate cases and write them as a JSON-lines "
              "corpus (the same seed writes the same bytes).", _codes("0  written"))
    _add(c, "cases", "--family", "--examples", "--seed", "--profile", "--out", "--coverage", "--corpus")
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
    _add_reproducer(r, "replay", "--timeout", "--max-case-bytes")
    r.set_defaults(func=cmd_replay)

    rep = _verb(sub, "report", "run a campaign and write the report tables",
                "Run the campaign (every case x subject x device x context, R times in a pooled worker and once "
                "in each of --fresh N fresh workers, the members of the invariance relations beside it) and write "
                "results.csv.gz, summary.md/html and the findings. An existing "
                "run directory is never mixed into: --out must be new or empty; --resume DIR continues one.",
                _codes("0  the report was written (findings are rows, not failures)"))
    _add(rep, "report", "--subjects", "--devices", "--contexts", "--repeats", "--fresh", "--jobs", "--relations",
         "--max-case-bytes", "--keep", "--keep-arrays", "--examples", "--seed", "--corpus", "--out",
         "--subject-plugin", "--timeout", "--resume", "--shard", "--quiet", "--no-localize", "--profile",
         "--shrink-budget", "--no-shrink")
    _add_cluster(rep, "report")
    rep.set_defaults(func=cmd_report)

    ct = _verb(sub, "contracts", "contracts file tools", "Tools for the determinism contracts file.",
               _codes("0  see the action"))
    ct_sub = ct.add_subparsers(dest="contracts_verb", required=True, metavar="ACTION")
    chk = _verb(ct_sub, "check", "validate a contracts file", "Validate a contracts file against the registered "
                "subjects and contexts.", _codes("0  valid", "1  problems, one line each"))
    _add(chk, "contracts", "--contracts", "--subject-plugin")
    chk.set_defaults(func=cmd_contracts_check)

    g = _verb(sub, "gate", "check a fresh run against the contracts (and a baseline)",
              "Run the gate campaign in worker processes and check every task against the determinism "
              "contracts, and (with --baseline) the digests against a stored run.",
              _codes("0  every check passed", "1  a contract broken (the dossiers are on stderr)"))
    _add(g, "gate", "--contracts", "--baseline", "--devices", "--corpus", "--out", "--junit", "--repeats", "--fresh",
         "--jobs", "--subject-plugin", "--quiet", "--shrink-budget", "--no-shrink", "--profile")
    _add_cluster(g, "gate")
    g.set_defaults(func=cmd_gate)

    sh = _verb(sub, "shrink", "reduce a case while the same finding still reproduces",
               "Shrink a case: drop sequences and ids, shorten lengths, lower the vocabulary, sizes and layers, "
               "simplify settings, keeping each step only while the same finding (kind, tensor kind) still "
               "reproduces. Every run is in worker processes. The findings' dossiers print this command.",
               _codes("0  a minimal case was written (or the case was already minimal)",
                      "1  the finding does not reproduce on the case given"))
    _add_reproducer(sh, "shrink", "--budget", "--max-runs", "--timeout", "--out", "--quiet", "--max-case-bytes")
    sh.set_defaults(func=cmd_shrink)

    a = _verb(sub, "audit", "digest every subject on a corpus into an audit file",
              "Run every subject on a corpus and write an audit file: per case x subject x device x context, the "
              "digest of every tensor and whether the repetitions agreed, with the environment fingerprint.",
              _codes("0  the audit file was written"))
    _add(a, "audit", "--corpus", "--devices", "--contexts", "--out", "--keep-arrays", "--shard", "--repeats", "--jobs",
         "--subjects", "--subject-plugin", "--quiet", "--profile")
    _add_cluster(a, "audit")
    a.set_defaults(func=cmd_audit)

    cmp_ = _verb(sub, "compare", "what changed between two audit files",
                 "Compare two audit files entry by entry: per subject x device x context, how many tensors "
                 "changed digest, by how much, a verdict, and the environment fields that differ.",
                 _codes("0  compared (with --exit-code: the same: every entry present in both is identical)",
                        "1  with --exit-code: changed (a verdict other than identical, or an entry in one file "
                        "only), as git diff --exit-code"))
    cmp_.add_argument("a", metavar="A.json", type=_checked("a", argcheck.readable_file), help="the first audit file")
    cmp_.add_argument("b", metavar="B.json", type=_checked("b", argcheck.readable_file), help="the second audit file")
    _add(cmp_, "compare", "--out", "--exit-code")
    cmp_.set_defaults(func=cmd_compare)

    m = _verb(sub, "merge", "many audit files as one matrix",
              "Merge audit files into one subject/device/context x machine matrix (shards of one run join one "
              "column).", _codes("0  merged and written"))
    m.add_argument("files", nargs="+", metavar="AUDIT.json", type=_checked("files", argcheck.readable_file),
                   help="audit files")
    _add(m, "merge", "--out")
    m.set_defaults(func=cmd_merge)

    lo = _verb(sub, "localize", "the first Chainer function whose outputs differ",
               "Record a digest of every Chainer function node's inputs and outputs over two runs (repeats, two "
               "contexts or two devices) and name the first node whose outputs differ while its inputs matched.",
               _codes("0  it ran (the localization is printed, also when nothing differed)"))
    _add_reproducer(lo, "localize", "--json", "--max-case-bytes", "--timeout")
    lo.set_defaults(func=cmd_localize)

    ex = _verb(sub, "export", "write a standalone script that reproduces a finding",
               "Write one self-contained Python file that reproduces a finding without the harness: it rebuilds "
               "the case's inputs, calls the library as the subject does, checks the finding's claim and exits 1 "
               "while the defect is there. Every finding prints this command beside its replay command.",
               _codes("0  the script was written"))
    _add_reproducer(ex, "export", "--out", "--markdown")
    ex.set_defaults(func=cmd_export)
    _add_bisect(sub)
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
              "directory, environment.json, an audit file), install each side in throwaway environments, change "
              "one package at a time to find which one changes the bits, then bisect its releases between the two "
              "pins and name the first that does.",
              _codes("0  the two ends agree on the case", "1  a package and release named (or several packages "
                     "change the bits only together)", "2  bad input, or an end that cannot be installed"))
    _add(b, "bisect", "case", "--case-id", "--subject", "--context", "--subject-plugin")  # the reproducer's
    for end in ("good", "bad"):
        b.add_argument(f"--{end}", action="append", default=[], metavar="NAME==VERSION",
                       help=f"a pin of the {end} end (repeatable, or several separated by spaces or commas)")
        b.add_argument(f"--{end}-env", metavar="PATH", help=f"the {end} end's fingerprint: a run or baseline "
                       "directory, an environment.json or an audit file (its package versions)")
    b.add_argument("--cache", default="", metavar="DIR", help="where environments and the resumable log go "
                   "(default $XDG_CACHE_HOME/harness/bisect)")
    b.add_argument("--find-links", action="append", default=[], metavar="DIR", help="wheels to install from "
                   "(repeatable); their versions are bisected too")
    b.add_argument("--no-index", action="store_true", help="install only from --find-links (offline)")
    b.add_argument("--installer", choices=("auto", "uv", "pip"), default="auto",
                   help="uv where installed (auto), or python -m venv + pip (default %(default)s)")
    _add(b, "bisect", "--timeout", "--quiet")

    def run(args: argparse.Namespace) -> int:
        from harness.verbs.bisect import BisectOptions, bisect, parse_pins, pins_from_environment

        found = {e: pins_from_environment(getattr(args, f"{e}_env")) if getattr(args, f"{e}_env") else {}
                 for e in ("good", "bad")}
        shared = set(found["good"]) & set(found["bad"])  # a fingerprint may list a package the other lacks
        ends = {e: {**{n: found[e][n] for n in shared}, **parse_pins(getattr(args, e), e)} for e in found}
        for end, pins in ends.items():
            if not pins:
                raise InvalidArgument(f"{end}: no pins (give --{end} NAME==VERSION or --{end}-env PATH)")
        return bisect(BisectOptions(
            good=ends["good"], bad=ends["bad"], find_links=tuple(args.find_links), plugins=tuple(args.subject_plugin),
            **_given_values(args, "case", "subject", "case_id", "context", "cache", "no_index", "installer",
                            "timeout", "quiet")))

    b.set_defaults(func=run)
