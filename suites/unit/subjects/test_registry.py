"""The one case of replay, shrink and localize is refused up front when its subject does not take it."""

from __future__ import annotations

import json

import pytest

from harness.core.errors import CaseError
from harness.subjects.registry import get_subject, load_case_for_subject

BI = {"family": "lstm", "seed": 0, "spec": {"in_size": 3, "hidden": 3, "n_layers": 1, "lengths": [2, 2],
                                            "bidirectional": True}}


@pytest.mark.parametrize("subject, takes", [("chainer.NStepLSTM", False), ("chainer.n_step_lstm", False),
                                            ("chainer.NStepBiLSTM", True), ("chainer.n_step_bilstm", True)])
def test_a_bidirectional_case_is_refused_by_a_unidirectional_subject_naming_file_and_field(tmp_path, subject, takes):
    p = tmp_path / "bi.json"
    p.write_text(json.dumps(BI))
    if takes:
        assert load_case_for_subject(str(p), None, get_subject(subject), None).spec["bidirectional"] is True
        return
    with pytest.raises(CaseError) as info:
        load_case_for_subject(str(p), None, get_subject(subject), None)
    msg = str(info.value)
    assert msg.startswith(f"{p}: ") and "$.spec.bidirectional=true" in msg and repr(subject) in msg, msg
