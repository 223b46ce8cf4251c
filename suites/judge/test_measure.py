"""Unit tests of harness/judge/measure.py: which comparisons one task gets, from its record and arrays."""

from __future__ import annotations

import numpy as np

from harness.core.cases import Case
from harness.core.records import TaskRecord, TensorComparison
from harness.judge.contracts import Contract
from harness.judge.measure import Reference, measure_task, reference_contract, references_for

CASE = Case("embed", 1, {"vocab": 4, "width": 2, "ids_shape": [3]})


def _contract(**kw) -> Contract:
    base = dict(subject="s", device="cpu", context="*", reproducible=True, across_processes=False,
                identical_across=("blas1",), oracle="within", tolerance={}, reason="t")
    base.update(kw)
    return Contract(**base)


def _record(context: str = "blas2", device: str = "cpu") -> TaskRecord:
    t = TensorComparison(name="y", dtype="float32", shape=(3, 2), repeats=2, bitwise_identical=True, n_diff=0,
                         n_total=6,
                    frac_diff=0.0, max_ulp=0, max_ulp_index=None, first_diff_index=None, n_unique=1,
                    digests=("d",), nan_count=0, inf_count=0, shape_mismatch=False)
    return TaskRecord(key="k", case_id=CASE.id, family="embed", subject="s", device=device, context=context,
                      status="ok", runs=2, ok_runs=2, tensors={"y": t}, rep_processes=("pool", "pool"),
                      rep_digests={"y": ("d", "d")})


def test_references_are_the_reference_context_the_contract_contexts_and_the_cpu():
    assert references_for(_record(), _contract()) == [("context", "cpu", "default"), ("context", "cpu", "blas1")]
    assert ("device", "cpu", "default") in references_for(_record("default", "gpu:0"), _contract())
    assert references_for(_record("default"), _contract(identical_across=())) == []


def test_every_comparison_of_a_valid_task():
    y = np.arange(6, dtype=np.float32).reshape(3, 2)
    other = y.copy()
    other[0, 0] = np.nextafter(np.float32(0), np.float32(1))
    ms = measure_task(_record(), CASE, _contract(), arrays={"y": y},
                      references=[Reference("context", "default", {"y": y}), Reference("context", "blas1",
                                                                                        {"y": other})],
                      oracle=("oracle.embed", {"y": y.astype(np.float64)}))
    kinds = sorted((m.kind, m.other, m.verdict) for m in ms)
    assert ("repeat", "pool", "bit-identical") in kinds
    assert ("context", "default", "bit-identical") in kinds
    assert ("context", "blas1", "broken") in kinds  # the contract names blas1: identity required
    assert ("oracle", "oracle.embed", "within tolerance") in kinds


def test_an_oracle_gets_the_implicit_reference_contract_and_no_contract_is_a_failure():
    ms = measure_task(_record(), CASE, None, role="oracle", arrays={"y": np.zeros((3, 2), np.float32)})
    assert ms and all(m.contract.endswith("(built in)") for m in ms)
    assert reference_contract("oracle.x").reproducible
    none = measure_task(_record(), CASE, None, arrays={"y": np.zeros((3, 2), np.float32)})
    assert any(m.rule == "no contract" and m.verdict == "broken" for m in none)


def test_an_output_the_oracle_comparison_does_not_take_is_not_judged_where_the_contract_asks_for_it():
    """A plug-in's output of a dtype the comparison refuses (complex here; strings, 0-d alike) was skipped
    silently: now "not judged" (the gate fails on it) where the contract says ``oracle = "within"``."""
    y = np.ones((3, 2), np.complex64)
    oracle = ("oracle.embed", {"y": y.astype(np.complex128)})
    ms = measure_task(_record(), CASE, _contract(), arrays={"y": y}, oracle=oracle)
    missed = [m for m in ms if m.kind == "oracle"]
    assert [(m.tensor, m.verdict) for m in missed] == [("y", "not judged")]
    assert "not compared with the oracle" in missed[0].detail and "complex" in missed[0].detail
    recorded = measure_task(_record(), CASE, _contract(oracle="record"), arrays={"y": y}, oracle=oracle)
    assert not [m for m in recorded if m.kind == "oracle"]  # not asked for: nothing missing
