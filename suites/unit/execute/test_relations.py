"""Invariance relations: members replay from their JSON alone, the measure pass judges them against their base
case, the controls behave as built, and a contract that claims an invariance that does not hold fails."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from harness.core.cases import Case, build_arrays
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.execute.campaign import CampaignOptions
from harness.execute.driver import run_campaign
from harness.execute.measure_pass import measure_campaign
from harness.execute.relations import RELATIONS, members, pairs, parse_relations, relation_of
from harness.judge.contracts import load_contracts
from harness.outputs.gate import gate_violations
from harness.subjects.registry import SUBJECTS, load_plugin, subjects_for

PLUGIN = "suites.plugins.rowwise:SUBJECTS"
LSTM = Case("lstm", 3, {"n_layers": 1, "in_size": 64, "hidden": 64, "lengths": [5, 4, 4, 2]})
EMBED = Case("embed", 4, {"vocab": 50, "width": 8, "ids_shape": [16, 8], "id_kind": "collision", "distinct": 5})
PIPE = Case("pipeline", 9, {"vocab": 30, "width": 8, "hidden": 8, "n_layers": 1, "lengths": [5, 3, 4],
                            "ignore_label": -1})


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    before = dict(SUBJECTS)
    load_plugin(PLUGIN)
    try:
        names = ["chainer.NStepLSTM", "chainer.embed_id", "pipeline.embed_lstm", "control.rowwise", "control.rowmix",
                 "oracle.lstm", "oracle.embed", "oracle.pipeline"]
        d = str(tmp_path_factory.mktemp("rel") / "run")
        yield run_campaign(d, [LSTM, EMBED, PIPE], subjects_for(names), [CPU], [get_context("default")],
                           CampaignOptions(repeats=2, fresh=0, quiet=True, plugins=(PLUGIN,)),
                           relations=list(RELATIONS.values()))
    finally:
        SUBJECTS.clear()
        SUBJECTS.update(before)


def _by(run, subject: str, relation: str | None = None) -> list:
    return [m for m in run.measures if m.kind == "relation" and m.subject == subject
            and (relation is None or m.relation == relation)]


def test_members_replay_from_their_json_alone():
    for base in (LSTM, EMBED, PIPE):
        ms = members(base, list(RELATIONS.values()))
        assert {m.relation for m in ms} == {r.name for r in RELATIONS.values() if base.family in r.families}
        a = build_arrays(base)
        for m in ms:
            again = Case.from_json(m.case.to_json())
            assert again.id == m.case.id and relation_of(again)["base"] == base.id
            got = build_arrays(again)
            if base.family == "lstm":
                for j, i in enumerate(m.index):
                    assert (np.array_equal(got[f"xs.{j}"], a[f"xs.{i}"])
                            and np.array_equal(got[f"gys.{j}"], a[f"gys.{i}"]))
                assert np.array_equal(got["ws.0.0"], a["ws.0.0"])  # shared weights regenerate bit for bit
            elif base.family == "embed":
                assert np.array_equal(got["x"], a["x"][list(m.index)]) and np.array_equal(got["W"], a["W"])
    assert members(Case("lstm", 1, {"n_layers": 1, "in_size": 2, "hidden": 2, "lengths": [3]}),
                   list(RELATIONS.values())) == []  # a batch of one has nothing to reorder
    assert [r.name for r in parse_relations("order,alone")] == ["order", "alone"] and parse_relations("none") == []


def test_pairs_map_rows_back():
    base = {"ys.0": np.zeros((2, 3)), "ys.1": np.ones((1, 3)), "hy": np.arange(12.).reshape(1, 4, 3)}
    member = {"ys.0": np.ones((1, 3)), "ys.1": np.zeros((2, 3)), "hy": np.arange(12.).reshape(1, 4, 3)[:, [1, 0]]}
    got = {label: (b, m) for label, b, m in pairs("lstm", "order", (1, 0), base, member)}
    assert np.array_equal(*got["ys.1 as ys.0"]) and np.array_equal(*got["ys.0 as ys.1"])
    assert np.array_equal(*got["hy"])


def test_nsteplstm_bits_depend_on_the_company_a_sequence_keeps(run):
    """Measured on this machine (OpenBLAS): alone, in a sub-batch, reordered or with a duplicate, sequence 0's
    outputs are not bit-identical to the whole batch's, yet within the oracle's tolerance."""
    for relation in ("alone", "subbatch", "order", "duplicate"):
        ms = _by(run, "chainer.NStepLSTM", relation)
        assert ms and any(m.identical is False for m in ms), relation
        assert all(m.verdict in ("bit-identical", "diverged as allowed") for m in ms), relation
    worst = max(m.max_ulp for m in _by(run, "chainer.NStepLSTM") if m.identical is False)
    assert worst > 0
    member_oracle = [m for m in run.measures if m.kind == "oracle" and m.subject == "chainer.NStepLSTM"]
    assert member_oracle and all(m.within for m in member_oracle)


def test_embed_id_grad_w_changes_bits_when_rows_are_permuted(run):
    order = {m.tensor: m for m in _by(run, "chainer.embed_id", "order")}
    assert order["y"].identical is True  # rows mapped back: the forward is a gather
    assert order["grad.W"].identical is False and order["grad.W"].max_ulp > 0  # the sum in another order
    assert all(m.identical for m in _by(run, "chainer.embed_id", "subbatch"))  # y rows alone: a gather


def test_pipeline_padding_changes_nothing(run):
    ms = _by(run, "pipeline.embed_lstm", "padding")
    assert ms and all(m.identical for m in ms), [(m.tensor, m.max_ulp) for m in ms if not m.identical]
    assert any(m.tensor == "grad.W" for m in ms)


def test_the_controls_behave_as_built(run):
    rowwise = _by(run, "control.rowwise")
    assert rowwise and all(m.identical for m in rowwise)
    assert {m.relation for m in rowwise} == {"subbatch", "order", "duplicate"}
    rowmix = collections.Counter((m.relation, m.identical) for m in _by(run, "control.rowmix"))
    assert rowmix[("subbatch", False)] >= 1, rowmix


def test_a_contract_claiming_an_invariance_that_does_not_hold_fails(run, tmp_path):
    shipped = open(load_contracts().path).read()
    head = 'subject = "chainer.embed_id"\ndevice = "cpu"\ncontext = "*"\ninvariant_under = ["subbatch", "duplicate"]'
    assert head in shipped, "the shipped chainer.embed_id cpu * line changed"
    text = shipped.replace(head, head.replace('["subbatch", "duplicate"]', '["order", "subbatch"]'), 1)
    path = tmp_path / "c.toml"
    path.write_text(text)
    measures = measure_campaign(run.directory, load_contracts(path), write=False)
    # (the two plug-in controls have no contract line at all: a broken verdict for them, not asserted here)
    found = [v for v in gate_violations(run.directory, measures)
             if v.measure.kind == "relation" and v.subject == "chainer.embed_id"]
    assert found and {v.measure.relation for v in found} == {"order"}  # subbatch holds: no violation for it
    assert all(v.subject == "chainer.embed_id" and v.tensor == "grad.W" for v in found)
    assert "invariant_under order" in found[0].headline()
    # the shipped contracts claim nothing that does not hold here
    assert not [v for v in gate_violations(run.directory, run.measures)
                if v.measure.kind == "relation" and not v.subject.startswith("control.row")]


def test_an_invariance_finding_is_localized_to_the_first_node_whose_rows_differ():
    """Sequence 0 alone: the first input GEMM, whose M dimension changed (measured here), is named; a
    permuted embedding batch: the gradient's scatter-add (EmbedIDGrad)."""
    from harness.execute.localization import localize_relation

    lstm, embed = relation_cases_here()
    alone = localize_relation(lstm, "chainer.NStepLSTM", "alone")
    assert alone.startswith("alone:seq0: forward of LinearFunction (occurrence 1)"), alone
    assert "in the batch" in alone
    order = localize_relation(embed, "chainer.embed_id", "order")
    assert "EmbedIDGrad" in order, order
    assert localize_relation(Case("lstm", 1, {"n_layers": 1, "in_size": 2, "hidden": 2, "lengths": [3]}),
                             "chainer.NStepLSTM", "alone").startswith("no member")


def relation_cases_here():
    from harness.generate.corpora import relation_cases

    return relation_cases()
