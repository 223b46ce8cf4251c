"""The command line declares each option once, with one help text, and tells "given" from "left out" without
touching argparse's internals: a value left out parses as None and takes the verb's default afterwards."""

from __future__ import annotations

import ast
import collections
import pathlib

import pytest

from harness import cli
from harness.execute.settings import CampaignSettings
from harness.judge.reproducer import OPTIONS

CLI = pathlib.Path(cli.__file__)


def _declared_flags(source: str) -> list[str]:
    """Every long option the source declares: literal flags of ``add_argument(...)`` calls and the keys of the
    option table (the dict :func:`harness.cli._options` returns)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            out += [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
        elif isinstance(node, ast.FunctionDef) and node.name == "_options":
            for ret in (n for n in ast.walk(node) if isinstance(n, ast.Return)):
                assert isinstance(ret.value, ast.Dict)
                out += [k.value for k in ret.value.keys if isinstance(k, ast.Constant)]
    return out


def test_no_long_option_is_declared_twice():
    flags = _declared_flags(CLI.read_text()) + [o.flag for o in OPTIONS if o.flag.startswith("--")]
    twice = {f: n for f, n in collections.Counter(flags).items() if n > 1}
    assert flags and not twice, twice


def test_the_source_check_sees_a_second_declaration():
    planted = CLI.read_text() + '\n\ndef _x(p):\n    p.add_argument("--quiet", help="again")\n'
    flags = _declared_flags(planted) + [o.flag for o in OPTIONS]
    assert collections.Counter(flags)["--quiet"] == 2


def test_every_declared_option_reaches_some_verb():
    parser = cli.build_parser()
    verbs = parser._subparsers._group_actions[0].choices  # (reading the tree, not changing it)
    reached = {s for sp in verbs.values() for a in sp._actions for s in a.option_strings}
    reached |= {s for a in verbs["contracts"]._subparsers._group_actions[0].choices["check"]._actions
                for s in a.option_strings}
    assert set(cli._options()) <= reached, set(cli._options()) - reached


def _parse(*argv: str):
    args = cli.build_parser().parse_args(argv)
    given = cli._given_dests(args)
    cli._fill_defaults(args)
    return args, given


def test_left_out_options_take_each_verbs_default_and_are_not_given():
    args, given = _parse("report")
    assert (args.repeats, args.fresh, args.timeout) == (CampaignSettings.repeats, CampaignSettings.fresh,
                                                        CampaignSettings.timeout)
    assert not given & {"repeats", "fresh", "timeout", "devices", "spread", "cluster_workers"}
    args, given = _parse("gate")  # (a verb with an options record: the record holds the defaults)
    assert args.devices is None and not given & {"devices", "repeats", "fresh"}
    d = cli._defaults("gate")
    assert (d["devices"], d["repeats"], d["fresh"], d["shrink_budget"], d["spread"]) == ("all", 3, 1, 60.0, "shard")
    args, _ = _parse("audit", "--out", "a.json")
    assert (args.devices, args.contexts, args.repeats, args.profile) == ("all", "default", 2, None)


def test_an_option_given_as_its_default_counts_as_given():
    args, given = _parse("report", "--repeats", str(CampaignSettings.repeats), "--spread", "shard")
    assert {"repeats", "spread"} <= given and args.repeats == CampaignSettings.repeats


@pytest.mark.parametrize("verb,dest", [("replay", "timeout"), ("shrink", "budget"), ("localize", "timeout")])
def test_a_verb_with_an_options_record_takes_its_defaults_from_the_record(verb, dest, tmp_path):
    case = tmp_path / "c.json"
    case.write_text("{}")
    extra = ["--kind", "error"] if verb == "shrink" else []
    args, given = _parse(verb, str(case), "--subject", "s", *extra)
    assert getattr(args, dest) is None and dest not in given  # the record, not the parser, holds the default
    text = cli.build_parser()._subparsers._group_actions[0].choices[verb].format_help()
    assert f"(default {cli._defaults(verb)[dest]})" in " ".join(text.split())
