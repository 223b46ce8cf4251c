"""harness.core.cost: the estimate bounds what a run really holds, and grows with what the case asks for."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.core.cases import Case
from harness.core.cost import BASE_TIMEOUT, PROCESS_BYTES, Cost, estimate, run_timeout

#: How far above the measured peak the estimate may lie: the estimate is a bound (never below the measure) that
#: is still worth refusing by (at most this factor above it).
FACTOR = 2.0

# One run of one subject in a fresh interpreter; prints its peak resident bytes as JSON: the high-water mark of
# this process's own memory (VmHWM), not ru_maxrss, which on Linux keeps the parent's peak across fork and exec
# (a test process that ran large cases would set every child's figure); and that mark before the run, once
# Chainer and ESPnet are imported (what the process holds of its own).
_MEASURE = """
import json, sys
from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.subjects.base import execute
from harness.subjects.registry import get_subject
from harness.core.compat import import_chainer
from harness.subjects.call_runs import espnet_module
import_chainer(), espnet_module()
def hwm():
    return 1024 * next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
base = hwm()
r = execute(get_subject(sys.argv[1]), Case.from_json(sys.argv[2]), CPU, get_context("default"))
print(json.dumps({"status": r.status, "peak": hwm(), "base": base}))
"""


def _lstm(lengths, hidden=128, in_size=40, n_layers=2, bidirectional=True) -> Case:
    return Case("lstm", 1, {"n_layers": n_layers, "hidden": hidden, "in_size": in_size, "lengths": list(lengths),
                            "bidirectional": bidirectional})


def _embed(vocab, width, ids_shape) -> Case:
    return Case("embed", 1, {"vocab": vocab, "width": width, "ids_shape": list(ids_shape)})


def _pipeline(lengths, vocab=5000, width=128, hidden=128) -> Case:
    return Case("pipeline", 1, {"vocab": vocab, "width": width, "n_layers": 1, "hidden": hidden,
                                "lengths": list(lengths)})


@pytest.mark.slow
@pytest.mark.parametrize("subject,case", [
    ("chainer.NStepLSTM", _lstm([4000], hidden=8, in_size=4, n_layers=1, bidirectional=False)),
    ("chainer.NStepBiLSTM", _lstm([120, 100, 80, 60])),
    ("oracle.lstm", _lstm([120, 100, 80, 60])),
    ("chainer.embed_id", _embed(20000, 256, (20, 40))),
    ("oracle.embed", _embed(20000, 256, (20, 40))),
    ("pipeline.embed_lstm", _pipeline([100, 80, 60])),
], ids=lambda v: v if isinstance(v, str) else "")
def test_estimate_bounds_the_measured_peak_of_a_moderate_case(subject, case):
    out = subprocess.run([sys.executable, "-c", _MEASURE, subject, case.to_json()], capture_output=True,
                         text=True, check=True)
    measured = json.loads(out.stdout.strip().splitlines()[-1])
    assert measured["status"] == "ok"
    peak = estimate(case, subject=subject).peak_of(subject)
    assert measured["peak"] <= peak, (subject, measured["peak"], peak)
    # Worth refusing by: the case's own part (beyond the process, whose allowance PROCESS_BYTES is a bound for
    # any device's libraries, above this interpreter's own) at most FACTOR times what the run added.
    assert peak - PROCESS_BYTES <= FACTOR * (measured["peak"] - measured["base"]), (subject, measured, peak)


def test_lstm_working_set_grows_with_steps_layers_and_directions():
    base = estimate(_lstm([100] * 4, n_layers=1, bidirectional=False)).subject
    assert estimate(_lstm([200] * 4, n_layers=1, bidirectional=False)).subject > 1.9 * base
    assert estimate(_lstm([100] * 4, n_layers=1, bidirectional=True)).subject > 1.9 * base
    assert estimate(_lstm([100] * 4, n_layers=2, bidirectional=False)).subject > 1.9 * base


def test_a_million_steps_needs_more_than_any_machine_here():
    cost = estimate(_lstm([1_000_000], hidden=8, in_size=4, n_layers=1, bidirectional=False))
    assert cost.peak > 24 << 30  # this 24 GiB machine; the worker may use half


def test_espnet_one_hot_counts_on_the_gpu_only():
    case = _embed(65000, 8, (30, 150))
    one_hot = 30 * 150 * 65000 * 4
    gpu = estimate(case, device="gpu", subject="espnet.embed_id").subject
    assert gpu - estimate(case, device="gpu", subject="chainer.embed_id").subject >= one_hot
    assert estimate(case, device="cpu", subject="espnet.embed_id").subject < one_hot
    assert estimate(case, device="gpu").subject >= gpu  # no subject named: the costliest


def test_run_timeout_scales_with_work_and_an_explicit_one_wins():
    small = estimate(_lstm([3, 2], hidden=8, in_size=4))
    large = estimate(_lstm([160] * 8, hidden=320, in_size=83))
    assert run_timeout(small) >= BASE_TIMEOUT
    assert run_timeout(large) > run_timeout(small) + 60
    assert run_timeout(large, explicit=5.0) == 5.0
    assert isinstance(small, Cost) and small.flops < large.flops


def test_a_gpu_case_is_held_to_the_devices_memory(monkeypatch):
    from harness.core import cost, nvsmi

    monkeypatch.delenv("HARNESS_MAX_CASE_BYTES", raising=False)
    monkeypatch.setattr(nvsmi, "query_gpus", lambda timeout=15.0: {"gpus": [{"index": 0, "memory_total_mib": 1024}]})
    cost.device_memory.cache_clear()
    try:
        limit, what = cost.memory_limit("gpu:0")
        assert limit == 1 << 30 and what == "gpu:0's memory"
        assert cost.memory_limit("cpu")[0] > 1 << 30  # the host's limit is the machine's
        # ESPnet's one-hot matrix on the GPU: 30 x 150 ids x 65,000 columns of float32 do not fit 1 GiB
        case = _embed(65000, 8, (30, 150))
        assert "gpu:0's memory" in cost.over_limit(case, device="gpu:0", subject="espnet.embed_id")
        assert cost.over_limit(case, device="cpu", subject="espnet.embed_id") is None
    finally:
        cost.device_memory.cache_clear()


def _one_layer(in_size: int, hidden: int, lengths: list[int]) -> Case:
    return Case("lstm", 1, {"n_layers": 1, "in_size": in_size, "hidden": hidden, "lengths": lengths})


def test_a_product_is_threaded_only_past_openblass_single_thread_sizes():
    from harness.core.cost import SERIAL_GEMM_MNK, SERIAL_GEMV_ELEMENTS, threaded_product

    # two rows at every step: GEMMs of 2 x in x 64 multiply-adds (hidden 16: the hidden product is 2 x 16 x 64)
    at = SERIAL_GEMM_MNK // (2 * 64)
    assert threaded_product(_one_layer(at, 16, [2, 2])) is None
    assert threaded_product(_one_layer(at + 1, 16, [2, 2])) == (2, at + 1, 64)
    # one row: a matrix-vector product of in x 16 matrix elements (hidden 4)
    edge = SERIAL_GEMV_ELEMENTS // 16
    assert threaded_product(_one_layer(edge - 1, 4, [3])) is None
    assert threaded_product(_one_layer(edge, 4, [3])) is not None
    # an embedding's CPU run multiplies no matrices, however large
    assert threaded_product(Case("embed", 1, {"vocab": 65_000, "width": 1024, "ids_shape": [300, 40]})) is None
