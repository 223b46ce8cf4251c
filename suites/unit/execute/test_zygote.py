"""harness/execute/zygote.py: the environment a worker starts with, and the switch that spawns workers instead of
forking them from a zygote."""

from __future__ import annotations

import os
from pathlib import Path

from harness.core.worker_defaults import WORKER_ENV_DEFAULTS
from harness.execute import zygote as Z
from harness.execute.memory_limits import LIMIT_ENV

ROOT = str(Path(__file__).resolve().parents[3])


def test_a_workers_environment_layers_defaults_environment_and_overrides(monkeypatch) -> None:
    name, default = next(iter(WORKER_ENV_DEFAULTS.items()))
    monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(LIMIT_ENV, "123")
    assert Z.worker_env({})[name] == default
    monkeypatch.setenv(name, "from-the-user")
    env = Z.worker_env({})
    assert env[name] == "from-the-user" and LIMIT_ENV not in env
    assert Z.worker_env([(name, "override")])[name] == "override"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == ROOT


def test_harness_zygote_0_means_no_zygote(monkeypatch) -> None:
    monkeypatch.setenv("HARNESS_ZYGOTE", "0")
    assert Z.zygote_for(Z.worker_env({})) is None
