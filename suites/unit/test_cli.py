"""The command line is generated from the options records: each verb's parser from its record's fields, each option
declared once (on one field, which other records and the pytest plug-in repeat with :func:`like`), and a value
left out parses as None so that the record, not the parser, holds the default."""

from __future__ import annotations

import argparse
import ast
import collections
import dataclasses
import pathlib

import pytest

from harness import cli, pytest_plugin
from harness.core import options
from harness.execute.settings import CampaignOptions
from harness.judge.reproducer import OPTIONS, VERBS

CLI = pathlib.Path(cli.__file__)


def _verb_parsers() -> dict[str, argparse.ArgumentParser]:
    verbs = cli.build_parser()._subparsers._group_actions[0].choices  # (reading the tree, not changing it)
    out = dict(verbs)
    out["contracts"] = verbs["contracts"]._subparsers._group_actions[0].choices["check"]
    return out


def _records() -> dict[str, type]:
    return {verb: cli._record_of(verb)[0] for verb in cli._RECORDS}


class _PluginParser:
    """What pytest hands ``pytest_addoption``: each ``addoption`` call kept."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[str, ...], dict]] = []

    def getgroup(self, *a: object) -> "_PluginParser":
        return self

    def addoption(self, *names: str, **kw: object) -> None:
        self.calls.append((names, kw))


def _declarations() -> list[tuple[str, str, object]]:
    """(program, flag, its declaration) of every option of every verb and of the pytest plug-in, read from the
    records (the reproducer's options from its table, the one record of what reproduces a finding)."""
    out: list[tuple[str, str, object]] = []
    for verb, record in _records().items():
        out += [("harness", flag, origin) for flag, origin in options.origins(record)]
        out += [("harness", o.flag, o) for o in OPTIONS if verb in VERBS and verb in o.verbs]
    shared = {o.flag: o for o, _dest in pytest_plugin.shared_flags()}
    gate = dict(options.origins(_records()["gate"]))
    plugin = _PluginParser()
    pytest_plugin.pytest_addoption(plugin)
    for names, _kw in plugin.calls:
        flag = names[0]
        out.append(("pytest", flag, gate[flag] if flag in shared else ("pytest", flag)))
    return out


#: The plug-in's own option of a command-line spelling with another meaning: the devices device-generic tests are
#: instantiated on (``all`` among them), not the one device a reproducer runs on.
_PLUGIN_OWN = {"--device"}


#: A spelling several verbs give each a meaning of its own, one declaration per meaning whose help says what it
#: bounds: seconds of one run (report, replay, shrink, trajectory), of the localizing child, of one bisect probe.
_MEANINGS = {"--timeout"}


def _twice(decls: list[tuple[str, str, object]]) -> dict[str, int]:
    """The flags declared in more than one place (one declaration repeated by other records counts once; a spelling
    of :data:`_MEANINGS` may be declared once per meaning: two declarations of one help text are one too many)."""
    where: dict[str, set[int]] = collections.defaultdict(set)
    helps: dict[str, set[object]] = collections.defaultdict(set)
    for program, flag, origin in decls:
        if not (program == "pytest" and flag in _PLUGIN_OWN):
            where[flag].add(id(origin))
            helps[flag].add(getattr(origin, "help", None))
    return {f: len(o) for f, o in where.items() if len(o) > 1 and (f not in _MEANINGS or len(helps[f]) < len(o))}


def test_each_flag_is_declared_once_across_the_command_line_and_the_pytest_plugin():
    decls = _declarations()
    flags = {f for _, f, _ in decls}
    assert {"--out", "--devices", "--cluster-workers", "--good", "--subject-plugin", "--contracts"} <= flags
    assert len(flags) >= 50
    assert _twice(decls) == {}
    plugin = {f for p, f, _ in decls if p == "pytest"}
    assert {"--contracts", "--baseline", "--subject-plugin"} <= plugin


def test_the_once_check_sees_a_second_declaration():
    @dataclasses.dataclass(frozen=True)
    class PlantedOptions:
        quiet: bool = options.opt("--quiet", "again", default=False, switch=True)
        repeats: int = options.like(_records()["gate"], "repeats", default=1)  # a repetition, not a declaration

    planted = [("harness", f, o) for f, o in options.origins(PlantedOptions)]
    assert _twice(_declarations() + planted) == {"--quiet": 2}


def test_each_meaning_of_timeout_is_declared_once_with_its_own_help():
    records = _records()
    helps = {verb: next(o.help for o in options.declared(records[verb]) if o.flag == "--timeout")
             for verb in ("report", "replay", "shrink", "localize", "bisect")}
    assert helps["replay"] == helps["shrink"] == helps["report"]  # one meaning, one declaration: seconds of a run
    assert len({helps["report"], helps["localize"], helps["bisect"]}) == 3
    assert "localizing child" in helps["localize"] and "probe" in helps["bisect"]

    @dataclasses.dataclass(frozen=True)
    class PlantedOptions:  # the localize meaning declared a second time
        timeout: float = options.opt("--timeout", helps["localize"], default=1.0)

    planted = [("harness", f, o) for f, o in options.origins(PlantedOptions)]
    assert _twice(_declarations() + planted) == {"--timeout": 4}


def test_each_verbs_parser_holds_exactly_the_options_its_record_declares():
    parsers = _verb_parsers()
    for verb, record in _records().items():
        declared = [o.flag for o in options.declared(record)]
        if verb in VERBS:
            declared += [o.flag for o in OPTIONS if verb in o.verbs]
        parsed = [s if a.option_strings else a.dest for a in parsers[verb]._actions if a.dest != "help"
                  for s in (a.option_strings or [a.dest])[:1]]
        assert sorted(parsed) == sorted(declared), verb


def _parse(*argv: str):
    args = cli.build_parser().parse_args(argv)
    given = {k for k, v in vars(args).items() if v is not None and v is not False and v != []}
    return args, given


def test_left_out_options_parse_as_none_and_are_not_given():
    args, given = _parse("report")
    assert args.repeats is None and getattr(args, "cluster.spread") is None
    assert not given & {"repeats", "fresh", "timeout", "devices", "cluster.spread", "cluster.workers"}
    args, given = _parse("gate")
    assert args.devices is None and not given & {"devices", "repeats", "fresh"}


def _help_of(verb: str, flag: str) -> str:
    action = next(a for a in _verb_parsers()[verb]._actions if flag in a.option_strings)
    return str(action.help)


def test_the_help_shows_the_records_defaults():
    from harness.verbs.audit import AuditOptions
    from harness.verbs.gate import GateOptions
    from harness.verbs.report import ReportOptions

    s = ReportOptions().settings()
    assert (s.repeats, s.fresh, s.timeout) == (CampaignOptions.repeats, CampaignOptions.fresh,
                                               CampaignOptions.timeout)
    assert _help_of("report", "--repeats").endswith(f"(default {CampaignOptions.repeats})")
    for verb, record in (("gate", GateOptions()), ("audit", AuditOptions(out="a.json"))):
        assert _help_of(verb, "--repeats").endswith(f"(default {record.repeats})"), verb
        assert _help_of(verb, "--spread").endswith(f"(default {record.cluster.spread})"), verb
    assert GateOptions().repeats != AuditOptions(out="a.json").repeats  # (two verbs, two defaults shown)


@pytest.mark.parametrize("verb,dest", [("replay", "timeout"), ("shrink", "budget"), ("localize", "timeout")])
def test_a_verb_with_an_options_record_takes_its_defaults_from_the_record(verb, dest, tmp_path):
    case = tmp_path / "c.json"
    case.write_text("{}")
    extra = ["--kind", "error"] if verb == "shrink" else []
    args, given = _parse(verb, str(case), "--subject", "s", *extra)
    assert getattr(args, dest) is None and dest not in given  # the record, not the parser, holds the default
    field = next(f for f in dataclasses.fields(_records()[verb]) if f.name == dest)
    shown = options.help_of(field.metadata["option"], field.default)
    assert shown in " ".join(_verb_parsers()[verb].format_help().split())


def _argparse_users(root: pathlib.Path) -> list[str]:
    """Functions outside cli.py that take an argparse.Namespace or read ``args.``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if path == CLI:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                notes = [a.annotation for a in node.args.args + node.args.kwonlyargs if a.annotation is not None]
                if any("Namespace" in ast.unparse(n) for n in notes):
                    out.append(f"{path.name}:{node.lineno} {node.name}")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "args":
                out.append(f"{path.name}:{node.lineno} args.{node.attr}")
    return out


def test_nothing_below_the_command_line_takes_an_argparse_namespace(tmp_path):
    assert _argparse_users(CLI.parent) == []
    planted = tmp_path / "planted.py"
    planted.write_text("import argparse\n\ndef run(args: argparse.Namespace) -> int:\n    return args.x\n")
    assert len(_argparse_users(tmp_path)) == 2


def test_the_documented_default_case_limit_is_the_codes(monkeypatch, capsys) -> None:
    from harness.cli import main
    from harness.core.case_limits import DEFAULT_LIMIT_TEXT, MAX_CASE_BYTES_ENV, max_case_bytes_default
    from harness.core.cost import machine_memory, memory_limit

    monkeypatch.delenv(MAX_CASE_BYTES_ENV, raising=False)
    assert DEFAULT_LIMIT_TEXT == "half this machine's memory"
    assert max_case_bytes_default() == machine_memory() // 2 and memory_limit("cpu") == (machine_memory() // 2,
                                                                                         DEFAULT_LIMIT_TEXT)
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert f"(default ${MAX_CASE_BYTES_ENV} or {DEFAULT_LIMIT_TEXT})" in helptext and "quarter" not in helptext


def test_the_package_front_door_names_each_verb_and_record_and_imports_them_only_on_use():
    import subprocess
    import sys

    code = ("import sys, harness; assert not any(m.startswith('harness.verbs') for m in sys.modules); "
            "import inspect; print(all(callable(getattr(harness, n)) for n in harness.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    import harness

    assert {"Case", "Reproducer", "export", "ExportOptions", "trajectory", "TrajectoryOptions"} <= set(harness.__all__)


# ---- a rule between two options is the record's: Python and the command line are refused alike --------
def _rules(corpus: str, out: str):
    """(argv, the same options as a record) for each rule between two options."""
    from harness.outputs.fleet import ClusterOptions
    from harness.verbs.audit import AuditOptions
    from harness.verbs.cases import CasesOptions
    from harness.verbs.gate import GateOptions
    from harness.verbs.report import ReportOptions

    return [
        (["gate", "--profile", "dev", "--corpus", corpus], lambda: GateOptions(profile="dev", corpus=corpus)),
        (["audit", "--out", out, "--profile", "dev", "--corpus", corpus],
         lambda: AuditOptions(out=out, profile="dev", corpus=corpus)),
        (["report", "--profile", "dev", "--corpus", corpus], lambda: ReportOptions(profile="dev", corpus=corpus)),
        (["report", "--seed", "3", "--corpus", corpus], lambda: ReportOptions(seed=3, corpus=corpus)),
        (["cases", "--coverage", "--profile", "dev", "--corpus", corpus],
         lambda: CasesOptions(coverage=True, profile="dev", corpus=corpus)),
        (["cases", "--coverage", "--seed", "3", "--family", "embed"],
         lambda: CasesOptions(coverage=True, seed=3, family="embed")),
        (["cases", "--corpus", corpus], lambda: CasesOptions(corpus=corpus)),
        (["gate", "--cluster-workers", "3"], lambda: GateOptions(cluster=ClusterOptions(workers=3))),
        (["audit", "--out", out, "--spread", "every"],
         lambda: AuditOptions(out=out, cluster=ClusterOptions(spread="every"))),
        (["report", "--spread", "every"], lambda: ReportOptions(cluster=ClusterOptions(spread="every"))),
    ]


def test_a_python_caller_gets_the_command_lines_refusal_for_each_rule_between_options(tmp_path, capsys):
    from harness.core.errors import InvalidArgument

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("")
    rules = _rules(str(corpus), str(tmp_path / "a.json"))
    for argv, build in rules:
        with pytest.raises(InvalidArgument) as refused:
            build()
        assert cli.main(argv) == 2, argv
        line = capsys.readouterr().err
        assert line == f"harness: error: InvalidArgument: {refused.value}\n", (argv, line)
    assert len({str(a) for a, _ in rules}) == len(rules) >= 10


def _options_records() -> list[type]:
    """Every options record: each ``class ...Options`` of the package (found in the source, then imported), and
    every record nested in one (a field whose type is a dataclass)."""
    import dataclasses
    import importlib
    import typing

    root = CLI.parent
    found: list[type] = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Options"):
                module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
                found.append(getattr(importlib.import_module(module), node.name))
    seen: list[type] = []
    while found:
        cls = found.pop()
        if cls in seen:
            continue
        seen.append(cls)
        hints = typing.get_type_hints(cls)
        found += [t for f in dataclasses.fields(cls) for t in (hints[f.name],) if dataclasses.is_dataclass(t)]
    return seen


def _thawed(records: list[type]) -> list[str]:
    return [r.__qualname__ for r in records if not r.__dataclass_params__.frozen]  # type: ignore[attr-defined]


def test_every_options_record_and_every_record_nested_in_one_is_frozen():
    from harness.execute.settings import CampaignOptions
    from harness.judge.reproducer import Reproducer
    from harness.outputs.fleet import ClusterOptions
    from harness.verbs.gate import GateOptions

    records = _options_records()
    assert {GateOptions, ClusterOptions, CampaignOptions, Reproducer} <= set(records), records
    assert _thawed(records) == []


def test_the_frozen_check_names_a_mutable_record():
    import dataclasses

    @dataclasses.dataclass
    class PlantedOptions:
        x: int = 0

    from harness.verbs.gate import GateOptions

    assert _thawed([GateOptions, PlantedOptions]) == [PlantedOptions.__qualname__]
