"""Check that Chainer's embeddings and LSTMs give the same bits every time, on every device and setting.

``python -m harness VERB --help`` explains each verb. Every verb checks all its arguments before it
starts any work; a bad one is a single ``harness: error: ...`` line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import sys
from typing import Any, Callable, NoReturn, Sequence

from harness.core import argcheck
from harness.core.errors import HarnessError, InvalidArgument, SetupError
from harness.judge.reproducer import OPTION, OPTIONS, Option, Reproducer
from harness.outputs.fleet import add_cluster_options

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


def _load_plugins(specs: Sequence[str] | None) -> None:
    from harness.verbs.common import load_plugins

    load_plugins(specs)


def _note(text: str) -> None:
    from harness.verbs.common import note

    note(text)


def _check_corpus(path: str | None) -> None:
    if path is not None:  # the parser checked the file; here, its content
        from harness.core.cases import load_corpus

        if not load_corpus(path):
            raise InvalidArgument(f"corpus={path!r} holds no cases")


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

    if args.coverage:
        return _coverage(args.corpus)
    if args.corpus is not None:
        raise InvalidArgument(f"corpus={args.corpus!r} is read only with --coverage")

    to_stdout = args.out in (None, "-")
    cases = corpus(args.family, examples=args.examples, seed=args.seed, profile=args.profile)
    if to_stdout:
        for c in cases:
            print(c.to_json())
    else:
        n = write_corpus(cases, args.out)
        print(f"wrote {n} cases to {args.out}", file=sys.stderr)
    return 0


def _coverage(path: str | None) -> int:
    """``cases --coverage``: the edge kinds a corpus reaches, one row each; exit 0 (a kind no case reaches is a
    row with 0, so the table says what is missing)."""
    import pandas as pd

    from harness.core.cases import load_corpus
    from harness.generate.corpora import default_corpus
    from harness.generate.edges import coverage_rows

    if path is not None:
        argcheck.readable_file("corpus", path)
    cases = load_corpus(path) if path is not None else default_corpus()
    rows = coverage_rows(cases)
    print(pd.DataFrame(rows).to_markdown(index=False))
    missing = [r["edge"] for r in rows if not r["cases"]]
    print(f"\n{len(rows) - len(missing)} of {len(rows)} edge kinds reached by {len(cases)} cases"
          + (f"; not reached: {', '.join(missing)}" if missing else ""))
    return 0


def _add_max_case_bytes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-case-bytes", type=argcheck.ints("max-case-bytes", 1), metavar="BYTES",
                   help="refuse a case whose inputs need more (default $HARNESS_MAX_CASE_BYTES or a quarter of "
                        "this machine's memory)")


# ---- replay, shrink, localize, export: the verbs of one reproducer -------------------------------------
def _reproducer(verb: str, args: argparse.Namespace) -> Reproducer:
    return Reproducer.from_options(verb, vars(args))


def cmd_replay(args: argparse.Namespace) -> int:
    from harness.verbs.replay import ReplayOptions, replay

    return replay(ReplayOptions(_reproducer("replay", args), timeout=args.timeout,
                                max_case_bytes=args.max_case_bytes))


def cmd_shrink(args: argparse.Namespace) -> int:
    from harness.verbs.shrink import ShrinkOptions, shrink

    return shrink(ShrinkOptions(_reproducer("shrink", args), budget=args.budget, max_runs=args.max_runs,
                                timeout=args.timeout, out=args.out, quiet=args.quiet,
                                max_case_bytes=args.max_case_bytes))


def cmd_localize(args: argparse.Namespace) -> int:
    from harness.verbs.localize import LocalizeOptions, localize

    return localize(LocalizeOptions(_reproducer("localize", args), json=args.json, timeout=args.timeout,
                                    max_case_bytes=args.max_case_bytes))


def cmd_export(args: argparse.Namespace) -> int:
    import importlib

    export = importlib.import_module("harness.verbs.export")  # (written beside this verb's parser)
    return int(export.export(export.ExportOptions(_reproducer("export", args), out=args.out,
                                                  markdown=args.markdown)) or 0)


# ---- report ----------------------------------------------------------------------------------------
def cmd_report(args: argparse.Namespace) -> int:
    import functools

    from harness.generate.corpora import default_corpus
    from harness.outputs.report import run_report

    _load_plugins(args.subject_plugin)
    return run_report(args, functools.partial(default_corpus, profile=args.profile))


# ---- gate / contracts -------------------------------------------------------------------------------
def cmd_gate(args: argparse.Namespace) -> int:
    """Validate every gate argument, then hand over to :func:`harness.outputs.gate.cmd_gate` (holding the
    ``--out`` directory's lock while it runs)."""
    from harness.outputs import gate
    from harness.outputs.report import lock_run_dir

    _load_plugins(args.subject_plugin)
    from harness.core.devices import select_devices

    sel = select_devices(args.devices)  # usable here (the parser checked the names)
    _check_corpus(args.corpus)
    for n in sel.notes:  # after every check, so that a usage error stays one line
        _note(n)
    # (gate.cmd_gate loads the plug-ins again: registering is idempotent, and its workers need the list.)
    if args.out is None:
        return int(gate.cmd_gate(args) or 0)
    with lock_run_dir(args.out, "out"):
        return int(gate.cmd_gate(args) or 0)


# ---- audit / compare / merge --------------------------------------------------------------------------
def _lazy(module: str, func: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import importlib

        return int(getattr(importlib.import_module(module), func)(args) or 0)

    return run


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


def _settings_default(key: str) -> Any:
    from harness.execute.settings import CampaignSettings

    return getattr(CampaignSettings, key)


class _Given(argparse.Action):
    """Mixed into every option's action: records in ``args._given`` which options the command line gave, so
    that defaults can be real values (shown by --help) and still tell "left out" from "given as the default"
    (``--resume`` compares only what was given; ``--cluster-workers`` is refused without ``--cluster``)."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None) -> None:
        given = getattr(namespace, "_given", None)
        if given is None:
            given = set()
            setattr(namespace, "_given", given)
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)  # type: ignore[misc]


#: One tracking class per argparse action class (made once: a parser holds a hundred options).
_GIVEN_CLASSES: dict[type, type] = {}


def _track_given(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:  # argparse keeps its actions here; every option of every verb
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _track_given(sub)
        elif action.option_strings and not isinstance(action, _Given):
            cls = type(action)
            if cls not in _GIVEN_CLASSES:
                _GIVEN_CLASSES[cls] = type(f"Given{cls.__name__}", (_Given, cls), {})
            action.__class__ = _GIVEN_CLASSES[cls]


def _check_combinations(args: argparse.Namespace) -> None:
    """The checks that need two options (each value alone was checked by its type=)."""
    given = getattr(args, "_given", set())
    if getattr(args, "corpus", None) is not None and args.verb == "report":
        ignored = [f"--{k}" for k in ("examples", "seed") if k in given]
        if ignored:
            raise InvalidArgument(f"corpus={args.corpus!r} runs its own cases: {' and '.join(ignored)} would be "
                                  f"ignored; leave {'them' if len(ignored) > 1 else 'it'} out")
    if "profile" in given and args.verb in ("report", "gate", "audit"):
        argcheck.profile_or_corpus(args.profile, getattr(args, "corpus", None))
    if hasattr(args, "cluster") and args.cluster is None:
        if "cluster_workers" in given:
            raise InvalidArgument(f"cluster-workers={args.cluster_workers} needs --cluster local (without "
                                  f"--cluster the local worker pool runs the tasks)")
        if getattr(args, "spread", "shard") != "shard":
            raise InvalidArgument(f"spread={args.spread!r} needs --cluster (one campaign per cluster worker)")


# ---- the parser -------------------------------------------------------------------------------------
def _value_type(check: str, name: str) -> Callable[[str], Any] | None:
    """The ``type=`` of a reproducer option's value check (:attr:`harness.judge.reproducer.Option.check`)."""
    if not check:
        return None
    return {"file": lambda: _checked(name, argcheck.readable_file), "device": lambda: _checked(name, _one_device),
            "devices": lambda: _checked(name, argcheck.device_list), "context": lambda: _checked(name, _one_context),
            "contexts": lambda: _checked(name, _contexts), "relation": lambda: _checked(name, _one_relation),
            "run-dir": lambda: _checked(name, argcheck.baseline_dir), "count>=1": lambda: argcheck.ints(name, 1),
            "count>=0": lambda: argcheck.ints(name, 0)}[check]()


def _add_option(p: argparse.ArgumentParser, o: Option) -> None:
    """One option of the reproducer's table on a parser (a value the command line leaves out is None)."""
    kw: dict[str, Any] = {"help": o.help}
    if o.metavar:
        kw["metavar"] = o.metavar
    if o.shape == "many":
        kw.update(action="append", default=[])
    elif o.shape == "switch":
        kw["action"] = "store_true"
    else:
        kw["type"] = _value_type(o.check, o.dest.replace("_", "-"))
    if o.required:
        kw["required"] = True
    p.add_argument(o.flag, **kw)


def _add_reproducer(p: argparse.ArgumentParser, verb: str) -> None:
    """The options of the reproducer that ``verb`` takes, in the table's order."""
    for o in OPTIONS:
        if verb in o.verbs:
            _add_option(p, o)


def _verb(sub: Any, name: str, help: str, description: str, codes: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=description, epilog=codes,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _add_plugin(p: argparse.ArgumentParser) -> None:
    _add_option(p, OPTION["--subject-plugin"])


def _add_contracts(p: argparse.ArgumentParser) -> None:
    _add_option(p, OPTION["--contracts"])


def _add_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="ci", choices=_profiles(),
                   help="sizes and counts of the generated cases, the pytest profiles' names: ci (the default "
                        "corpus), dev, audit (more and larger cases; not with --corpus) (default %(default)s)")


def _add_shrink_options(p: argparse.ArgumentParser, budget: float) -> None:
    p.add_argument("--shrink-budget", type=_non_negative_seconds("shrink-budget"), default=budget, metavar="SECONDS",
                   help="seconds to spend shrinking the findings' cases to minimal ones (default %(default)s)")
    p.add_argument("--no-shrink", action="store_true", help="do not shrink the findings' cases")


def _add_jobs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=argcheck.ints("jobs", 0), default=_settings_default("jobs"), metavar="N",
                   help="lanes of workers running tasks at once on this machine, each task still R runs in one "
                        "pooled worker and K fresh; 0: $HARNESS_JOBS, else one per CPU, at most 4; GPU tasks run "
                        "in one lane (default %(default)s)")


def _add_campaign_options(p: argparse.ArgumentParser) -> None:
    # Defaults are the settings dataclass's (harness.execute.settings.CampaignSettings); with --resume, a flag
    # the command line gave (args._given) is compared against the run directory's campaign.json, a default is not.
    p.add_argument("--subjects", type=_checked("subjects", argcheck.name_list),
                   help="comma list of subject names (default: all registered subjects)")
    p.add_argument("--devices", type=_checked("devices", argcheck.device_list), help="cpu, gpu, gpu:N or all, comma-separated (default all: cpu and every usable "
                                     "GPU; a GPU named here must be usable)")
    p.add_argument("--contexts", type=_checked("contexts", _contexts),
                   help="comma list of context names (default: the default set)")
    p.add_argument("--repeats", type=argcheck.ints("repeats", 1), default=_settings_default("repeats"),
                   help="in-process repetitions R, >= 1 (default %(default)s)")
    p.add_argument("--fresh", type=argcheck.ints("fresh", 0), default=_settings_default("fresh"),
                   help="runs in fresh worker processes, one each, >= 0 (default %(default)s)")
    _add_jobs(p)
    p.add_argument("--relations", type=_checked("relations", _relations), help="invariance relations to run, comma list of alone, subbatch, order, padding, "
                                       "duplicate; 'all' (the default) or 'none'")
    _add_max_case_bytes(p)
    p.add_argument("--keep", type=argcheck.ints("keep", 0), metavar="N", help="keep the newest N run directories under reports/, delete "
                                                        "older ones (default 10; 0 keeps only this run)")
    p.add_argument("--keep-arrays", choices=["findings", "all"], help="keep repetition 0's arrays of the tasks "
                                                                      "with findings (default) or of every task")
    p.add_argument("--examples", type=argcheck.ints("examples", 1),
                   help="generated examples per family, >= 1 (default: the corpus's own)")
    p.add_argument("--seed", type=argcheck.ints("seed", 0), default=_corpus_seed(), help="corpus seed (default "
                                                                                         "%(default)s)")
    p.add_argument("--corpus", type=_checked("corpus", argcheck.readable_file),
                   help="a corpus .jsonl to run instead of generating one (not with --examples or --seed)")
    p.add_argument("--out", metavar="DIR", type=_checked("out", argcheck.writable_dir), help="a new (absent or empty) output directory (default reports/<run-id>)")
    _add_plugin(p)
    p.add_argument("--timeout", type=argcheck.seconds("timeout"), default=_settings_default("timeout"),
                   help="seconds per run before the worker is killed, > 0 (default %(default)s)")
    p.add_argument("--resume", metavar="DIR", help="continue an interrupted campaign in DIR (flags given must "
                                                   "agree with its campaign.json)")
    p.add_argument("--shard", metavar="I/N", type=_checked("shard", argcheck.shard),
                   help="run shard i of n of the corpus (1-based)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-localize", action="store_true", help="do not localize findings")


def build_parser() -> argparse.ArgumentParser:
    """The one argparse tree of every verb."""
    p = _Parser(prog="python -m harness", description=_DESCRIPTION, epilog=_codes(
        "0  done (see each verb's --help for what else it may return)", "1  a finding that fails the verb "
        "(gate, contracts check, replay, compare --exit-code)"), formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    e = _verb(sub, "env", "the environment fingerprint", "Print the environment fingerprint: Python, Chainer, "
              "NumPy, CuPy, CUDA, BLAS, GPU, environment variables.",
              _codes("0  printed (with --check: the CPU stack is usable)", "2  with --check: Chainer or ESPnet unusable"))
    e.add_argument("--json", action="store_true", help="print the fingerprint as JSON")
    e.add_argument("--check", action="store_true", help="one line per set-up problem; exit 2 if unusable")
    e.set_defaults(func=cmd_env)

    s = _verb(sub, "subjects", "list registered subjects", "List the registered subjects, their family, devices "
              "and declared determinism.", _codes("0  listed"))
    s.add_argument("--json", action="store_true", help="print the list as JSON")
    _add_plugin(s)
    s.set_defaults(func=cmd_subjects)

    c = _verb(sub, "cases", "write a corpus of generated cases", "Generate cases and write them as a JSON-lines "
              "corpus (the same seed writes the same bytes).", _codes("0  written"))
    c.add_argument("--family", default="all", choices=["embed", "lstm", "pipeline", "all"],
                   help="which family of cases (default all)")
    c.add_argument("--examples", type=argcheck.ints("examples", 1), default=20,
                   help="examples per family, >= 1 (default %(default)s)")
    c.add_argument("--seed", type=argcheck.ints("seed", 0), default=0, help="the generator seed (default %(default)s)")
    c.add_argument("--profile", default="ci", choices=_profiles(),
                   help="size profile of the generated cases (default %(default)s)")
    c.add_argument("--out", metavar="FILE", type=_checked("out", _out_file), help="the corpus file to write (default or '-': stdout)")
    c.add_argument("--coverage", action="store_true", help="print which edge kinds a corpus reaches (the default "
                                                           "corpus, or --corpus FILE) instead of writing cases")
    c.add_argument("--corpus", metavar="FILE", type=_checked("corpus", argcheck.readable_file),
                   help="with --coverage: the corpus .jsonl to read")
    c.set_defaults(func=cmd_cases)

    r = _verb(sub, "replay", "run one case and print what the judges find",
              "Run one case (from its JSON alone) several times and print, per tensor, whether the repetitions "
              "are bit-identical and how far they are from the oracle; with --contexts A,B or --devices A,B, "
              "also whether B's results are bit-identical to A's (the command a report prints for a finding).",
              _codes("0  bit-identical over the repeats (and across --contexts/--devices) and within the oracle's "
                     "tolerance (or skipped, said so)",
                     "1  a difference: DIFFERS between repeats, contexts or devices, or BEYOND TOLERANCE"))
    _add_reproducer(r, "replay")
    r.add_argument("--timeout", type=argcheck.seconds("timeout"), default=_settings_default("timeout"), help="seconds per run before the worker is killed "
                                                               "(default %(default)s)")
    _add_max_case_bytes(r)
    r.set_defaults(func=cmd_replay)

    rep = _verb(sub, "report", "run a campaign and write the report tables",
                "Run the campaign (every case x subject x device x context, R times in a pooled worker and once "
                "in each of --fresh N fresh workers, the members of the invariance relations beside it) and write "
                "results.csv.gz, summary.md/html and the findings. An existing "
                "run directory is never mixed into: --out must be new or empty; --resume DIR continues one.",
                _codes("0  the report was written (findings are rows, not failures)"))
    _add_campaign_options(rep)
    _add_profile(rep)
    _add_shrink_options(rep, 30.0)
    add_cluster_options(rep)
    rep.set_defaults(func=cmd_report)

    ct = _verb(sub, "contracts", "contracts file tools", "Tools for the determinism contracts file.",
               _codes("0  see the action"))
    ct_sub = ct.add_subparsers(dest="contracts_verb", required=True, metavar="ACTION")
    chk = _verb(ct_sub, "check", "validate a contracts file", "Validate a contracts file against the registered "
                "subjects and contexts.", _codes("0  valid", "1  problems, one line each"))
    _add_contracts(chk)
    _add_plugin(chk)
    chk.set_defaults(func=_lazy("harness.outputs.gate", "cmd_contracts_check"))

    g = _verb(sub, "gate", "check a fresh run against the contracts (and a baseline)",
              "Run the gate campaign in worker processes and check every task against the determinism "
              "contracts, and (with --baseline) the digests against a stored run.",
              _codes("0  every check passed", "1  a contract broken (the dossiers are on stderr)"))
    _add_contracts(g)
    g.add_argument("--baseline", metavar="DIR", type=_checked("baseline", argcheck.baseline_dir),
                   help="a stored run directory (tasks.jsonl[.gz], corpus.jsonl, "
                                                     "campaign.json) to compare digests with")
    g.add_argument("--devices", default="all", type=_checked("devices", argcheck.device_list), help="cpu, gpu, gpu:N or all (default all; a GPU named here must "
                                                    "be usable)")
    g.add_argument("--corpus", metavar="FILE", type=_checked("corpus", argcheck.readable_file), help="a corpus .jsonl (default: the gate corpus)")
    g.add_argument("--out", metavar="DIR", type=_checked("out", argcheck.run_dir_for_output),
                   help="a new (absent or empty) run directory (default reports/<run-id>)")
    g.add_argument("--junit", metavar="FILE", type=_checked("junit", argcheck.writable_file), help="write a JUnit XML file of the checks")
    g.add_argument("--repeats", type=argcheck.ints("repeats", 1), default=3,
                   help="in-process repetitions, >= 1 (default %(default)s)")
    g.add_argument("--fresh", type=argcheck.ints("fresh", 0), default=1,
                   help="fresh-process repetitions, >= 0 (default %(default)s)")
    _add_jobs(g)
    _add_plugin(g)
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_shrink_options(g, 60.0)
    _add_profile(g)
    add_cluster_options(g)
    g.set_defaults(func=cmd_gate)

    sh = _verb(sub, "shrink", "reduce a case while the same finding still reproduces",
               "Shrink a case: drop sequences and ids, shorten lengths, lower the vocabulary, sizes and layers, "
               "simplify settings, keeping each step only while the same finding (kind, tensor kind) still "
               "reproduces. Every run is in worker processes. The findings' dossiers print this command.",
               _codes("0  a minimal case was written (or the case was already minimal)",
                      "1  the finding does not reproduce on the case given"))
    _add_reproducer(sh, "shrink")
    sh.add_argument("--budget", type=argcheck.seconds("budget"), default=120.0, help="seconds to spend at most (default %(default)s)")
    sh.add_argument("--max-runs", type=argcheck.ints("max-runs", 1), default=400, help="worker runs to spend at most (default %(default)s)")
    sh.add_argument("--timeout", type=argcheck.seconds("timeout"), default=_settings_default("timeout"), help="seconds per run before the worker is killed "
                                                                "(default %(default)s)")
    sh.add_argument("--out", metavar="FILE", type=_checked("out", argcheck.writable_file), help="where to write the minimal case (default: beside CASE.json, "
                                                  "named by its id)")
    sh.add_argument("--quiet", action="store_true", help="do not print each step")
    _add_max_case_bytes(sh)
    sh.set_defaults(func=cmd_shrink)

    a = _verb(sub, "audit", "digest every subject on a corpus into an audit file",
              "Run every subject on a corpus and write an audit file: per case x subject x device x context, the "
              "digest of every tensor and whether the repetitions agreed, with the environment fingerprint.",
              _codes("0  the audit file was written"))
    a.add_argument("--corpus", metavar="FILE", type=_checked("corpus", argcheck.readable_file), help="a corpus .jsonl (default suites/corpus/audit.jsonl)")
    a.add_argument("--devices", default="all", type=_checked("devices", argcheck.device_list), help="cpu, gpu, gpu:N or all (default all; a GPU named here must "
                                                    "be usable)")
    a.add_argument("--contexts", default="default", type=_checked("contexts", _contexts), help="comma list of context names (default: default)")
    a.add_argument("--out", required=True, metavar="FILE", type=_checked("out", argcheck.writable_file), help="the audit file to write (JSON)")
    a.add_argument("--keep-arrays", metavar="DIR", type=_checked("keep-arrays", argcheck.writable_dir), help="also keep every entry's arrays as .npz files in DIR")
    a.add_argument("--shard", metavar="I/N", type=_checked("shard", argcheck.shard), help="run shard i of n of the corpus (1-based)")
    a.add_argument("--repeats", type=argcheck.ints("repeats", 2), default=2,
                   help="repetitions per entry, >= 2 (default %(default)s)")
    _add_jobs(a)
    a.add_argument("--subjects", type=_checked("subjects", argcheck.name_list), help="comma list of subjects (default: all but the control.* self-tests)")
    _add_plugin(a)
    a.add_argument("--quiet", action="store_true", help="no progress bar")
    a.add_argument("--profile", choices=_profiles(), help="audit the default corpus generated at this profile's "
                   "sizes (the pytest profiles' names: ci, dev, audit) instead of the audit corpus file; not with "
                   "--corpus (default: the file)")
    add_cluster_options(a)
    a.set_defaults(func=_lazy("harness.outputs.audit", "cmd_audit"))

    cmp_ = _verb(sub, "compare", "what changed between two audit files",
                 "Compare two audit files entry by entry: per subject x device x context, how many tensors "
                 "changed digest, by how much, a verdict, and the environment fields that differ.",
                 _codes("0  compared (with --exit-code: the same: every entry present in both is identical)",
                        "1  with --exit-code: changed (a verdict other than identical, or an entry in one file "
                        "only), as git diff --exit-code"))
    cmp_.add_argument("a", metavar="A.json", type=_checked("a", argcheck.readable_file), help="the first audit file")
    cmp_.add_argument("b", metavar="B.json", type=_checked("b", argcheck.readable_file), help="the second audit file")
    cmp_.add_argument("--out", metavar="DIR", type=_checked("out", argcheck.writable_dir), help="also write compare.md/.csv/.html into DIR")
    cmp_.add_argument("--exit-code", action="store_true", help="exit 1 when anything changed, 0 when the same")
    cmp_.set_defaults(func=_lazy("harness.outputs.audit", "cmd_compare"))

    m = _verb(sub, "merge", "many audit files as one matrix",
              "Merge audit files into one subject/device/context x machine matrix (shards of one run join one "
              "column).", _codes("0  merged and written"))
    m.add_argument("files", nargs="+", metavar="AUDIT.json", type=_checked("files", argcheck.readable_file),
                   help="audit files")
    m.add_argument("--out", metavar="DIR", required=True, type=_checked("out", argcheck.writable_dir), help="the directory to write merge.md/.csv/.html into")
    m.set_defaults(func=_lazy("harness.outputs.audit", "cmd_merge"))

    lo = _verb(sub, "localize", "the first Chainer function whose outputs differ",
               "Record a digest of every Chainer function node's inputs and outputs over two runs (repeats, two "
               "contexts or two devices) and name the first node whose outputs differ while its inputs matched.",
               _codes("0  it ran (the localization is printed, also when nothing differed)"))
    _add_reproducer(lo, "localize")
    lo.add_argument("--json", action="store_true", help="print the localization as JSON")
    _add_max_case_bytes(lo)
    lo.add_argument("--timeout", type=argcheck.seconds("timeout"), default=300.0, help="seconds before the localizing process is killed "
                                                               "(default %(default)s)")
    lo.set_defaults(func=cmd_localize)

    ex = _verb(sub, "export", "write a standalone script that reproduces a finding",
               "Write one self-contained Python file that reproduces a finding without the harness: it rebuilds "
               "the case's inputs, calls the library as the subject does, checks the finding's claim and exits 1 "
               "while the defect is there. Every finding prints this command beside its replay command.",
               _codes("0  the script was written"))
    _add_reproducer(ex, "export")
    ex.add_argument("--out", metavar="FILE", required=True, type=_checked("out", argcheck.writable_file),
                    help="the script to write")
    ex.add_argument("--markdown", metavar="FILE", type=_checked("markdown", argcheck.writable_file),
                    help="also write the text of an upstream bug report (title, environment, script, output)")
    ex.set_defaults(func=cmd_export)
    _add_bisect(sub)
    _track_given(p)
    return p


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
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
    b = sub.add_parser("bisect", help="which package and release changes a case's bits",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Between two environments that disagree on a case (pins, or two fingerprints: "
                       "a run or baseline directory, environment.json, an audit file), install each side in "
                       "throwaway environments, change one package at a time to find which one changes the bits, "
                       "then bisect its releases between the two pins and name the first that does.",
                       epilog=_codes("0  the two ends agree on the case", "1  a package and release named (or "
                                     "several packages change the bits only together)",
                                     "2  bad input, or an end that cannot be installed"))
    b.add_argument("case", help="a case JSON file (or a corpus .jsonl with --case-id)")
    b.add_argument("--case-id", default="", help="the case of a corpus file")
    b.add_argument("--subject", required=True, help="the subject to run")
    b.add_argument("--context", default="default", help="the context to run in (default %(default)s)")
    b.add_argument("--subject-plugin", action="append", default=[], metavar="MOD:OBJ",
                   help="load and register subjects from package.module:object (repeatable)")
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
    b.add_argument("--timeout", type=argcheck.seconds("timeout"), default=600.0, help="seconds per probe run")
    b.add_argument("--quiet", action="store_true", help="no progress lines")

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
            case=args.case, subject=args.subject, good=ends["good"], bad=ends["bad"], case_id=args.case_id,
            context=args.context,
            plugins=tuple(args.subject_plugin), cache=args.cache, find_links=tuple(args.find_links),
            no_index=args.no_index, installer=args.installer, timeout=args.timeout, quiet=args.quiet))

    b.set_defaults(func=run)
