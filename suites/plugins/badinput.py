"""One embedding subject, ``planted.embed_id``, pristine and with four planted regressions the gate must see
without a baseline (``--subject-plugin suites.plugins.badinput:OBJECT``; every object registers the same name,
so one contracts file serves them all):

- ``PRISTINE``: Chainer's ``F.embed_id`` forward and the CPU backward's own loop (``gW[ix] += gy[i]`` in index
  order): behaves as ``chainer.embed_id`` does, declares the same sequential order. The gate stays green.
- ``CLIP_HIGH``: outside debug mode the forward clips ids ``>= vocab`` to ``vocab - 1`` and returns numbers;
  the backward still indexes with the real ids and raises ``IndexError`` -- the error moved from the forward
  to the backward.
- ``CLIP_NEGATIVE``: outside debug mode negative ids read (and write) row 0 instead of wrapping to
  ``vocab + id``: deterministic, no error, wrong values.
- ``CONTEXT_ANY``: with BLAS limited to one thread (the ``blas1`` context) it refuses a non-finite ``W`` with
  ``FloatingPointError`` in the forward; elsewhere it returns values. An ``any`` rule allows either outcome, but
  not both.
- ``REVERSED``: declares the sequential order and accumulates ``grad.W`` in reverse index order: deterministic
  and within the oracle's tolerance, only the order reference sees it.
"""

from __future__ import annotations

from harness.subjects.base import Declared, Subject
from harness.subjects.call_runs import call_run
from suites.plugins import planted_calls

__all__ = ["PRISTINE", "CLIP_HIGH", "CLIP_NEGATIVE", "CONTEXT_ANY", "REVERSED", "NAME"]

NAME = "planted.embed_id"
_DECL = {"cpu": Declared(True, "CPU backward accumulates rows in a sequential loop (as Chainer's)", order="sequential")}


def _subject(plant: str = "", reverse: bool = False, refuse_nonfinite_in_blas1: bool = False) -> Subject:
    # The call (planted_calls.planted_embed_id) holds the forward and the CPU loop; the variants are its params.
    run = call_run(planted_calls.planted_embed_id, plant=plant, reverse=reverse,
                   refuse_nonfinite_in_blas1=refuse_nonfinite_in_blas1)
    return Subject(NAME, "embed", run, devices=("cpu",), declared=_DECL,
                   description="planted variants of chainer.embed_id (suites/plugins/badinput.py)",
                   source="suites/plugins/badinput.py")


PRISTINE = _subject()
CLIP_HIGH = _subject("clip_high")
CLIP_NEGATIVE = _subject("clip_negative")
CONTEXT_ANY = _subject(refuse_nonfinite_in_blas1=True)
REVERSED = _subject(reverse=True)
