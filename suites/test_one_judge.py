"""One judge per verdict: the report, the gate and ``replay`` give the same verdict on the same tensor, and
each ``assert_*`` raises exactly when its pure function says so."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.core.errors import ComparisonFailure
from harness.core.records import VERDICT_ORDER
from harness.execute.campaign import CampaignOptions
from harness.execute.driver import run_campaign
from harness.execute.inprocess import measure_here
from harness.judge.contracts import load_contracts
from harness.judge.tolerance import assert_within_oracle, compare_oracle
from harness.outputs import results_table
from harness.outputs.gate import gate_violations
from harness.subjects.registry import SUBJECTS, subjects_for

ROOT = pathlib.Path(__file__).resolve().parents[1]
CASES = [
    Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [400], "id_kind": "collision", "distinct": 2}),
    Case("lstm", 3, {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [3, 2]}),
]
SUBJECT_NAMES = ["chainer.embed_id", "control.nondeterministic", "control.deterministic", "chainer.NStepLSTM",
            "oracle.embed", "oracle.lstm"]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("judge") / "run")
    run = run_campaign(d, CASES, subjects_for(SUBJECT_NAMES), [CPU], [get_context("default"), get_context("blas1")],
                       CampaignOptions(repeats=3, fresh=0, quiet=True), contracts=load_contracts())
    return run


def test_report_gate_and_replay_give_the_same_verdict(campaign):
    contracts = load_contracts()
    run = campaign
    results = results_table.results_frame(run)
    broken = {(v.measure.case_id, v.measure.subject, v.measure.context, v.measure.tensor, v.measure.kind)
              for v in gate_violations(run.directory, run.measures)}
    checked = 0
    for rec in run.records.values():
        if SUBJECTS[rec.subject].role == "oracle" or rec.status != "ok":
            continue
        case = next(c for c in CASES if c.id == rec.case_id)
        others = ["default"] if rec.context != "default" else []
        here = measure_here(contracts, rec.subject, case, CPU, rec.context, 3, contexts=others)
        mine = {(m.tensor, m.kind, m.other): m for m in run.measures
                if (m.case_id, m.subject, m.context) == (rec.case_id, rec.subject, rec.context)}
        for m in here.measures:
            theirs = mine.get((m.tensor, m.kind, m.other))
            assert theirs is not None, (rec.key, m.tensor, m.kind)
            # replay's (in-process) verdict is the campaign's
            assert m.verdict == theirs.verdict, (rec.key, m.tensor, m.kind, m.verdict, theirs.verdict)
            # the gate fails on exactly the broken ones
            in_gate = (rec.case_id, rec.subject, rec.context, m.tensor, m.kind) in broken
            assert in_gate == (theirs.verdict in ("broken", "error")), (rec.key, m.tensor, m.kind)
            checked += 1
        # the report's row verdict is the worst of the tensor's measures
        for name in rec.tensors:
            row = results[(results["key"] == rec.key) & (results["tensor"] == name)]
            verdicts = [mm.verdict for (t, _, _), mm in mine.items() if t in (name, "")]
            worst = max(verdicts, key=lambda v: VERDICT_ORDER[v] if v != "skipped" else -1)
            assert row["verdict"].iloc[0] == worst, (rec.key, name)
    assert checked >= 30, checked
    # the positive control did diverge, and its contract allows it: a finding, not a violation
    assert any(m.subject == "control.nondeterministic" and m.kind == "repeat" and m.identical is False
               for m in run.measures)


OPTIONS = st.fixed_dictionaries({}, optional={
    "atol": st.floats(0, 1e-2), "rtol": st.floats(0, 1e-2), "n_terms": st.integers(1, 500),
    "normwise": st.booleans(), "text": st.booleans(), "source": st.text(max_size=5),
    "bound": st.floats(0, 1e-3).map(lambda b: np.full((4, 3), b)),
})


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(options=OPTIONS, noise=st.floats(1e-9, 1e-1), seed=st.integers(0, 2**16))
def test_assert_within_oracle_raises_exactly_when_compare_oracle_says_not_within(options, noise, seed):
    rng = np.random.default_rng(seed)
    expected = rng.standard_normal((4, 3))
    actual = (expected + noise * rng.standard_normal((4, 3))).astype(np.float32)
    result = compare_oracle("t", actual, expected, **options)
    if result.within_tolerance:
        assert assert_within_oracle("t", actual, expected, **options) == result
    else:
        with pytest.raises(ComparisonFailure) as info:
            assert_within_oracle("t", actual, expected, **options)
        assert str(info.value) == result.message()


def test_no_role_is_decided_by_a_name_prefix():
    pattern = re.compile(r"""startswith\(\s*\(?\s*["'](oracle|control)\.""")
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "harness").rglob("*.py"))
            if p.name != "registry.py"
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not hits, hits
