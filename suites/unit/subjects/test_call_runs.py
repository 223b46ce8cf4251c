"""harness/subjects/call_runs.py: a run function made from one library call remembers that call (what ``export``
copies), and runs it on the case's arrays."""

from __future__ import annotations

import numpy as np

from harness.core.cases import Case, build_arrays
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.subjects import library_calls
from harness.subjects.base import Subject, execute
from harness.subjects.call_runs import Call, call_of, call_run
from harness.subjects.registry import get_subject

CASE = Case("embed", 2, {"vocab": 5, "width": 3, "ids_shape": [4]})


def _double_w(env, a, spec, emit, factor: int = 2) -> None:
    emit("W2", a["W"] * factor)


def test_a_run_made_from_a_call_remembers_it_and_runs_it() -> None:
    run = call_run(_double_w, factor=3)
    assert call_of(run) == Call(_double_w, {"factor": 3})
    r = execute(Subject("t.double", "embed", run), CASE, CPU, get_context("default"))
    assert r.status == "ok" and np.array_equal(r.arrays["W2"], build_arrays(CASE)["W"] * 3)


def test_the_shipped_subjects_name_their_library_call_and_other_runs_none() -> None:
    assert call_of(get_subject("chainer.embed_id").run).fn is library_calls.embed_function
    assert call_of(get_subject("control.deterministic").run) is None
