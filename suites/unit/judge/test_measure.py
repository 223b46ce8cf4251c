"""Unit tests of harness/judge/measure.py: which comparisons one task gets, from its record and arrays."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.cases import Case, build_arrays
from harness.core.devices import CPU
from harness.core.records import TaskRecord, TensorComparison
from harness.execute.isolated import Runner
from harness.judge.contracts import Contract, load_contracts
from harness.judge.measure import Reference, measure_task, reference_contract, references_for
from harness.judge.tolerance import AMPLIFICATION, amplification_floor, judge_oracle, tolerance_for
from harness.subjects.oracle import lstm_oracle, pipeline_oracle

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


# The amplification floor of harness/judge/tolerance.py: the LSTM and pipeline oracles also run in the case's
# dtype (``noise.<tensor>``: how far that run lands from float64), and a subject may be up to
# ``AMPLIFICATION`` times that far. A network that amplifies rounding is then judged against what a correct
# implementation in its dtype shows on the same case; a well-conditioned one keeps the dtype default.

SPEC = {"n_layers": 2, "in_size": 96, "hidden": 96, "lengths": [5, 4]}
#: A case the issue describes: 2 layers of 384, weights not scaled to the layer (``chaotic``), lengths up to 12.
#: Measured with tools/amplification.py: Chainer's NStepLSTM was beyond the dtype default on 31 of its 40
#: tensors there, and within the floor on all of them.
CHAOTIC = Case("lstm", 1000, {"n_layers": 2, "in_size": 384, "hidden": 384, "lengths": [12, 7, 3],
                              "dtype": "float32", "weight_kind": "chaotic", "w_scale": 1.0, "bidirectional": False,
                              "initial_state": "none"}, tags=("amplification",))


def _oracle(**over):
    spec = {**SPEC, **over}
    case = Case("lstm", 4, spec)
    return case, lstm_oracle(spec, build_arrays(case))


def test_the_floor_follows_the_networks_conditioning():
    floors = {kind: amplification_floor(_oracle(weight_kind=kind)[1]["noise.grad.ws.0.0"])
              for kind in ("lecun", "chaotic")}
    assert floors["chaotic"] > 10 * floors["lecun"] > 0, floors
    assert amplification_floor(None) is None
    assert amplification_floor(np.array([np.nan, 2.0])) == AMPLIFICATION * 2.0


def test_the_floor_passes_the_reference_runs_own_error_and_fails_a_real_one():
    case, out = _oracle(weight_kind="chaotic")
    exp, noise = out["grad.ws.0.0"], out["noise.grad.ws.0.0"]
    noisy = (exp + noise).astype(np.float32)  # exactly as far as the float32 reference run
    assert judge_oracle(case, "grad.ws.0.0", noisy, exp, noise=noise)[0].within_tolerance
    wrong = (exp * 1.01).astype(np.float32)  # a 1% error: a defect, whatever the conditioning
    err = judge_oracle(case, "grad.ws.0.0", wrong, exp, noise=noise)[0]
    assert not err.within_tolerance and "amplification" in err.tolerance_source


def test_noise_is_recorded_for_float16_and_float32_cases_only():
    spec = {"n_layers": 1, "hidden": 3, "lengths": [2, 1], "vocab": 4, "width": 2, "ignore_label": -1}
    out = pipeline_oracle(spec, build_arrays(Case("pipeline", 2, spec)))
    assert {k for k in out if k.startswith("noise.")} == {f"noise.{k}" for k in out if not k.startswith("noise.")}
    s64 = {**spec, "dtype": "float64"}
    assert not any(k.startswith("noise.") for k in pipeline_oracle(s64, build_arrays(Case("pipeline", 2, s64))))
    assert any(k.startswith("noise.") for k in _oracle(dtype="float16")[1])


@pytest.mark.parametrize("rules, floored", [((), False), (("amplification",), True)])
def test_a_stated_tolerance_takes_the_floor_only_where_the_contract_lists_it(rules, floored):
    contract = Contract(subject="s", device="cpu", context="*", reproducible=True, across_processes=False,
                        identical_across=(), oracle="within", tolerance={"float32": (0.0, 0.0)}, reason="t",
                        oracle_rules=rules)
    case, out = _oracle(weight_kind="chaotic")
    exp, noise = out["grad.ws.0.0"], out["noise.grad.ws.0.0"]
    noisy = (exp + noise).astype(np.float32)
    assert ("amplification" in tolerance_for(case, "grad.ws.0.0", "float32", contract).rules) is floored
    assert judge_oracle(case, "grad.ws.0.0", noisy, exp, contract, noise=noise)[0].within_tolerance is floored


def test_a_chaotic_network_is_judged_by_its_floor_not_flagged_by_the_default():
    """Chainer's NStepLSTM on the chaotic case, run in a worker: beyond the dtype default on most tensors (false
    alarms: the same computation in float32 is as far off), within the floor on every one."""
    contracts = load_contracts(None)
    with Runner() as runner:
        got = runner.run(CHAOTIC, "chainer.NStepLSTM", CPU, "default")
        oracle = runner.run(CHAOTIC, "oracle.lstm", CPU, "default")
    assert got.record.status == "ok" and oracle.arrays, (got.record.status, got.record.errors)
    checked = without = 0
    for name, a in got.arrays.items():
        exp = oracle.arrays[name]
        without += not judge_oracle(CHAOTIC, name, a, exp)[0].within_tolerance
        checked += 1
    assert checked >= 30 and without >= checked // 2, (checked, without)
    measures = measure_task(got.record, CHAOTIC, contracts.find("chainer.NStepLSTM", "cpu", "default"),
                            arrays=got.arrays, oracle=("oracle.lstm", oracle.arrays))
    judged = [m for m in measures if m.kind == "oracle"]
    assert len(judged) == checked and all(m.verdict == "within tolerance" for m in judged), \
        [(m.tensor, m.verdict, m.error_ratio) for m in judged if m.verdict != "within tolerance"]


def test_oracle_comparisons_on_threads_give_the_measures_of_one_thread(monkeypatch):
    """Tensors compared with the oracle on threads (a large task) give the very measures, in the same order,
    that one thread gives; one the comparison cannot take (complex) is still not judged with its reason."""
    import harness.judge.parallel as M

    rng = np.random.default_rng(3)
    names = {"y": (40, 30), "grad.W": (50, 20), "grad.x": (7,), "c": (4,)}
    tensors, arrays, expected = {}, {}, {}
    for name, shape in names.items():
        e = rng.standard_normal(shape)
        a = (e.astype(np.complex64) if name == "c" else e.astype(np.float32))
        if name == "grad.W":
            a.ravel()[5] += 1.0  # beyond the tolerance: a failure, with its worst element
        arrays[name], expected[name] = a, (e.astype(np.complex128) if name == "c" else e)
        tensors[name] = TensorComparison(name=name, dtype=str(a.dtype), shape=shape, repeats=1,
                                         bitwise_identical=True, n_diff=0, n_total=a.size, frac_diff=0.0, max_ulp=0,
                                         max_ulp_index=None, first_diff_index=None, n_unique=1, digests=("d",),
                                         nan_count=0, inf_count=0, shape_mismatch=False)
    record = TaskRecord(key="k", case_id=CASE.id, family="embed", subject="s", device="cpu", context="default",
                        status="ok", runs=1, ok_runs=1, tensors=tensors, rep_processes=("pool",),
                        rep_digests={n: ("d",) for n in names})

    def measures(threshold):
        monkeypatch.setattr(M, "THREADED_ELEMENTS", threshold)
        return measure_task(record, CASE, _contract(), arrays=arrays, oracle=("oracle.embed", expected))

    one, threaded = measures(10 ** 12), measures(0)
    assert threaded == one
    oracle = {m.tensor: m.verdict for m in one if m.kind == "oracle"}
    assert oracle["grad.W"] == "broken" and oracle["y"] == "within tolerance" and oracle["c"] == "not judged"
