"""harness.outputs.audit.run: an audit run in this process refuses one repetition, and records a sketch and a role
per tensor."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.errors import InvalidArgument
from harness.judge.sketch import SAMPLE
from harness.outputs import audit as A
from harness.verbs.audit import AuditOptions


def test_run_audit_rejects_one_repetition(work, small):
    with pytest.raises(InvalidArgument, match="repeats=1"):
        A.run_audit(AuditOptions(corpus=str(small), devices="cpu", out=str(work / "r1.json"), repeats=1))
    assert not (work / "r1.json").exists()


def test_audit_entries_carry_a_sketch_per_tensor(whole):
    e = next(e for e in whole[0].entries if e["subject"] == "chainer.NStepLSTM")
    assert e["role"] == "subject"
    for name, t in e["tensors"].items():
        sk = t["sketch"]
        n = int(np.prod(t["shape"]))
        assert sk["n"] == n and len(sk["index"]) == len(sk["bits"]) == min(SAMPLE, n), name
        assert sk["l2"] >= sk["max_abs"] >= 0 and sk["nan"] == sk["inf"] == 0
        assert all(len(b) == 2 * np.dtype(t["dtype"]).itemsize for b in sk["bits"])
    assert next(e for e in whole[0].entries if e["subject"] == "oracle.lstm")["role"] == "oracle"
