"""The recording hooks: every Chainer function node a run applies, as digests (what localization compares).

A run of one subject is recorded as a :class:`Stream` of :class:`Event` s by :class:`HashStreamHook`, a
``chainer.FunctionHook`` that sees every function node the run applies. An event holds only digests (the
harness's one digest, :func:`harness.judge.digest.digest`), shapes and dtypes of a node's inputs and outputs,
plus its label and position; no array is kept. :mod:`harness.execute.localization` pairs two streams' events.

Hook points used (Chainer 7.8.1, ``chainer/function_node.py``):

- ``forward_preprocess(function, in_data)`` runs in ``FunctionNode.apply`` right before
  ``outputs = self.forward(in_data)``; ``in_data`` are the input arrays. The outputs are
  *not* reachable from ``forward_postprocess``: it runs before the output Variables exist
  (``function.outputs`` is still unset, ``function.output_data`` only covers retained
  outputs, and only after ``apply`` returns). So ``forward_preprocess`` sets an instance
  attribute ``forward`` on that one node that calls the class's method, hashes its result
  and deletes itself again (in a ``finally``); nothing global is patched.
- ``backward_preprocess(function, in_data, out_grad)`` runs in ``chainer.function_node._backprop``
  right before ``_backprop_utils.backprop_step``; ``out_grad`` are the incoming gradients
  (``None`` where an output got none). ``in_data`` is ``[x.data for x in func.inputs]`` and is
  ``None`` for inputs that were not retained, so the forward inputs and outputs of a backward
  event are taken from the node's own forward event (matched by the node object) instead.
  The outgoing gradients (w.r.t. the inputs) are passed to no hook: ``backprop_step`` gets them
  from ``func.backward(target_input_indexes, grad_outputs)`` (or ``backward_accumulate``, when a
  class overrides it) and appends them to a private table. ``backward_preprocess`` therefore
  wraps that node's ``backward`` the same way, which gives the node's own gradients before any
  accumulation with other paths. ``backward_postprocess`` only cleans up.

Functions that a backward applies (``LinearGradWeight`` inside the backward of
``LinearFunction``, say) are recorded too, as forward events whose ``parent`` is the backward
event they ran in; the report names the root's first inner root where there is one. Chainer
keeps the registered hooks in thread-local storage: :func:`harness.execute.localization.record` runs the
subject with
:func:`harness.subjects.base.execute` in the calling thread, inside ``with hook:``.

CuPy arrays are copied to the host (``.get()``) and hashed there: exact, simple, and a sync
point per array, which makes a hooked GPU run slower and serialised; the digests are the same
bits either way. Without the hook installed nothing here costs anything.
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from harness.core.compat import import_chainer
from harness.judge.digest import digest as array_digest
from harness.subjects.base import RunResult

chainer = import_chainer()

__all__ = ["ArrayDigest", "MISSING", "Event", "Stream", "HashStreamHook", "RowHashHook", "digest_array"]


# ---- digests -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArrayDigest:
    """The digest (:func:`harness.judge.digest.digest`) of an array, with its shape and dtype; all None for a
    missing array."""

    digest: str | None
    shape: tuple[int, ...] | None
    dtype: str | None

    @property
    def missing(self) -> bool:
        return self.digest is None

    def short(self) -> str:
        return "none" if self.digest is None else self.digest[:8] + "…"

    def to_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "shape": None if self.shape is None else list(self.shape),
                "dtype": self.dtype}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ArrayDigest":
        shape = d.get("shape")
        return cls(d.get("digest"), None if shape is None else tuple(int(n) for n in shape), d.get("dtype"))


#: The digest of a missing array (an output a node did not give, a gradient that did not come).
MISSING = ArrayDigest(None, None, None)


def digest_array(a: Any) -> ArrayDigest:
    """The :class:`ArrayDigest` of a NumPy / CuPy / ChainerX array or a Variable (None allowed)."""
    if a is None:
        return MISSING
    if isinstance(a, chainer.Variable):
        a = a.array
        if a is None:
            return MISSING
    if not isinstance(a, np.ndarray):
        if hasattr(a, "get") and type(a).__module__.startswith("cupy"):
            a = a.get()  # CuPy: copy to host, hash there (documented above)
        else:
            a = chainer.backend.CpuDevice().send(a) if type(a).__module__.startswith("chainerx") \
                else np.asarray(a)
    a = np.asarray(a)
    if a.dtype.hasobject:
        # Pointers have no bits to digest; their repr is what a node passed on.
        return ArrayDigest(hashlib.sha256(repr(a.tolist()).encode()).hexdigest(), tuple(int(n) for n in a.shape),
                           a.dtype.name)
    # The one digest of the harness (dtype and shape included), so a node's output digest and the run
    # record's digest of the same array are the same string.
    return ArrayDigest(array_digest(a), tuple(int(n) for n in a.shape), a.dtype.name)


def _digests(arrays: Iterable[Any]) -> tuple[ArrayDigest, ...]:
    return tuple(digest_array(a) for a in arrays)


# ---- events and streams ------------------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    """One function node's forward or backward, as digests.

    ``step``: index in the stream (the order events started). ``node``: the node's position, the
    running index of forward calls (for a backward event, the index its node had in forward; -1
    if the node was created before the hook was installed). ``parent``: the step of the event
    this one ran inside (a function applied by a backward), or None. Input names: ``x[j]``
    (forward input j), ``y[k]`` (forward output k, for backward), ``gy[k]`` (incoming gradient of
    output k), ``acc[j]`` (gradient from other paths, only for ``backward_accumulate``); output
    names: ``y[k]`` (forward) or ``gx[j]`` (gradient w.r.t. input j).
    """

    step: int
    phase: str
    label: str
    node: int
    inputs: tuple[ArrayDigest, ...]
    input_names: tuple[str, ...]
    outputs: tuple[ArrayDigest, ...]
    output_names: tuple[str, ...]
    parent: int | None = None
    outputs_seen: bool = True

    def describe(self) -> str:
        where = f"node #{self.node}, step {self.step}" if self.node >= 0 else f"step {self.step}"
        return f"{self.phase} of {self.label} ({where})"

    def short(self) -> str:
        return f"{self.phase} of {self.label} #{self.node}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step, "phase": self.phase, "label": self.label, "node": self.node,
            "parent": self.parent, "outputs_seen": self.outputs_seen,
            "inputs": [dict(name=n, **d.to_dict()) for n, d in zip(self.input_names, self.inputs)],
            "outputs": [dict(name=n, **d.to_dict()) for n, d in zip(self.output_names, self.outputs)],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Event":
        """The event :meth:`to_dict` wrote."""
        ins, outs = list(d["inputs"]), list(d["outputs"])
        return cls(int(d["step"]), str(d["phase"]), str(d["label"]), int(d["node"]),
                   tuple(ArrayDigest.from_dict(x) for x in ins), tuple(str(x["name"]) for x in ins),
                   tuple(ArrayDigest.from_dict(x) for x in outs), tuple(str(x["name"]) for x in outs),
                   None if d.get("parent") is None else int(d["parent"]), bool(d.get("outputs_seen", True)))


@dataclass(frozen=True)
class Stream:
    """The events of one run, plus the digests of its final outputs (the RunResult arrays)."""

    label: str
    events: tuple[Event, ...]
    results: dict[str, ArrayDigest]
    status: str
    error: str | None = None
    subject: str = ""
    case_id: str = ""
    device: str = ""
    context: str = ""

    def __len__(self) -> int:
        return len(self.events)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "subject": self.subject, "case_id": self.case_id, "device": self.device,
                "context": self.context, "status": self.status, "error": self.error,
                "events": [e.to_dict() for e in self.events],
                "results": {k: v.to_dict() for k, v in self.results.items()}}


class _Open:
    """A mutable event while it runs."""

    __slots__ = ("step", "phase", "label", "node", "inputs", "input_names", "outputs", "output_names",
                 "parent", "outputs_seen")

    def __init__(self, step: int, phase: str, label: str, node: int, parent: int | None) -> None:
        self.step, self.phase, self.label, self.node, self.parent = step, phase, label, node, parent
        self.inputs: tuple[ArrayDigest, ...] = ()
        self.input_names: tuple[str, ...] = ()
        self.outputs: tuple[ArrayDigest, ...] = ()
        self.output_names: tuple[str, ...] = ()
        self.outputs_seen = False

    def freeze(self) -> Event:
        return Event(self.step, self.phase, self.label, self.node, self.inputs, self.input_names,
                     self.outputs, self.output_names, self.parent, self.outputs_seen)


def _overrides_accumulate(function: Any) -> bool:
    # The same test backprop_step makes to choose backward_accumulate over backward.
    return type(function).backward_accumulate is not chainer.FunctionNode.backward_accumulate and \
        type(function).backward_accumulate.__code__ is not chainer.FunctionNode.backward_accumulate.__code__


class HashStreamHook(chainer.FunctionHook):  # type: ignore[name-defined]  # chainer: imported at run time
    """Records every function node's forward and backward as digests, in execution order.

    Use it only as a context manager (``with HashStreamHook() as hook: ...``), then read
    :attr:`events` (or :meth:`stream`). It wraps, per node and only while that node runs, the
    instance's ``forward`` / ``backward`` (or ``backward_accumulate``) to see the outputs; see
    the module docstring for why and for what each Chainer hook point gives.
    """

    name = "HashStreamHook"

    def __init__(self) -> None:
        #: How an event's arrays are digested (a subclass digests them row by row).
        self._digest = _digests
        self._events: list[_Open] = []
        self._stack: list[int] = []  # steps of the events now running (innermost last)
        self._n_forward = 0
        # function node -> its forward event; weak, so a run's graph is freed as usual
        self._forward_of: "weakref.WeakKeyDictionary[Any, _Open]" = weakref.WeakKeyDictionary()
        self._wrapped: dict[int, tuple[str, bool, Any, _Open]] = {}

    # -- bookkeeping --
    def _open(self, phase: str, function: Any, node: int) -> _Open:
        ev = _Open(len(self._events), phase, str(function.label), node, self._stack[-1] if self._stack else None)
        self._events.append(ev)
        self._stack.append(ev.step)
        return ev

    def _close(self, ev: _Open) -> None:
        if self._stack and self._stack[-1] == ev.step:
            self._stack.pop()
        elif ev.step in self._stack:  # an inner call raised and never closed; drop it too
            del self._stack[self._stack.index(ev.step):]

    def _wrap(self, function: Any, attr: str, on_result: Any, ev: _Open) -> None:
        had = attr in vars(function)
        previous = vars(function).get(attr)
        original = getattr(function, attr)
        self._wrapped[id(function)] = (attr, had, previous, ev)

        def wrapper(*args: Any) -> Any:
            self._unwrap(function)
            try:
                result = original(*args)
                on_result(args, result)
                return result
            finally:
                self._close(ev)

        setattr(function, attr, wrapper)

    def _unwrap(self, function: Any) -> _Open | None:
        """Remove the wrapper from ``function``; the event it belonged to (None if none was left)."""
        entry = self._wrapped.pop(id(function), None)
        if entry is None:
            return None
        attr, had, previous, ev = entry
        if had:
            setattr(function, attr, previous)
        else:
            vars(function).pop(attr, None)
        return ev

    # -- forward --
    def forward_preprocess(self, function: Any, in_data: Sequence[Any]) -> None:
        ev = self._open("forward", function, self._n_forward)
        self._n_forward += 1
        ev.inputs = self._digest(in_data)
        ev.input_names = tuple(f"x[{j}]" for j in range(len(in_data)))
        try:
            self._forward_of[function] = ev
        except TypeError:  # not weak-referenceable: backward events then hash what they get
            pass

        def on_result(_args: Any, outputs: Any) -> None:
            outs = tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
            ev.outputs = self._digest(outs)
            ev.output_names = tuple(f"y[{k}]" for k in range(len(outs)))
            ev.outputs_seen = True

        self._wrap(function, "forward", on_result, ev)

    def forward_postprocess(self, function: Any, in_data: Sequence[Any]) -> None:
        # Normally the wrapper has already run and removed itself; if forward was reached another
        # way (Chainer's static-graph schedule), undo the wrapper and close the event unseen.
        ev = self._unwrap(function)
        if ev is not None:
            self._close(ev)

    # -- backward --
    def backward_preprocess(self, function: Any, in_data: Sequence[Any], out_grad: Sequence[Any]) -> None:
        fwd = self._forward_of.get(function)
        ev = self._open("backward", function, -1 if fwd is None else fwd.node)
        names = [f"gy[{k}]" for k in range(len(out_grad))]
        digests = list(self._digest(out_grad))
        if fwd is not None:
            names += list(fwd.input_names) + list(fwd.output_names)
            digests += list(fwd.inputs) + list(fwd.outputs)
        else:
            names += [f"x[{j}]" for j in range(len(in_data))]
            digests += list(self._digest(in_data))
        ev.inputs, ev.input_names = tuple(digests), tuple(names)
        n_inputs = len(in_data)
        accumulate = _overrides_accumulate(function)

        def on_result(args: Any, gxs: Any) -> None:
            indexes = tuple(args[0])
            gxs = tuple(gxs)
            if not accumulate and len(gxs) == n_inputs and len(indexes) != n_inputs:
                gxs = tuple(gxs[i] for i in indexes)  # what backprop_step keeps
            if accumulate and len(args) > 2:
                ev.inputs = ev.inputs + self._digest(args[2])
                ev.input_names = ev.input_names + tuple(f"acc[{i}]" for i in indexes)
            ev.outputs = self._digest(gxs)
            ev.output_names = tuple(f"gx[{i}]" for i in indexes[:len(gxs)])
            ev.outputs_seen = True

        self._wrap(function, "backward_accumulate" if accumulate else "backward", on_result, ev)

    def backward_postprocess(self, function: Any, in_data: Sequence[Any], out_grad: Sequence[Any]) -> None:
        ev = self._unwrap(function)
        if ev is not None:
            self._close(ev)

    # -- results --
    @property
    def events(self) -> tuple[Event, ...]:
        return tuple(e.freeze() for e in self._events)

    def stream(self, result: RunResult, label: str) -> Stream:
        return Stream(label=label, events=self.events,
                      results={k: digest_array(v) for k, v in sorted(result.arrays.items())},
                      status=result.status, error=None if result.error is None else str(result.error),
                      subject=result.subject, case_id=result.case_id, device=result.device,
                      context=result.context)


# ---- row by row ----------------------------------------------------------------------------------
def _row_digests(arrays: Iterable[Any]) -> tuple[ArrayDigest, ...]:
    """Each array as the digests of its rows (along axis 0), joined by ``,``: what a batch row's values are,
    wherever in the batch it sits."""
    out = []
    for a in arrays:
        d = digest_array(a)
        if d.digest is None or a is None:
            out.append(d)
            continue
        arr = a.array if isinstance(a, chainer.Variable) else a
        if not isinstance(arr, np.ndarray):
            arr = arr.get() if hasattr(arr, "get") else np.asarray(arr)
        rows = [array_digest(r) for r in arr] if arr.ndim >= 1 else [array_digest(arr)]
        out.append(ArrayDigest(",".join(rows), d.shape, d.dtype))
    return tuple(out)


class RowHashHook(HashStreamHook):
    """A :class:`HashStreamHook` that digests every array row by row, so two runs of different batches can
    be compared row for row (for the invariance relations)."""

    name = "RowHashHook"

    def __init__(self) -> None:
        super().__init__()
        self._digest = _row_digests


#: Nodes that only move values between axes or arrays: their row sets change with the batch's layout while
