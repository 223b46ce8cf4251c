"""A planted regression for the findings tests (``--subject-plugin suites.plugins.planted:SUBJECTS``):

``planted.embed``: ``y = W[x]`` whose backward adds each row's gradient in an order drawn from the operating
system's entropy on every run (as an ``atomicAdd`` scatter does on a GPU): ``grad.W`` differs run to run
wherever an id repeats, while ``y`` stays exact. Its contract line (in the test's contracts file) says
reproducible, so the gate must fail on it, and shrinking must keep a repeated id.
"""

from __future__ import annotations

import os

import numpy as np

from harness.core.cases import Case, build_arrays
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS"]


def _run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    a = build_arrays(case)
    W = np.asarray(a["W"], dtype=np.float32)
    x = np.asarray(a["x"]).astype(np.int64).ravel() % W.shape[0]
    gy = np.asarray(a["gy"], dtype=np.float32).reshape(x.size, -1)
    with rec.phase("forward"):
        y = W[x]
    with rec.phase("backward"):
        order = np.random.default_rng(int.from_bytes(os.urandom(8), "little")).permutation(x.size)
        gW = np.zeros_like(W)
        for i in order:  # a float32 sum in a random order: bits differ where an id repeats
            gW[x[i]] += gy[i]
    rec.outputs({"y": y.reshape(*np.asarray(a["x"]).shape, W.shape[1]), "grad.W": gW})


SUBJECTS = (
    Subject("planted.embed", "embed", _run, role="subject",
            declared={"cpu": Declared(True, "claims a sequential backward (planted: it is not)")},
            devices=("cpu",), description="a planted regression: grad.W summed in a random order"),
)
