"""The command line declares each option once, with one help text, and tells "given" from "left out" without
touching argparse's internals: a value left out parses as None and takes the verb's default afterwards."""

from __future__ import annotations

import ast
import collections
import pathlib

import pytest

from harness import cli, cli_options
from harness.execute.settings import CampaignOptions
from harness.judge.reproducer import OPTIONS

CLI = pathlib.Path(cli.__file__)
CLI_OPTIONS = pathlib.Path(cli_options.__file__)


def _declared_flags(source: str) -> list[str]:
    """Every long option the source declares: literal flags of ``add_argument(...)`` calls and the keys of the
    option table (the dict :func:`harness.cli_options.option_table` returns)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            out += [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
        elif isinstance(node, ast.FunctionDef) and node.name == "option_table":
            for ret in (n for n in ast.walk(node) if isinstance(n, ast.Return)):
                assert isinstance(ret.value, ast.Dict)
                out += [k.value for k in ret.value.keys if isinstance(k, ast.Constant)]
    return out


def _command_line_source() -> str:
    """The command line's source: its parser (cli.py) and its option table (cli_options.py)."""
    return CLI.read_text() + "\n" + CLI_OPTIONS.read_text()


def test_no_long_option_is_declared_twice():
    flags = _declared_flags(_command_line_source()) + [o.flag for o in OPTIONS if o.flag.startswith("--")]
    twice = {f: n for f, n in collections.Counter(flags).items() if n > 1}
    assert flags and not twice, twice


def test_the_source_check_sees_a_second_declaration():
    planted = _command_line_source() + '\n\ndef _x(p):\n    p.add_argument("--quiet", help="again")\n'
    flags = _declared_flags(planted) + [o.flag for o in OPTIONS]
    assert collections.Counter(flags)["--quiet"] == 2


def test_every_declared_option_reaches_some_verb():
    parser = cli.build_parser()
    verbs = parser._subparsers._group_actions[0].choices  # (reading the tree, not changing it)
    reached = {s for sp in verbs.values() for a in sp._actions for s in a.option_strings}
    reached |= {s for a in verbs["contracts"]._subparsers._group_actions[0].choices["check"]._actions
                for s in a.option_strings}
    assert set(cli_options.option_table()) <= reached, set(cli_options.option_table()) - reached


def _parse(*argv: str):
    args = cli.build_parser().parse_args(argv)
    return args, cli._given_dests(args)


def test_left_out_options_parse_as_none_and_are_not_given():
    args, given = _parse("report")
    assert args.repeats is None and getattr(args, "cluster.spread") is None
    assert not given & {"repeats", "fresh", "timeout", "devices", "cluster.spread", "cluster.workers"}
    args, given = _parse("gate")
    assert args.devices is None and not given & {"devices", "repeats", "fresh"}


def test_the_records_hold_the_defaults_the_help_shows():
    from harness.verbs.audit import AuditOptions
    from harness.verbs.gate import GateOptions
    from harness.verbs.report import ReportOptions

    s = ReportOptions().settings()
    assert (s.repeats, s.fresh, s.timeout) == (CampaignOptions.repeats, CampaignOptions.fresh,
                                               CampaignOptions.timeout)
    for verb, record in (("gate", GateOptions()), ("audit", AuditOptions(out="a.json"))):
        shown = cli_options.verb_defaults(verb)
        for k in ("devices", "repeats"):
            assert shown[k] == getattr(record, k), (verb, k)


@pytest.mark.parametrize("verb,dest", [("replay", "timeout"), ("shrink", "budget"), ("localize", "timeout")])
def test_a_verb_with_an_options_record_takes_its_defaults_from_the_record(verb, dest, tmp_path):
    case = tmp_path / "c.json"
    case.write_text("{}")
    extra = ["--kind", "error"] if verb == "shrink" else []
    args, given = _parse(verb, str(case), "--subject", "s", *extra)
    assert getattr(args, dest) is None and dest not in given  # the record, not the parser, holds the default
    text = cli.build_parser()._subparsers._group_actions[0].choices[verb].format_help()
    assert cli_options.help_text("(default {default})", cli_options.verb_defaults(verb)[dest], dest) in " ".join(
        text.split())


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
