"""harness/execute/settings.py: a campaign's settings made in code are checked by the command line's rules, and
``jobs=0`` means ``$HARNESS_JOBS`` or one lane per CPU, bounded."""

from __future__ import annotations

import pytest

from harness.core.errors import InvalidArgument
from harness.execute.settings import JOBS_ENV, MAX_DEFAULT_JOBS, CampaignOptions, default_jobs


@pytest.mark.parametrize("kwargs, name", [({"repeats": 0}, "repeats"), ({"fresh": -1}, "fresh"),
                                          ({"timeout": 0}, "timeout"), ({"jobs": -2}, "jobs"),
                                          ({"max_case_bytes": 0}, "max-case-bytes")])
def test_a_bad_setting_is_refused_naming_it(kwargs: dict, name: str) -> None:
    with pytest.raises(InvalidArgument, match=name):
        CampaignOptions(**kwargs)


def test_lanes_are_the_jobs_asked_for_or_the_default(monkeypatch) -> None:
    assert CampaignOptions(jobs=3).lanes() == 3
    monkeypatch.setenv(JOBS_ENV, "2")
    assert CampaignOptions(jobs=0).lanes() == 2 == default_jobs()
    monkeypatch.delenv(JOBS_ENV)
    assert 1 <= default_jobs() <= MAX_DEFAULT_JOBS


@pytest.mark.parametrize("value", ["two", "0", "-1"])
def test_a_bad_jobs_variable_is_refused_naming_it(monkeypatch, value: str) -> None:
    monkeypatch.setenv(JOBS_ENV, value)
    with pytest.raises(InvalidArgument, match=JOBS_ENV):
        default_jobs()
