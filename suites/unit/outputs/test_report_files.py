"""harness/outputs/report_files.py: the environment as a flat key/value table, and the report's three figures as
jobs any process can draw."""

from __future__ import annotations

import json

from harness.outputs.report_files import FIGURES, figure_jobs, flatten_environment
from suites.unit.outputs.test_render import _cells, _measures


def test_the_environment_is_flattened_to_dotted_keys_with_json_values() -> None:
    df = flatten_environment({"python": "3.11", "blas": [{"num_threads": 2}], "gpu": {"reason": "none"}})
    table = dict(zip(df["key"], df["value"]))
    assert table["python"] == "3.11" and table["gpu.reason"] == "none"
    assert any(k.startswith("blas") for k in table)
    assert all(isinstance(v, str) for v in table.values())
    json.loads(next(v for k, v in table.items() if k.startswith("blas")))  # non-strings are JSON


def test_one_job_per_figure_in_order_with_its_drawer() -> None:
    jobs = figure_jobs(_cells([{"subject": "a.impl"}]), _measures(), {})
    assert [(name, kind) for name, kind, _ in jobs] == list(zip(FIGURES, ("matrix", "divergence", "error_ratio")))
