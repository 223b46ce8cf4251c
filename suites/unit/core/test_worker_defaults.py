"""harness/core/worker_defaults.py: the pytest plugin gives its own process the workers' defaults, in time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.core.worker_defaults import WORKER_ENV_DEFAULTS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# A fresh interpreter imports the plugin as pytest does, with a finder that notes the environment at the
# moment NumPy is first imported (when OpenBLAS loads and reads it).
_PROBE = r"""
import json, os, sys

seen = {}

class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and "at_numpy" not in seen:
            seen["at_numpy"] = {k: os.environ.get(k) for k in NAMES}
        return None

NAMES = json.loads(sys.argv[1])
sys.meta_path.insert(0, Spy())
import harness.pytest_plugin  # noqa: F401
seen["after"] = {k: os.environ.get(k) for k in NAMES}
print(json.dumps(seen))
"""


def _probe(env_value: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in WORKER_ENV_DEFAULTS}
    env["PYTHONPATH"] = ROOT
    if env_value is not None:
        env.update({k: env_value for k in WORKER_ENV_DEFAULTS})
    p = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(sorted(WORKER_ENV_DEFAULTS))], env=env,
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_the_plugin_sets_the_defaults_before_numpy_loads():
    seen = _probe(None)
    assert "at_numpy" in seen, "importing the plugin did not import NumPy: the probe checked nothing"
    assert seen["at_numpy"] == WORKER_ENV_DEFAULTS
    assert seen["after"] == WORKER_ENV_DEFAULTS


@pytest.mark.parametrize("value", ["28", "4"])
def test_the_users_value_wins(value):
    seen = _probe(value)
    assert seen["at_numpy"] == seen["after"] == {k: value for k in WORKER_ENV_DEFAULTS}
