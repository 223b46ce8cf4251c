"""A case is refused by what it will cost before any worker starts: one line naming the case, the estimate and
the limit, exit 2 (the whole `python -m harness` process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.core.cases import Case

ROOT = Path(__file__).resolve().parents[2]


def test_an_lstm_case_of_a_million_steps_is_refused_up_front(tmp_path):
    case = Case("lstm", 0, {"n_layers": 1, "in_size": 4, "hidden": 8, "lengths": [1_000_000]})
    path = tmp_path / "long.json"
    path.write_text(case.to_json())
    proc = subprocess.run([sys.executable, "-m", "harness", "replay", str(path), "--subject", "chainer.NStepLSTM"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error:"), proc.stderr
    assert f"case {case.id} needs about" in lines[0] and "GiB" in lines[0] and "over the limit of" in lines[0]
    assert "time bound" not in proc.stderr  # refused before the runs were even planned
    assert proc.stdout == ""
