"""findings.csv holds each finding's export command, the one the finding renders; cells.csv and the page say why
each check that did not run was not run, whichever path made it so."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from harness.core.cost import timed_out_twice
from harness.core.errors import RecordError
from harness.core.records import Measure, TaskRecord
from harness.execute.measure_pass import _cause, relation_measures
from harness.judge import task_verdicts, verdicts
from harness.judge.coverage import missing_measures
from harness.judge.findings import Classification
from harness.outputs import tables
from harness.outputs.page_view import _not_judged
from suites.unit.outputs.test_render import _findings


def test_findings_csv_has_each_findings_export_commands_and_none_for_a_control():
    found = _findings()
    df = tables.findings_frame(found)
    assert list(df["export"]) == ["\n".join(f.exports()) for f in found]
    for f, e, r in zip(found, df["export"], df["replay"]):
        upstream = f.classification not in (Classification.CONTROL, Classification.NOT_JUDGED)
        assert bool(e) == (bool(r) and upstream)
    assert any(df["export"])


# ---- every check that did not run says why ----------------------------------------------------------------



KEY = {"case_id": "c1", "subject": "chainer.embed_id", "device": "cpu", "context": "default"}
CONTRACT = SimpleNamespace(subject="chainer.embed_id", device="cpu", context="*", line=10, source="contracts.toml",
                           oracle="within", invariant_under=("subbatch",))


def _record(subject: str = "chainer.embed_id", status: str = "ok", skip_reason: str | None = None) -> TaskRecord:
    return TaskRecord(key=f"k-{subject}", case_id="c1", family="embed", subject=subject, device="cpu",
                      context="default", status=status, runs=1, ok_runs=int(status == "ok"),
                      statuses={status: 1}, skip_reason=skip_reason)


def _unrun_measures() -> dict[str, Measure]:
    """One measure from every path that makes a check "not judged" or "skipped"."""
    task = lambda reason: task_verdicts.judge_task(CONTRACT, KEY, "skipped", "skipped", None, reason)  # noqa: E731
    cost = ("case c1 needs about 3.0 GiB at its peak (3,221,225,472 bytes: inputs 1.0 GiB, working set 1.9 GiB), "
            "over the limit of 1,073,741,824 bytes (1.0 GiB: --max-case-bytes; --max-case-bytes or "
            "$HARNESS_MAX_CASE_BYTES sets it)")
    missing = missing_measures(_record(), CONTRACT, [], oracle="oracle.embed", oracle_takes_case=True,
                               relations_possible=["subbatch"])
    by_kind = {m.kind: m for m in missing}
    out = {
        "a device absent": task("no GPU: nvidia-smi not found"),
        "a case over the memory limit": task(cost),
        "a run starved twice": task(timed_out_twice(20.0, 0.04)),
        "a skip with no reason given": task(None),
        "an output the oracle cannot compare": verdicts.oracle_not_compared(CONTRACT, KEY, "y", "oracle.embed",
                                                                            "0-d output"),
        "an order reference with no values": verdicts.judge_order(KEY, "y", None, None, "reference.embed", "rows"),
        "a relation with no base arrays": relation_measures(_record(), SimpleNamespace(family="embed"),
                                                            {"base": "c1", "name": "subbatch", "label": "l",
                                                             "index": 0}, CONTRACT, None, None)[0],
        "an oracle that gave nothing": by_kind["oracle"],
        "a relation nothing compared": by_kind["relation"],
        "a relation the campaign left out": _cause(by_kind["relation"], [_record()], []),
        "an oracle the campaign left out": _cause(by_kind["oracle"], [_record()], None),
        "an oracle skipped on the case": _cause(by_kind["oracle"], [_record(), _record(
            "oracle.embed", "skipped", "oracle.embed does not take this case")], None),
    }
    assert all(m is not None for m in out.values())
    return out  # type: ignore[return-value]


@pytest.mark.parametrize("path", sorted(_unrun_measures()))
def test_every_check_that_did_not_run_says_why_in_its_cell_and_on_the_page(path: str) -> None:
    m = _unrun_measures()[path]
    assert m.verdict in ("not judged", "skipped") and m.detail.strip()
    cells = tables.cells_frame([m])
    [reason] = list(cells["reason"])
    assert reason and reason == m.detail[:300]
    [(_, _, why)] = _not_judged(cells)
    assert why == reason and "no reason recorded" not in why


def test_the_causes_are_said_in_their_own_words() -> None:
    ms = _unrun_measures()
    assert ms["a relation the campaign left out"].detail.startswith("not run: --relations none leaves out 'subbatch'")
    assert ms["an oracle the campaign left out"].detail.startswith("not run: the campaign's subjects (--subjects) "
                                                                  "leave out oracle.embed")
    assert "oracle.embed does not take this case" in ms["an oracle skipped on the case"].detail
    assert ms["a run starved twice"].verdict == "not judged"
    assert ms["a run starved twice"].detail.startswith("timed out twice (limit 20 s of CPU, CPU share 4%)")
    assert ms["a device absent"].verdict == "skipped" and ms["a case over the memory limit"].verdict == "not judged"


@pytest.mark.parametrize("verdict", ["not judged", "skipped"])
def test_a_check_that_did_not_run_cannot_be_recorded_without_its_reason(verdict: str) -> None:
    with pytest.raises(RecordError, match="gives no reason"):
        Measure(kind="task", tensor="", verdict=verdict, detail="  ", **KEY)
    m = Measure(kind="task", tensor="", verdict=verdict, detail="not run: no GPU", **KEY)
    with pytest.raises(RecordError, match="gives no reason"):
        Measure.from_dict({**m.to_dict(), "detail": ""})
    assert dataclasses.replace(m, detail="x").detail == "x"
