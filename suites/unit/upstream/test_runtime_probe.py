"""harness/upstream/runtime_probe.py: run as a program, it prints one JSON object with Chainer's runtime fields
and the BLAS it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.upstream import runtime_probe

PROBE = Path(runtime_probe.__file__)


def test_the_probe_prints_every_runtime_field_as_one_json_object() -> None:
    p = subprocess.run([sys.executable, "-I", str(PROBE)], capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    fields = json.loads(p.stdout)
    assert set(runtime_probe.CHAINER_FIELDS) <= set(fields)
    assert fields["Chainer"] == "7.8.1" and fields["CuPy"] in (runtime_probe.ABSENT, fields["CuPy"])
    assert all(isinstance(v, str) and v for v in fields.values())
