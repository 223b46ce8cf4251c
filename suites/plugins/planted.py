"""A planted regression for the findings tests (``--subject-plugin suites.plugins.planted:SUBJECTS``):

``planted.embed``: ``y = W[x]`` whose backward adds each row's gradient in an order drawn from the operating
system's entropy on every run (as an ``atomicAdd`` scatter does on a GPU): ``grad.W`` differs run to run
wherever an id repeats, while ``y`` stays exact. Its contract line (in the test's contracts file) says
reproducible, so the gate must fail on it, and shrinking must keep a repeated id. The call itself is
``suites/plugins/planted_calls.py``'s ``planted_embed`` (so ``harness export`` can copy it).

``BATCH_DEPENDENT`` (``--subject-plugin suites.plugins.planted:BATCH_DEPENDENT``): ``planted.embed_batchmean``,
``y = W[x] + the batch mean of W[x]``, a deterministic regression of batch invariance (a sub-batch changes every
row), for the tests that need a finding of a relation that reproduces on every run.
"""

from __future__ import annotations

from harness.subjects.base import Declared, Subject
from harness.subjects.call_runs import call_run
from suites.plugins import planted_calls

__all__ = ["BATCH_DEPENDENT", "SUBJECTS"]


SUBJECTS = (
    Subject("planted.embed", "embed", call_run(planted_calls.planted_embed), role="subject",
            declared={"cpu": Declared(True, "claims a sequential backward (planted: it is not)")},
            devices=("cpu",), description="a planted regression: grad.W summed in a random order"),
)

BATCH_DEPENDENT = (
    Subject("planted.embed_batchmean", "embed", call_run(planted_calls.rowmix), role="subject",
            declared={"cpu": Declared(True, "claims rows independent of the batch (planted: they are not)")},
            devices=("cpu",), description="a planted regression: each row adds the batch's mean"),
)
