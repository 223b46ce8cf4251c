"""harness/verbs/contracts.py: ``contracts check`` passes the shipped file and names each problem of a file that
does not fit the subjects."""

from __future__ import annotations

import pytest

from harness.core.errors import ContractError
from harness.judge.contracts import DEFAULT_CONTRACTS
from harness.verbs.contracts import ContractsCheckOptions, check


def test_the_shipped_contracts_are_valid(capsys) -> None:
    assert check(ContractsCheckOptions()) == 0
    assert "all valid" in capsys.readouterr().out


def test_a_contract_for_an_unknown_subject_is_a_problem_naming_file_and_line(tmp_path, capsys) -> None:
    text = open(DEFAULT_CONTRACTS, encoding="utf-8").read().replace('"chainer.embed_id"', '"no.such.subject"', 1)
    bad = tmp_path / "c.toml"
    bad.write_text(text)
    assert check(ContractsCheckOptions(str(bad))) == 1
    err = capsys.readouterr().err
    assert f"{bad}:" in err and "subject='no.such.subject' is not registered" in err
    assert err.strip().splitlines()[-1].startswith("contracts check: ")


def test_a_missing_file_is_refused() -> None:
    with pytest.raises(ContractError):
        check(ContractsCheckOptions("/nonexistent/contracts.toml"))
