"""findings.csv holds each finding's export command, the one the finding renders."""

from __future__ import annotations

from harness.judge.findings import Classification
from harness.outputs import tables
from suites.test_render import _findings


def test_findings_csv_has_each_findings_export_commands_and_none_for_a_control():
    found = _findings()
    df = tables.findings_frame(found)
    assert list(df["export"]) == ["\n".join(f.exports()) for f in found]
    for f, e, r in zip(found, df["export"], df["replay"]):
        upstream = f.classification not in (Classification.CONTROL, Classification.NOT_JUDGED)
        assert bool(e) == (bool(r) and upstream)
    assert any(df["export"])
