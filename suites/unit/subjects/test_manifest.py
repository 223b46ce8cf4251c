"""harness/subjects/manifest.py: a plug-in's subjects and its answers to ``accepts()`` are taken in a child
process; the timeout comes from the environment and a bad value is refused in one line."""

from __future__ import annotations

import pytest

from harness.core.cases import Case
from harness.core.errors import PluginError
from harness.subjects.manifest import TIMEOUT_ENV, load_timeout, take_manifest

CASE = Case("embed", 3, {"vocab": 5, "width": 3, "ids_shape": [4]})
LSTM = Case("lstm", 3, {"n_layers": 1, "in_size": 2, "hidden": 3, "lengths": [2]})


def test_the_manifest_lists_the_plugins_subjects_and_what_each_accepts() -> None:
    subjects, accepts = take_manifest("suites.plugins.second_run:SUBJECTS", [CASE, LSTM], timeout=120)
    names = [s["name"] for s in subjects]
    assert names == ["secondrun.dies"]
    assert accepts[("secondrun.dies", CASE.id)] is True and accepts[("secondrun.dies", LSTM.id)] is False


def test_a_plugin_that_cannot_be_loaded_is_one_plugin_error() -> None:
    with pytest.raises(PluginError) as info:
        take_manifest("suites.plugins.no_such_module:SUBJECTS", timeout=120)
    assert "\n" not in str(info.value) and "no_such_module" in str(info.value)


def test_the_timeout_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "7.5")
    assert load_timeout() == 7.5
    for bad in ("soon", "0", "1e9"):
        monkeypatch.setenv(TIMEOUT_ENV, bad)
        with pytest.raises(PluginError, match=TIMEOUT_ENV):
            load_timeout()
