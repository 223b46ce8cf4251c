"""Two controls for the invariance relations, known by construction (``--subject-plugin
suites.plugins.rowwise:SUBJECTS``):

- ``control.rowwise``: ``y = 2 * W[x]``, row by row: batch-invariant by construction (every relation holds);
- ``control.rowmix``: ``y = W[x] + mean of W[x] over the whole batch``: every row depends on the others, so
  a sub-batch changes it (and another order changes the float32 sum's bits).
"""

from __future__ import annotations

import numpy as np

from harness.core.cases import Case, build_arrays
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS"]

_DECL = {"cpu": Declared(True, "NumPy on the host, no threads"), "gpu": Declared(True, "NumPy on the host")}


def _rows(case: Case) -> np.ndarray:
    a = build_arrays(case)
    x = np.asarray(a["x"]).astype(np.int64) % a["W"].shape[0]
    return a["W"][x]


def _rowwise(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        y = (_rows(case) * np.float32(2)).astype(np.float32)
    rec.outputs({"y": y})


def _rowmix(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("forward"):
        e = _rows(case).astype(np.float32)
        mean = np.zeros(e.shape[1:], np.float32)
        for row in e.reshape((e.shape[0], -1) + e.shape[-1:]):  # a sequential float32 sum over the batch
            mean += row.sum(axis=0, dtype=np.float32) if row.ndim > 1 else row
        y = e + mean / np.float32(max(e.shape[0], 1))
    rec.outputs({"y": y.astype(np.float32)})


SUBJECTS = (
    Subject("control.rowwise", "embed", _rowwise, role="control", declared=_DECL,
            description="y = 2 W[x] row by row: batch-invariant by construction"),
    Subject("control.rowmix", "embed", _rowmix, role="control", declared=_DECL,
            description="y = W[x] + the batch mean of W[x]: every row depends on the whole batch"),
)
