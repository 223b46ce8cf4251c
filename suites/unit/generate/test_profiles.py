"""The ci profile reports a failing example without shrinking it (so a failing gate costs what a passing one
does), the same example every run; dev shrinks. No deadline anywhere: nothing depends on the machine's speed."""

from __future__ import annotations

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from harness.generate.profiles import PROFILES, register_profiles


def _failing_calls(profile: str) -> tuple[int, list[int]]:
    register_profiles()
    calls: list[list[int]] = []

    @settings(settings.get_profile(profile), database=None, derandomize=True)
    @given(st.lists(st.integers(0, 10_000), min_size=3, max_size=20))
    def prop(xs: list[int]) -> None:
        calls.append(xs)
        assert sum(xs) < 500  # fails on almost every example: shrinking has a long way to go

    with pytest.raises(AssertionError):
        prop()
    return len(calls), calls[-1]


def test_ci_does_not_shrink_and_dev_does():
    assert PROFILES["ci"].shrink is False and PROFILES["dev"].shrink and PROFILES["audit"].shrink
    register_profiles()
    assert Phase.shrink not in settings.get_profile("ci").phases
    assert Phase.shrink in settings.get_profile("dev").phases
    assert all(settings.get_profile(p).deadline is None for p in PROFILES)
    ci_calls, ci_last = _failing_calls("ci")
    dev_calls, dev_last = _failing_calls("dev")
    assert ci_calls < dev_calls  # dev went on shrinking
    assert sum(dev_last) == 500 and sum(ci_last) > 500  # the minimal failing example, and a raw one


def test_ci_reports_the_same_example_every_run():
    assert _failing_calls("ci") == _failing_calls("ci")
