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

from typing import Any, Callable

import numpy as np

from harness.core.cases import Case, build_arrays
from harness.core.compat import import_chainer
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["PRISTINE", "CLIP_HIGH", "CLIP_NEGATIVE", "CONTEXT_ANY", "REVERSED", "NAME"]

NAME = "planted.embed_id"
_DECL = {"cpu": Declared(True, "CPU backward accumulates rows in a sequential loop (as Chainer's)", order="sequential")}


def _subject(forward_ids: Callable[[np.ndarray, int, Any, Context], np.ndarray] | None = None,
             reverse: bool = False, refuse_nonfinite_in_blas1: bool = False) -> Subject:
    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        chainer = import_chainer()
        a = build_arrays(case)
        x, W, gy = a["x"], a["W"], a["gy"]
        il = case.spec.get("ignore_label")
        vocab = W.shape[0] if W.ndim else 0
        with rec.phase("forward"):
            if refuse_nonfinite_in_blas1 and context.blas_threads == 1 and W.dtype.kind == "f" \
                    and not np.isfinite(W).all():
                raise FloatingPointError("W holds NaN or Inf")
            ids = x
            if forward_ids is not None and not chainer.config.debug and x.dtype.kind == "i":
                ids = forward_ids(x, vocab, il, context)
            y = chainer.functions.embed_id(ids, W, ignore_label=il)
        rec.output("y", y)
        with rec.phase("backward"):
            # Chainer's CPU loop (EmbedIDGrad.forward), with the ids the forward used only where a plant says so.
            back = ids if forward_ids is not None and forward_ids.__name__ == "_clip_negative" else x
            gW = np.zeros(W.shape, dtype=gy.dtype)
            pairs = list(zip(back.ravel(), gy.reshape(back.size, -1)))
            for ix, row in (reversed(pairs) if reverse else pairs):
                if ix == il:
                    continue
                gW[ix] += row
        rec.output("grad.W", gW)

    return Subject(NAME, "embed", run, devices=("cpu",), declared=_DECL,
                   description="planted variants of chainer.embed_id (suites/plugins/badinput.py)",
                   source="suites/plugins/badinput.py")


def _kept(x: np.ndarray, il: Any) -> np.ndarray:
    return x != il if il is not None else np.ones(x.shape, bool)


def _clip_high(x: np.ndarray, vocab: int, il: Any, context: Context) -> np.ndarray:
    return np.where(_kept(x, il) & (x >= vocab), vocab - 1, x).astype(x.dtype)


def _clip_negative(x: np.ndarray, vocab: int, il: Any, context: Context) -> np.ndarray:
    return np.where(_kept(x, il) & (x < 0), 0, x).astype(x.dtype)


PRISTINE = _subject()
CLIP_HIGH = _subject(_clip_high)
CLIP_NEGATIVE = _subject(_clip_negative)
CONTEXT_ANY = _subject(refuse_nonfinite_in_blas1=True)
REVERSED = _subject(reverse=True)
