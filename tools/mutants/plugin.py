"""Realistic regressions of the subjects, for measuring the gate (``make mutants``; ``python -m tools.mutants``).

Each mutant is a plug-in object (``--subject-plugin tools.mutants.plugin:NAME``) that replaces ONE registered
subject by the same subject whose run has one real Chainer function wrapped or monkeypatched for the duration
of the run (in the worker process; nothing installed is edited, and the patch is undone when the run ends).
:data:`MUTANTS` names each, the subject it replaces, and the real-world bug it imitates.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator

import numpy as np

from harness.core.compat import import_chainer
from harness.subjects.base import Subject

__all__ = ["MUTANTS", "Mutant"]


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    subject: str
    bug: str
    patch: Callable[[], contextlib.AbstractContextManager[Any]]


@contextlib.contextmanager
def _patched(owner: Any, attr: str, make: Callable[[Any], Any]) -> Iterator[None]:
    """``owner.attr`` replaced by ``make(original)`` while the block runs."""
    original = getattr(owner, attr)
    setattr(owner, attr, make(original))
    try:
        yield
    finally:
        setattr(owner, attr, original)


def _embed_module() -> Any:
    import_chainer()
    from chainer.functions.connection import embed_id

    return embed_id


# ---- embedding ----------------------------------------------------------------------------------------
def _mask_forgotten() -> Any:
    def make(orig: Any) -> Any:
        def forward(self: Any, inputs: Any) -> Any:
            saved, self.ignore_label = self.ignore_label, None
            try:
                return orig(self, inputs)
            finally:
                self.ignore_label = saved
        return forward
    return _patched(_embed_module().EmbedIDFunction, "forward", make)


def _ignore_off_by_one() -> Any:
    def make(orig: Any) -> Any:
        def forward(self: Any, inputs: Any) -> Any:
            saved = self.ignore_label
            if saved is not None:
                self.ignore_label = saved + 1
            try:
                return orig(self, inputs)
            finally:
                self.ignore_label = saved
        return forward
    return _patched(_embed_module().EmbedIDGrad, "forward", make)


def _reordered() -> Any:
    def make(orig: Any) -> Any:
        def forward(self: Any, inputs: Any) -> Any:
            x, gy = inputs
            if isinstance(x, np.ndarray) and x.size:
                xr = np.ascontiguousarray(x.ravel()[::-1]).reshape(x.shape)
                gr = np.ascontiguousarray(gy.reshape(x.size, -1)[::-1]).reshape(gy.shape)
                return orig(self, (xr, gr))
            return orig(self, inputs)
        return forward
    return _patched(_embed_module().EmbedIDGrad, "forward", make)


def _unordered() -> Any:
    def make(orig: Any) -> Any:
        def forward(self: Any, inputs: Any) -> Any:
            x, gy = inputs
            if isinstance(x, np.ndarray) and x.size > 1:
                p = np.random.default_rng().permutation(x.size)  # a new order every run, as atomics give
                xr = x.ravel()[p].reshape(x.shape)
                gr = gy.reshape(x.size, -1)[p].reshape(gy.shape)
                return orig(self, (xr, gr))
            return orig(self, inputs)
        return forward
    return _patched(_embed_module().EmbedIDGrad, "forward", make)


def _grad_float16() -> Any:
    def make(orig: Any) -> Any:
        def forward(self: Any, inputs: Any) -> Any:
            x, gy = inputs
            if isinstance(gy, np.ndarray) and gy.dtype == np.float32:
                (gw,) = orig(self, (x, gy.astype(np.float16)))
                return (gw.astype(np.float32),)
            return orig(self, inputs)
        return forward
    return _patched(_embed_module().EmbedIDGrad, "forward", make)


def _double_backward_unmasked() -> Any:
    def make(orig: Any) -> Any:
        def backward(self: Any, indexes: Any, grads: Any) -> Any:
            saved, self.ignore_label = self.ignore_label, None
            try:
                return orig(self, indexes, grads)
            finally:
                self.ignore_label = saved
        return backward
    return _patched(_embed_module().EmbedIDGrad, "backward", make)


def _negative_clipped() -> Any:
    import_chainer()
    from espnet.nets.chainer_backend import deterministic_embed_id as espnet_embed

    def make(orig: Any) -> Any:
        def forward(self: Any, inputs: Any) -> Any:
            x, W = inputs
            if isinstance(x, np.ndarray) and x.size:
                keep = x < 0
                if self.ignore_label is not None:
                    keep &= x != self.ignore_label
                x = np.where(keep, 0, x).astype(x.dtype)  # clipped into [0, V) instead of NumPy's wrap-around
            return orig(self, (x, W))
        return forward
    return _patched(espnet_embed.EmbedIDFunction, "forward", make)


# ---- LSTM -----------------------------------------------------------------------------------------------
def _F() -> Any:
    return import_chainer().functions


def _perm_not_inverted() -> Any:
    def make(orig: Any) -> Any:
        def permutate(x: Any, indices: Any, axis: int = 0, inv: bool = False) -> Any:
            return orig(x, indices, axis=axis, inv=False)
        return permutate
    return _patched(_F(), "permutate", make)


def _link_unsort_forgotten() -> Any:
    import_chainer()
    from chainer.links.rnn import n_step_rnn

    def make(orig: Any) -> Any:
        def permutate_list(lst: Any, indices: Any, inv: bool) -> Any:
            return orig(lst, indices, False)
        return permutate_list
    return _patched(n_step_rnn, "permutate_list", make)


def _hx_dropped() -> Any:
    def make(orig: Any) -> Any:
        def n_step_lstm(n_layers: int, dropout: float, hx: Any, cx: Any, ws: Any, bs: Any, xs: Any, **kw: Any) -> Any:
            return orig(n_layers, dropout, hx * 0, cx * 0, ws, bs, xs, **kw)
        return n_step_lstm
    return _patched(_F(), "n_step_lstm", make)


def _bias_not_loaded() -> Any:
    def make(orig: Any) -> Any:
        def n_step_lstm(n_layers: int, dropout: float, hx: Any, cx: Any, ws: Any, bs: Any, xs: Any, **kw: Any) -> Any:
            bs = [[b * 0 if j == 5 else b for j, b in enumerate(cell)] for cell in bs]  # one gate's h-bias
            return orig(n_layers, dropout, hx, cx, ws, bs, xs, **kw)
        return n_step_lstm
    return _patched(_F(), "n_step_lstm", make)


def _outputs_float16() -> Any:
    F = _F()

    def low(v: Any) -> Any:
        return F.cast(F.cast(v, np.float16), v.dtype) if v.dtype == np.float32 else v

    def make(orig: Any) -> Any:
        def n_step_bilstm(*a: Any, **kw: Any) -> Any:
            hy, cy, ys = orig(*a, **kw)
            return low(hy), low(cy), [low(y) for y in ys]
        return n_step_bilstm
    return _patched(F, "n_step_bilstm", make)


def _loss_scale_kept() -> Any:
    chainer = import_chainer()

    def make(orig: Any) -> Any:
        def backward(outputs: Any, grad_outputs: Any = None, **kw: Any) -> Any:
            if grad_outputs is not None:
                grad_outputs = [g * 2 for g in grad_outputs]
            return orig(outputs, grad_outputs, **kw)
        return backward
    return _patched(chainer, "backward", make)


def _cleargrads_forgotten() -> Any:
    chainer = import_chainer()
    return _patched(chainer.Link, "cleargrads", lambda orig: (lambda self: None))


def _padding_not_ignored() -> Any:
    chainer = import_chainer()

    def make(orig: Any) -> Any:
        def forward(self: Any, x: Any) -> Any:
            saved, self.ignore_label = self.ignore_label, None
            try:
                xa = getattr(x, "array", x)
                if saved is not None and saved < 0:  # a negative pad would wrap; keep it in range like a user would
                    xa = np.where(xa == saved, 0, xa) if isinstance(xa, np.ndarray) else xa
                return orig(self, xa)
            finally:
                self.ignore_label = saved
        return forward
    return _patched(chainer.links.EmbedID, "forward", make)


MUTANTS: tuple[Mutant, ...] = (
    Mutant("embed_mask_forgotten", "chainer.embed_id",
           "forward forgets to zero the rows of ignored ids (the ignore mask dropped in a refactor)", _mask_forgotten),
    Mutant("embed_ignore_off_by_one", "chainer.embed_id",
           "backward compares ids with ignore_label + 1 (an off-by-one in the label, e.g. a 1-based vocabulary)",
           _ignore_off_by_one),
    Mutant("embed_backward_reordered", "chainer.embed_id",
           "backward accumulates rows in reverse index order (a loop rewritten; declared order no longer kept)",
           _reordered),
    Mutant("embed_backward_unordered", "chainer.EmbedID",
           "backward accumulates in a new order every run (a parallel scatter-add, like atomics)", _unordered),
    Mutant("embed_backward_float16", "chainer.EmbedID",
           "backward accumulates a float32 gradient in float16 (a precision drop in a mixed-precision path)",
           _grad_float16),
    Mutant("embed_double_backward_unmasked", "chainer.embed_id",
           "double backward forgets the ignore mask (ggW rows read for ignored ids)", _double_backward_unmasked),
    Mutant("espnet_negative_ids_clipped", "espnet.embed_id",
           "forward clips negative ids to row 0 (a take(mode='clip') or an index clamp) instead of wrapping "
           "as NumPy indexing does; backward still wraps", _negative_clipped),
    Mutant("lstm_perm_not_inverted", "chainer.n_step_lstm",
           "the final states are permuted back with the sort permutation instead of its inverse", _perm_not_inverted),
    Mutant("lstm_link_unsort_forgotten", "chainer.NStepLSTM",
           "the link returns ys in sorted order, not the caller's (the un-sort uses the forward permutation)",
           _link_unsort_forgotten),
    Mutant("lstm_hx_dropped", "chainer.n_step_lstm",
           "the given initial state is replaced by zeros (state not carried over between batches)", _hx_dropped),
    Mutant("lstm_bias_not_loaded", "chainer.n_step_lstm",
           "one gate's hidden-to-hidden bias is not loaded (zero), as when a checkpoint key is misnamed",
           _bias_not_loaded),
    Mutant("bilstm_outputs_float16", "chainer.n_step_bilstm",
           "outputs pass through float16 (an autocast region left on)", _outputs_float16),
    Mutant("lstm_loss_scale_kept", "chainer.NStepLSTM",
           "upstream gradients doubled (a loss scale applied and never undone)", _loss_scale_kept),
    Mutant("pipeline_cleargrads_forgotten", "pipeline.embed_lstm",
           "parameter gradients not cleared before backward (Chainer starts them as NaN/stale)",
           _cleargrads_forgotten),
    Mutant("pipeline_padding_not_ignored", "pipeline.embed_lstm",
           "the embedding's ignore label is dropped, padding embeds row 0 (the pipeline cuts padding away "
           "before the LSTM, so only padding inside a sequence would show it)", _padding_not_ignored),
)


def _mutant_subject(m: Mutant) -> Subject:
    from harness.subjects.registry import get_subject

    real = get_subject(m.subject)
    run = real.run

    def mutated(case: Any, device: Any, context: Any, rec: Any) -> None:
        with m.patch():
            run(case, device, context, rec)

    return dataclasses.replace(real, run=mutated, description=f"MUTANT {m.name}: {m.bug}")


def __getattr__(name: str) -> list[Subject]:
    """``tools.mutants.plugin:<mutant name>``: that mutant as a plug-in (a one-subject list)."""
    for m in MUTANTS:
        if m.name == name:
            return [_mutant_subject(m)]
    raise AttributeError(name)
