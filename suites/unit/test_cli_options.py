"""harness/cli_options.py: every option of the table has help text and goes onto a verb's parser with the verb's
default in its help and its value check as its type; a record's defaults are what --help shows."""

from __future__ import annotations

import argparse

import pytest

from harness import cli_options as C
from harness.verbs.gate import GateOptions


def _parser(verb: str, *flags: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"harness {verb}", exit_on_error=False)
    C.add_options(p, verb, *flags)
    return p


def test_every_option_has_help_text() -> None:
    table = C.option_table()
    assert table and all(o.help.strip() for o in table.values())
    assert all(flag.startswith("--") for flag in table)


def test_a_verbs_defaults_are_its_records_and_show_in_its_help() -> None:
    defaults = C.verb_defaults("gate")
    assert defaults["repeats"] == GateOptions.repeats and defaults["profile"] == GateOptions.profile
    assert C.verb_defaults("export") == {}
    assert C.help_text("at most {default} runs", 3, "repeats") == "at most 3 runs"
    help_of = {a.dest: a.help for a in _parser("gate", "--repeats")._actions}
    assert str(GateOptions.repeats) in help_of["repeats"]


def test_a_value_is_checked_by_its_options_type() -> None:
    p = _parser("gate", "--repeats", "--contexts")
    assert p.parse_args(["--repeats", "4", "--contexts", "default,blas1"]).contexts == "default,blas1"
    with pytest.raises(argparse.ArgumentError):
        p.parse_args(["--contexts", "no-such-context"])
    with pytest.raises(argparse.ArgumentError):
        p.parse_args(["--repeats", "zero"])


def test_the_reproducers_checks_map_to_types_and_none_to_none() -> None:
    assert C.value_type("", "x") is None
    ints = C.value_type("count>=1", "repeats")
    assert ints("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match="repeats=0 must be >= 1"):
        ints("0")
