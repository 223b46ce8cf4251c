"""The pytest plug-in keeps what its options decide on ``config.stash`` (one frozen record), and the helpers a
test calls read that record."""

from __future__ import annotations

import dataclasses

import pytest

from harness import pytest_plugin
from harness.pytest_plugin import GATE, GateSession, gate_of


def test_the_sessions_options_are_one_frozen_record_on_the_config_stash(pytestconfig, gate, contracts):
    assert pytestconfig.stash[GATE] is gate and gate_of(pytestconfig) is gate
    assert gate.repeats == max(1, pytestconfig.getoption("gate_repeats"))
    assert gate.baseline == pytestconfig.getoption("baseline")
    assert gate.plugins == tuple(pytestconfig.getoption("subject_plugin") or ())
    assert gate.contracts is contracts and gate.devices
    with pytest.raises(dataclasses.FrozenInstanceError):
        gate.repeats = 99  # type: ignore[misc]


def test_the_helpers_a_test_calls_see_its_sessions_record(gate):
    assert pytest_plugin._RUNNING.get() is gate
    assert not hasattr(pytest_plugin, "GateState")


def test_a_config_before_configure_has_the_default_record():
    class Bare:
        stash = pytest.Stash()

    assert gate_of(Bare()) == GateSession()
