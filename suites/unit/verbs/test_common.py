"""Every environment variable the harness reads is checked before a verb starts (harness.verbs.common.
check_environment): a bad value is one line naming the variable, exit 2."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.core.errors import InvalidArgument
from harness.core.vocabulary import PROFILES
from harness.verbs.common import check_environment


@pytest.mark.parametrize("name, value, says", [
    ("HARNESS_PROFILE", "nonsense", "is not one of ci, dev, audit, realistic"),
    ("HARNESS_GPU", "yes", "must be 0 or 1"),
    ("HARNESS_ZYGOTE", "off", "must be 0 or 1"),
    ("HARNESS_PROGRESS_SECONDS", "soon", "must be a number of seconds"),
    ("HARNESS_PROGRESS_SECONDS", "-1", "must be a number of seconds"),
    ("HARNESS_JOBS", "many", "must be an integer"),
    ("HARNESS_PLUGIN_TIMEOUT", "abc", "must be a number of seconds"),
    ("HARNESS_MAX_CASE_BYTES", "-5", "must be a positive int"),
    ("HARNESS_WORKER_MEMORY", "134217728", "a worker process needs to start"),
    ("HARNESS_MAX_OUTPUT_BYTES", "lots", "must be a number of bytes"),
])
def test_a_bad_environment_variable_is_one_line_naming_it(monkeypatch, capsys, name, value, says) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(InvalidArgument, match=name) as info:
        check_environment()
    assert says in str(info.value)
    assert main(["subjects"]) == 2  # every verb: before any work
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("harness: error:") and name in line and says in line


def test_the_profiles_the_check_knows_are_the_generators(monkeypatch) -> None:
    from harness.generate.profiles import PROFILES as MADE

    assert tuple(MADE) == PROFILES
    for p in PROFILES:
        monkeypatch.setenv("HARNESS_PROFILE", p)
        check_environment()
