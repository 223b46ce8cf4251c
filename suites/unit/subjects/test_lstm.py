"""harness/subjects/lstm.py: the four LSTM subjects each take the cases of their direction, and a link and its
function give the same bits."""

from __future__ import annotations

import numpy as np

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.subjects.base import execute
from harness.subjects.lstm import SUBJECTS

UNI = Case("lstm", 1, {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [3, 1, 2]})
BI = Case("lstm", 2, {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [2, 2], "bidirectional": True})


def test_each_subject_takes_the_cases_of_its_direction() -> None:
    by = {s.name: s for s in SUBJECTS}
    assert set(by) == {"chainer.NStepLSTM", "chainer.NStepBiLSTM", "chainer.n_step_lstm", "chainer.n_step_bilstm"}
    for name, s in by.items():
        bi = "Bi" in name or "bilstm" in name
        assert s.applies_to(BI) is bi and s.applies_to(UNI) is not bi


def test_the_link_and_the_function_give_the_same_bits() -> None:
    by = {s.name: s for s in SUBJECTS}
    ctx = get_context("default")
    link, fn = execute(by["chainer.NStepLSTM"], UNI, CPU, ctx), execute(by["chainer.n_step_lstm"], UNI, CPU, ctx)
    assert link.status == fn.status == "ok" and set(link.arrays) == set(fn.arrays)
    assert all(np.array_equal(link.arrays[k], fn.arrays[k]) for k in link.arrays)
