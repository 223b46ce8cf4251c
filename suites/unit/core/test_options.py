"""A record's fields declare its options: the parser, its help and the record built back all come from them."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from harness.core import argcheck
from harness.core.errors import InvalidArgument
from harness.core.options import add_options, declared, group, opt, parse_text, record_from


@dataclass(frozen=True)
class _Inner:
    workers: int | None = opt("--workers", "workers (default {default})", default=None, check=argcheck.count(1),
                              shown=2, metavar="N")


@dataclass(frozen=True)
class _Outer:
    files: tuple[str, ...] = opt("files", "inputs", default=(), nargs="+")
    out: str | None = opt("--out", "where (default {default})", default=None, none_says="stdout", role="output")
    quiet: bool = opt("--quiet", "say less", default=False, switch=True)
    shrink: bool = opt("--no-shrink", "do not shrink", default=True, off=True)
    plugins: tuple[str, ...] = opt("--plugin", "a plug-in (repeatable)", default=(), many=True)
    inner: _Inner = group("inner things", _Inner)

    def __post_init__(self) -> None:
        if self.out == "-" and not self.quiet:
            raise InvalidArgument(f"out={self.out!r} needs --quiet")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t")
    add_options(p, _Outer)
    return p


def test_the_parser_holds_each_declared_option_once_with_its_help_and_default():
    flags = [s for a in _parser()._actions for s in a.option_strings]
    assert flags == ["-h", "--help", "--out", "--quiet", "--no-shrink", "--plugin", "--workers"]
    assert [o.flag for o in declared(_Outer)] == ["files", "--out", "--quiet", "--no-shrink", "--plugin", "--workers"]
    text = " ".join(_parser().format_help().split())
    assert "where (default stdout)" in text and "workers (default 2)" in text and "inner things:" in text


def test_the_record_built_back_has_what_was_given_and_its_own_defaults_else():
    given = record_from(_Outer, vars(_parser().parse_args(["a", "b", "--no-shrink", "--plugin", "m:o",
                                                           "--workers", "3"])))
    assert given == _Outer(files=("a", "b"), shrink=False, plugins=("m:o",), inner=_Inner(workers=3))
    assert record_from(_Outer, vars(_parser().parse_args(["a"]))) == _Outer(files=("a",))


def test_a_bad_value_is_the_parsers_one_line_refusal(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["a", "--workers", "0"])
    assert "workers=0 must be >= 1" in capsys.readouterr().err


def test_a_rule_between_two_options_refuses_the_parsed_values_as_the_record_does():
    with pytest.raises(InvalidArgument, match="needs --quiet"):
        record_from(_Outer, vars(_parser().parse_args(["a", "--out", "-"])))
    assert record_from(_Outer, vars(_parser().parse_args(["a", "--out", "-", "--quiet"]))).quiet


@dataclass(frozen=True)
class _Parsed:
    names: tuple[str, ...] | None = opt("--names", "a comma list", default=None, check=argcheck.names())
    part: argcheck.Shard | None = opt("--part", "i/n", default=None, check=argcheck.shards())

    def __post_init__(self) -> None:
        parse_text(self)


def _parsed(argv: list[str]) -> _Parsed:
    p = argparse.ArgumentParser(prog="t")
    add_options(p, _Parsed)
    return record_from(_Parsed, vars(p.parse_args(argv)))


def test_a_comma_list_and_a_shard_are_parsed_once_on_the_command_line():
    got = _parsed(["--names", "b,a,b", "--part", "2/3"])
    assert got.names == ("b", "a") and got.part == argcheck.Shard(2, 3) and str(got.part) == "2/3"


def test_text_from_python_is_parsed_by_the_same_check_into_the_same_record():
    assert _Parsed(names="b,a,b", part="2/3") == _parsed(["--names", "b,a,b", "--part", "2/3"])
    assert _Parsed(names=("x",)).names == ("x",)  # the parsed form passes as it is


def test_bad_text_from_python_is_the_command_lines_refusal(capsys):
    with pytest.raises(SystemExit):
        _parsed(["--part", "3/2"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    with pytest.raises(InvalidArgument) as exc:
        _Parsed(part="3/2")
    assert str(exc.value) == "part='3/2' needs 1 <= i <= n" and str(exc.value) in line
