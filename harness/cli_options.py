"""The command line's option vocabulary: every option beside the reproducer's, its help text, its value check and
its default as --help shows it; and how an option of either table goes onto a verb's parser.

Every option is declared once: the reproducer's in :data:`harness.judge.reproducer.OPTIONS`, every other one in
:func:`option_table`, each with one help text (its default, which may differ by verb, is filled in from
:func:`verb_defaults`). A value the command line leaves out parses as None, so that "given" and "left out"
differ (--resume compares only what was given): each verb's options record holds its defaults.

Every single value is checked while the command line is read: each option's ``type=`` is built here from
:mod:`harness.core.argcheck` (or a registry's own parser); a bad value is argparse's one-line usage error (exit
2) before any verb starts, and no verb checks it again. A check that needs two options, or the plug-ins loaded,
is in the command line's ``_check_combinations`` (:mod:`harness.cli`) or the verb.

Only the command line (:mod:`harness.cli`) imports this module; it imports no NumPy, so that ``--help`` and a
refused value stay quick.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from harness.core import argcheck, options
from harness.core.errors import InvalidArgument
from harness.judge.reproducer import OPTION, OPTIONS, Option

__all__ = ["checked", "Opt", "option_table", "NONE_SAYS", "verb_defaults", "RECORDS", "add_options", "help_text",
           "add_option", "add_reproducer"]


def checked(name: str, check: Callable[[str, Any], Any]) -> Callable[[str], str]:
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


@dataclass(frozen=True)
class Opt:
    """One option of the verbs beside the reproducer's: its help text and value check (by verb where the
    verbs read the value differently: ``--out`` is a directory for some, a file for others)."""

    help: str
    check: Callable[[str], Any] | Mapping[str, Callable[[str], Any]] | None = None
    metavar: str | None = None
    switch: bool = False
    choices: tuple[str, ...] | None = None
    required: tuple[str, ...] = ()     # the verbs that need it
    many: bool = False                 # repeatable: each value appended


def option_table() -> dict[str, Opt]:
    seconds = argcheck.seconds
    keep_arrays = ("findings", "all")
    return {
        "--json": Opt("print it as JSON", switch=True),
        "--check": Opt("one line per set-up problem; exit 2 if unusable", switch=True),
        "--family": Opt("which family of cases (default {default})", choices=("embed", "lstm", "pipeline", "all")),
        "--examples": Opt("generated examples per family, >= 1 (default {default}; not with --corpus)",
                          argcheck.ints("examples", 1)),
        "--seed": Opt("the corpus seed (default {default}; not with --corpus)", argcheck.ints("seed", 0)),
        "--profile": Opt("sizes and counts of the generated cases, the pytest profiles' names: ci (the default "
                         "corpus), dev, audit (more and larger cases), realistic (real model shapes from "
                         "published recipes; fewer repeats); not with --corpus; cases --coverage: the profile's "
                         "default corpus (default {default})",
                         choices=tuple(_profiles())),
        "--corpus": Opt("a corpus .jsonl to run instead of generating one (cases --coverage: to read; default: "
                        "the verb's own corpus)", checked("corpus", argcheck.readable_file), metavar="FILE"),
        "--coverage": Opt("print which edge kinds, size boundaries and recipe configurations a corpus reaches "
                          "(the profile's default corpus, or --corpus FILE) instead of writing cases", switch=True),
        "--out": Opt("where to write: report and gate, a new (absent or empty) run directory (default "
                     "reports/<run-id>); compare and merge, the directory of their tables; cases, the corpus file "
                     "(default or '-': stdout); shrink, the minimal case (default: beside CASE.json, named by its "
                     "id); audit, the audit file (JSON); export, the script; trajectory, the directory of its table "
                     "and figure",
                     {"cases": checked("out", _out_file), "report": checked("out", argcheck.writable_dir),
                      "gate": checked("out", argcheck.run_dir_for_output),
                      "shrink": checked("out", argcheck.writable_file),
                      "audit": checked("out", argcheck.writable_file),
                      "compare": checked("out", argcheck.writable_dir),
                      "merge": checked("out", argcheck.writable_dir),
                      "export": checked("out", argcheck.writable_file),
                      "trajectory": checked("out", argcheck.writable_dir)},
                     metavar="PATH", required=("audit", "merge", "export")),
        "--markdown": Opt("also write the text of an upstream bug report (title, environment, script, output)",
                          checked("markdown", argcheck.writable_file), metavar="FILE"),
        "--junit": Opt("write a JUnit XML file of the checks", checked("junit", argcheck.writable_file),
                       metavar="FILE"),
        "--subjects": Opt("comma list of subject names (default: every registered subject; audit: all but the "
                          "control.* self-tests)", checked("subjects", argcheck.name_list)),
        "--relations": Opt("invariance relations to run, comma list of alone, subbatch, order, padding, "
                           "duplicate; 'all' (the default) or 'none'", checked("relations", _relations)),
        "--jobs": Opt("lanes of workers running tasks at once on this machine, each task still R runs in one "
                      "pooled worker and K fresh; 0: $HARNESS_JOBS, else one per CPU, at most 4; GPU tasks run "
                      "in one lane (default {default})", argcheck.ints("jobs", 0), metavar="N"),
        "--timeout": Opt("seconds of CPU time a run may use before its process is killed (one that sleeps: 3 x "
                          "that in wall seconds; a timeout is tried again alone with twice the limit), > 0 "
                          "(default {default})",
                          seconds("timeout")),
        "--max-case-bytes": Opt("refuse a case whose run needs more at its peak (default $HARNESS_MAX_CASE_BYTES "
                                f"or {argcheck.DEFAULT_LIMIT_TEXT})", argcheck.ints("max-case-bytes", 1),
                                metavar="BYTES"),
        "--keep": Opt("keep the newest N run directories under reports/, delete older ones (default 10; 0 keeps "
                      "only this run)", argcheck.ints("keep", 0), metavar="N"),
        "--keep-arrays": Opt("report: keep repetition 0's arrays of the tasks with findings (findings, the "
                             "default) or of every task (all); audit: also keep every entry's arrays as .npz "
                             "files in this directory",
                             {"report": checked("keep-arrays", _one_of(*keep_arrays)),
                              "audit": checked("keep-arrays", argcheck.writable_dir)}, metavar="findings|all|DIR"),
        "--resume": Opt("continue an interrupted campaign in DIR (flags given must agree with its campaign.json)",
                        metavar="DIR"),
        "--shard": Opt("run shard i of n of the corpus (1-based)", checked("shard", argcheck.shard),
                       metavar="I/N"),
        "--quiet": Opt("print no progress (bar or steps)", switch=True),
        "--no-localize": Opt("do not localize findings", switch=True),
        "--shrink-budget": Opt("seconds to spend shrinking the findings' cases to minimal ones (default "
                               "{default})", _non_negative_seconds("shrink-budget"), metavar="SECONDS"),
        "--no-shrink": Opt("do not shrink the findings' cases", switch=True),
        "--steps": Opt("trajectory: optimizer steps to train (default: the case's own steps)",
                       argcheck.ints("steps", 1), metavar="K"),
        "--against": Opt("trajectory: compare with the same case trained by this model subject (instead of "
                         "--contexts or --fresh)", metavar="SUBJECT"),
        "--budget": Opt("seconds to spend at most (default {default})", seconds("budget")),
        "--max-runs": Opt("worker runs to spend at most (default {default})", argcheck.ints("max-runs", 1)),
        "--exit-code": Opt("exit 1 when anything changed, 0 when the same", switch=True),
        **_bisect_options(),
    }


def _pins(name: str) -> Callable[[str], str]:
    def check(n: str, text: str) -> None:
        from harness.upstream.bisect import parse_pins

        parse_pins([text], n)

    return checked(name, check)


def _env_pin(name: str, text: str) -> None:
    from harness.upstream.bisect_conditions import parse_env

    parse_env([text])


def _exists(name: str, text: str) -> None:
    if not os.path.exists(text):
        raise InvalidArgument(f"{name}={text!r} does not exist")


def _a_dir(name: str, text: str) -> None:
    if not os.path.isdir(text):
        raise InvalidArgument(f"{name}={text!r} is not a directory")


def _bisect_options() -> dict[str, Opt]:
    """``bisect``'s own options: its two ends, its cache, where packages come from, the conditions it pins."""
    out = {f"--{end}": Opt(f"a pin of the {end} end, NAME==VERSION (repeatable, or several separated by spaces "
                           "or commas)", _pins(end), metavar="NAME==VERSION", many=True) for end in ("good", "bad")}
    out.update({f"--{end}-env": Opt(f"the {end} end's fingerprint: a run or baseline directory, an "
                                    "environment.json or an audit file (its package versions)",
                                    checked(f"{end}-env", _exists), metavar="PATH")
                for end in ("good", "bad")})
    out.update({
        "--cache": Opt("bisect's own directory: its logs (one per question, read back by a rerun) and its "
                       "throwaway environments (default $XDG_CACHE_HOME/harness/bisect)", metavar="DIR"),
        "--find-links": Opt("a directory of wheels or sdists to install from (repeatable); their versions are "
                            "bisected too", checked("find-links", _a_dir), metavar="DIR", many=True),
        "--no-index": Opt("install only from --find-links (offline)", switch=True),
        "--installer": Opt("uv (refused where it is not installed), pip (python -m venv + pip), or auto: uv "
                           "where installed, else pip (default {default})", choices=("auto", "uv", "pip")),
        "--env": Opt("pin a variable in every probe beside the machine's own conditions, NAME=VALUE "
                     "(repeatable; e.g. OPENBLAS_CORETYPE=SkylakeX)", checked("env", _env_pin),
                     metavar="NAME=VALUE", many=True),
    })
    return out


#: What a None default reads as in --help.
NONE_SAYS = {"examples": "the corpus's own", "profile": "the audit corpus file",
             "timeout": "scaled with the case's estimated work"}


def verb_defaults(verb: str) -> dict[str, Any]:
    """The defaults of ``verb``'s options, by dest, as --help shows them: its options record's (a field left
    None there takes the campaign settings' default, or the corpus's own seed and profile)."""
    import importlib

    from harness.execute.settings import CampaignOptions

    if not RECORDS.get(verb):
        return {}  # (export's record is written beside this parser)
    module, _, name = RECORDS[verb].partition(":")
    mod = importlib.import_module(module)
    fields = dataclasses.fields(getattr(mod, name))
    out = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    out.update({k.lower(): v for k, v in vars(mod).items() if k in ("REPEATS", "FRESH", "FAMILY", "EXAMPLES", "SEED")})
    if verb in ("gate", "cases"):  # (None there: not given, so that a corpus given beside it is refused)
        out.update(profile="ci")
    if verb == "report":  # (None there: not given, which --resume does not compare)
        out.update({k: getattr(CampaignOptions, k) for k in ("repeats", "fresh", "jobs", "timeout")},
                   seed=_corpus_seed(), profile="ci")
    return out


#: The verbs with an options record (harness/verbs/): the record holds their defaults.
RECORDS = {"replay": "harness.verbs.replay:ReplayOptions", "shrink": "harness.verbs.shrink:ShrinkOptions",
           "localize": "harness.verbs.localize:LocalizeOptions", "gate": "harness.verbs.gate:GateOptions",
           "cases": "harness.verbs.cases:CasesOptions", "env": "harness.verbs.env:EnvOptions",
           "subjects": "harness.verbs.subjects:SubjectsOptions",
           "contracts": "harness.verbs.contracts:ContractsCheckOptions",
           "compare": "harness.verbs.compare:CompareOptions", "merge": "harness.verbs.compare:MergeOptions",
           "report": "harness.verbs.report:ReportOptions", "audit": "harness.verbs.audit:AuditOptions",
           "bisect": "harness.verbs.bisect:BisectOptions", "export": "",
           "trajectory": "harness.verbs.trajectory:TrajectoryOptions"}


def add_options(p: Any, verb: str, *flags: str) -> None:
    """Options of the table (:func:`option_table`, or the reproducer's) on ``verb``'s parser, in order."""
    table, defaults = option_table(), verb_defaults(verb)
    for flag in flags:
        if flag in OPTION:
            add_option(p, OPTION[flag], verb, defaults)
            continue
        o = table[flag]
        dest = flag[2:].replace("-", "_")
        kw: dict[str, Any] = {"help": help_text(o.help, defaults.get(dest), dest)}
        if o.switch:
            kw["action"] = "store_true"
        else:
            if o.many:
                kw["action"] = "append"
            kw.update(type=o.check.get(verb) if isinstance(o.check, Mapping) else o.check, metavar=o.metavar,
                      choices=o.choices)
        if verb in o.required:
            kw["required"] = True
        p.add_argument(flag, **kw)


def help_text(text: str, default: Any, dest: str) -> str:
    return text.replace("{default}", NONE_SAYS.get(dest, "none") if default is None else str(default))


def add_option(p: Any, o: Option, verb: str, defaults: Mapping[str, Any]) -> None:
    """One option of the reproducer's table on a parser."""
    options.add_flag(p, dataclasses.replace(o.flag_for(verb), none_says=NONE_SAYS.get(o.dest, "none")), o.dest,
                     defaults.get(o.dest))


def add_reproducer(p: argparse.ArgumentParser, verb: str, *flags: str) -> None:
    """The options of the reproducer that ``verb`` takes, in the table's order, then ``flags``."""
    add_options(p, verb, *[o.flag for o in OPTIONS if verb in o.verbs], *flags)
