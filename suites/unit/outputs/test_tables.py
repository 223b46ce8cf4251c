"""findings.csv holds each finding's export command, the one the finding renders."""

from __future__ import annotations

from harness.outputs import tables
from suites.test_render import _findings


def test_findings_csv_has_each_findings_export_command():
    found = _findings()
    df = tables.findings_frame(found)
    assert list(df["export"]) == [f.export() for f in found]
    assert all(bool(e) == bool(r) for e, r in zip(df["export"], df["replay"])) and any(df["export"])
