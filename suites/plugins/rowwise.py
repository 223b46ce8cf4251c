"""Two controls for the invariance relations, known by construction (``--subject-plugin
suites.plugins.rowwise:SUBJECTS``):

- ``control.rowwise``: ``y = 2 * W[x]``, row by row: batch-invariant by construction (every relation holds);
- ``control.rowmix``: ``y = W[x] + mean of W[x] over the whole batch``: every row depends on the others, so
  a sub-batch changes it (and another order changes the float32 sum's bits).
"""

from __future__ import annotations

from harness.subjects.base import Declared, Subject
from harness.subjects.call_runs import call_run
from suites.plugins import planted_calls

__all__ = ["SUBJECTS"]

_DECL = {"cpu": Declared(True, "NumPy on the host, no threads"), "gpu": Declared(True, "NumPy on the host")}


SUBJECTS = (
    Subject("control.rowwise", "embed", call_run(planted_calls.rowwise), role="control", declared=_DECL,
            description="y = 2 W[x] row by row: batch-invariant by construction"),
    Subject("control.rowmix", "embed", call_run(planted_calls.rowmix), role="control", declared=_DECL,
            description="y = W[x] + the batch mean of W[x]: every row depends on the whole batch"),
)
