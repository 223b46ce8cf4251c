"""Cross-device agreement: every subject's GPU results against its CPU results and the oracle."""

from __future__ import annotations

import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.generate.edges import with_edge_tags
from harness.judge import tolerance
from harness.judge.contracts import load_contracts
from harness.subjects.base import execute
from harness.subjects.registry import get_subject

pytestmark = [pytest.mark.gate]

CASES = [with_edge_tags(c) for c in (
    Case("embed", 5, {"vocab": 3, "width": 8, "ids_shape": [64, 64], "id_kind": "collision", "distinct": 3,
                      "ignore_label": -1, "ignore_frac": 0.1}),
    Case("embed", 6, {"vocab": 50, "width": 4, "ids_shape": [10, 7], "ignore_label": 49, "ignore_frac": 0.2}),
    Case("lstm", 7, {"n_layers": 2, "in_size": 5, "hidden": 6, "lengths": [4, 1, 3], "initial_state": "given"}),
    Case("lstm", 8, {"n_layers": 1, "in_size": 4, "hidden": 3, "lengths": [2, 5], "bidirectional": True}),
    Case("pipeline", 9, {"vocab": 30, "width": 8, "hidden": 8, "n_layers": 1, "lengths": [5, 3, 4],
                         "ignore_label": -1, "id_kind": "collision", "distinct": 4}),
)]
SUBJECTS = ["chainer.embed_id", "chainer.EmbedID", "espnet.embed_id", "espnet.EmbedID", "chainer.NStepLSTM",
            "chainer.NStepBiLSTM", "chainer.n_step_lstm", "chainer.n_step_bilstm", "pipeline.embed_lstm",
            "pipeline.espnet_embed_lstm"]


@pytest.mark.parametrize("subject", SUBJECTS)
def test_gpu_agrees_with_cpu_within_tolerance(subject, device):
    if not device.is_gpu:
        pytest.skip("compares a GPU with the CPU; this instance is the CPU itself")
    subj = get_subject(subject)
    contracts = load_contracts(None)
    ran = 0
    for case in CASES:
        if not subj.applies_to(case):
            continue
        cpu = execute(subj, case, CPU, get_context("default"))
        gpu = execute(subj, case, device, get_context("default"))
        assert cpu.ok, cpu.error
        assert gpu.ok, gpu.error
        assert set(cpu.arrays) == set(gpu.arrays)
        # Tensors a [[known_defect]] declares wrong on the GPU for this case are the contracts' to judge (the
        # verdict "known defect"); the others must agree with the CPU.
        wrong = {t for d in contracts.known_defects_for(subject, "gpu", case.tags) for t in d.wrong}
        for name, a in cpu.arrays.items():
            if name in wrong:
                continue
            # The one tolerance policy, with the CPU's result standing in for the oracle.
            e, _ = tolerance.judge_oracle(case, name, gpu.arrays[name], a.astype("float64"))
            assert e.within_tolerance, f"{subject} case {case.id}: GPU vs CPU\n{e.message()}"
        ran += 1
    assert ran, f"no case applies to {subject}"
