"""harness/subjects/pipeline.py: the embedding-into-LSTM subjects take pipeline cases and run on the CPU."""

from __future__ import annotations

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.subjects.base import execute
from harness.subjects.pipeline import SUBJECTS

PIPE = Case("pipeline", 5, {"vocab": 10, "width": 4, "hidden": 5, "n_layers": 1, "lengths": [3, 2, 4]})


def test_both_pipelines_take_pipeline_cases_and_give_their_outputs_and_gradients() -> None:
    assert {s.name for s in SUBJECTS} == {"pipeline.embed_lstm", "pipeline.espnet_embed_lstm"}
    for s in SUBJECTS:
        assert s.applies_to(PIPE) and not s.applies_to(Case("embed", 1, {"vocab": 3, "width": 2, "ids_shape": [2]}))
        r = execute(s, PIPE, CPU, get_context("default"))
        assert r.status == "ok", r.error
        assert any(k.startswith("grad.") for k in r.arrays) and any(not k.startswith("grad.") for k in r.arrays)
