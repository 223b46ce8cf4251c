"""harness/verbs/gate.py: the gate refuses bad input before any work, and on a tiny corpus runs its campaign and
says 0 when every contract holds."""

from __future__ import annotations

import os

import pytest

from harness.core.cases import Case
from harness.core.corpus_files import write_corpus
from harness.core.errors import HarnessError
from harness.verbs.gate import GateOptions, gate


def test_bad_devices_or_an_empty_corpus_are_refused_before_any_work(tmp_path) -> None:
    out = tmp_path / "run"
    with pytest.raises(HarnessError, match="devices|device"):
        gate(GateOptions(devices="tpu", out=str(out), quiet=True))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(HarnessError, match="holds no cases"):
        gate(GateOptions(devices="cpu", corpus=str(empty), out=str(out), quiet=True))
    assert not out.exists()


@pytest.mark.slow  # a gate campaign over every subject, in workers: seconds
def test_a_tiny_gate_holds_and_writes_its_junit(tmp_path) -> None:
    corpus = tmp_path / "c.jsonl"  # ids that collide: the positive control diverges, so the gate can fail
    write_corpus([Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [400], "id_kind": "collision",
                                     "distinct": 2})], str(corpus))
    junit = tmp_path / "gate.xml"
    rc = gate(GateOptions(devices="cpu", corpus=str(corpus), out=str(tmp_path / "run"), junit=str(junit),
                          repeats=2, fresh=0, shrink=False, quiet=True))
    assert rc == 0 and os.path.getsize(junit) > 0
