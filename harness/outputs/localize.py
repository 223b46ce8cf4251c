"""Localize a divergence: the first Chainer function whose outputs differ while its inputs matched.

Two runs of one subject (repeats, two contexts, or two devices) are each recorded as a
:class:`Stream` of :class:`Event` s by :class:`HashStreamHook`, a ``chainer.FunctionHook``
that sees every function node the run applies. An event holds only digests (the harness's one digest,
:func:`harness.judge.bitwise.digest`), shapes and dtypes of a node's inputs and outputs, plus its label and
position; no array is kept.
:func:`align` pairs the events of two streams and names the *root cause*: the first event,
in the order the events started, whose outputs differ while every one of its inputs matched.
Everything that differs after it is *downstream of the root*.

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
keeps the registered hooks in thread-local storage: :func:`record` runs the subject with
:func:`harness.subjects.base.execute` in the calling thread, inside ``with hook:``.

CuPy arrays are copied to the host (``.get()``) and hashed there: exact, simple, and a sync
point per array, which makes a hooked GPU run slower and serialised; the digests are the same
bits either way. Without the hook installed nothing here costs anything.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from harness.core.cases import Case, load_case_file
from harness.judge import bitwise
from harness.judge.reproducer import Reproducer
from harness.core.compat import import_chainer
from harness.core.contexts import Context, get_context
from harness.core.devices import CPU, Device, parse_device
from harness.core.errors import InvalidArgument
from harness.subjects.base import RunResult, Subject, execute

chainer = import_chainer()

__all__ = ["ArrayDigest", "Event", "Stream", "Localization", "HashStreamHook", "record", "align",
           "localize", "digest_array", "RowHashHook", "localize_relation", "cmd_localize"]


# ---- digests -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArrayDigest:
    """The digest (:func:`harness.judge.bitwise.digest`) of an array, with its shape and dtype; all None for a
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


_MISSING = ArrayDigest(None, None, None)


def digest_array(a: Any) -> ArrayDigest:
    """The :class:`ArrayDigest` of a NumPy / CuPy / ChainerX array or a Variable (None allowed)."""
    if a is None:
        return _MISSING
    if isinstance(a, chainer.Variable):
        a = a.array
        if a is None:
            return _MISSING
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
    return ArrayDigest(bitwise.digest(a), tuple(int(n) for n in a.shape), a.dtype.name)


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


class HashStreamHook(chainer.FunctionHook):
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


# ---- recording ---------------------------------------------------------------------------------
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
        rows = [bitwise.digest(r) for r in arr] if arr.ndim >= 1 else [bitwise.digest(arr)]
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
#: every value is the same, so they are never the root of an invariance finding.
_DATA_MOVEMENT = {"Stack", "Concat", "TransposeSequence", "SplitAxis", "Reshape", "Swapaxes", "Transpose",
                  "GetItem", "Copy", "ExpandDims", "Squeeze", "Separate", "Identity", "BroadcastTo", "Permutate"}


def _rows_of(d: ArrayDigest) -> set[str]:
    return set() if d.digest is None else set(d.digest.split(","))


def localize_relation(case: Case, subject: str | Subject, relation: str, *, device: str | Device = "cpu",
                      context: str | Context = "default") -> str:
    """Where a relation's member first departs from its base case: the first forward function node whose output
    rows (for the member's sequences) are not rows of the same node's output in the whole batch, while all of its
    input rows are. The nodes are paired by label and occurrence (the k-th LinearFunction of each run), so a
    sequence's time steps line up. One line of text; a relation whose every forward row matches says the
    difference arises in the backward (sums over the batch)."""
    from harness.execute.relations import get_relation, members

    subj = _subject(subject)
    related = members(case, [get_relation(relation)])
    if not related:
        return f"no member of relation {relation} for case {case.id}"

    def hooked(c: Case) -> Stream:
        with RowHashHook() as hook:
            result = execute(subj, c, _device(device), _context(context))
        return hook.stream(result, c.id)

    base = [e for e in hooked(case).events if e.phase == "forward"]
    index: dict[tuple[str, int], Event] = {}
    seen: dict[str, int] = {}
    for e in base:
        k = seen.get(e.label, 0)
        seen[e.label] = k + 1
        index[(e.label, k)] = e
    for m in related:
        counts: dict[str, int] = {}
        for e in (x for x in hooked(m.case).events if x.phase == "forward"):
            k = counts.get(e.label, 0)
            counts[e.label] = k + 1
            b = index.get((e.label, k))
            if b is None or len(b.outputs) != len(e.outputs) or e.label in _DATA_MOVEMENT:
                continue
            outs_ok = all(_rows_of(mo) <= _rows_of(bo) for mo, bo in zip(e.outputs, b.outputs))
            if outs_ok:
                continue
            ins_ok = len(b.inputs) == len(e.inputs) and all(_rows_of(mi) <= _rows_of(bi)
                                                            for mi, bi in zip(e.inputs, b.inputs))
            if ins_ok:
                return (f"{relation}:{m.label}: forward of {e.label} (occurrence {k + 1}): its output rows differ from "
                        f"the whole batch's while its input rows matched (output {e.outputs[0].shape} here, "
                        f"{b.outputs[0].shape} in the batch)")
    return (f"{relation}: every forward output row of the members is a row of the whole batch's; the bits differ "
            f"in the backward (sums over the batch, such as parameter gradients)")


def _subject(subject: str | Subject) -> Subject:
    if isinstance(subject, Subject):
        return subject
    from harness.subjects.registry import get_subject

    return get_subject(subject)


def _device(device: str | Device) -> Device:
    return device if isinstance(device, Device) else parse_device(device)


def _context(context: str | Context) -> Context:
    return context if isinstance(context, Context) else get_context(context)


def record(subject_name: str | Subject, case: Case, device: str | Device = CPU,
           context: str | Context = "default", *, label: str | None = None) -> Stream:
    """Run the subject once (via :func:`execute`) under a :class:`HashStreamHook`; its stream.

    A skipped run (device or context not applicable here) raises :class:`InvalidArgument`; a run
    whose subject raised gives a stream with ``status='error'`` and the events up to the error.
    """
    subject, dev, ctx = _subject(subject_name), _device(device), _context(context)
    if not subject.applies_to(case):
        raise InvalidArgument(f"subject={subject.name!r} does not take case {case.id} (family {case.family})")
    with HashStreamHook() as hook:
        result = execute(subject, case, dev, ctx)
    if result.status == "skipped":
        raise InvalidArgument(f"subject={subject.name!r} on {dev.id} under {ctx.name}: {result.skip_reason}")
    return hook.stream(result, label or f"{dev.id}/{ctx.name}")


# ---- alignment ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Localization:
    """Where two runs first diverged: the root-cause event, what differed after it, and a note."""

    root: Event | None
    downstream: list[Event]
    aligned: bool
    note: str
    #: The root's counterpart in the other stream.
    root_other: Event | None = None
    #: Events before the root whose outputs matched.
    matched_before: int = 0
    #: Events before the root that differed, but only with differing inputs too.
    entered_before: list[Event] = field(default_factory=list)
    #: Events that ran inside the root (functions its backward applied) and differed.
    inside: list[Event] = field(default_factory=list)
    #: The first of those whose outputs differ while its inputs matched.
    inside_root: Event | None = None
    #: Final outputs (RunResult arrays) whose digests differ.
    outputs_differ: tuple[str, ...] = ()
    #: Number of event pairs compared, and events left without a counterpart.
    compared: int = 0
    unmatched: int = 0
    runs: tuple[str, str] = ("", "")
    #: One line per comparison made by :func:`localize`.
    comparisons: tuple[str, ...] = ()

    @property
    def diverged(self) -> bool:
        return self.root is not None or bool(self.downstream) or bool(self.outputs_differ) \
            or bool(self.entered_before)

    def _root_lines(self, ev: Event, other: Event | None, prefix: str) -> list[str]:
        n_in = len(ev.inputs)
        lines = [f"{prefix}{ev.describe()}: outputs differ while all {n_in} input{'s' if n_in != 1 else ''} matched"]
        if other is not None:
            for k, (name, da) in enumerate(zip(ev.output_names, ev.outputs)):
                db = other.outputs[k] if k < len(other.outputs) else _MISSING
                if da != db:
                    lines.append(f"  output {k} ({name}): digest {da.short()} vs {db.short()} "
                                 f"(shape {da.shape}, {da.dtype})"
                                 + ("" if (da.shape, da.dtype) == (db.shape, db.dtype)
                                    else f" vs (shape {db.shape}, {db.dtype})"))
        return lines

    def message(self) -> str:
        lines: list[str] = []
        if self.runs != ("", ""):
            lines.append(f"Compared: {self.runs[0]} vs {self.runs[1]} ({self.compared} node events"
                         + (f", {self.unmatched} without a counterpart" if self.unmatched else "") + ")")
        if not self.aligned:
            lines.append("Streams do not align (different graphs): aligned by (label, occurrence)")
        if self.root is not None:
            lines += self._root_lines(self.root, self.root_other, "Root cause: ")
            if self.root.parent is not None:
                lines.append(f"  (it ran inside step {self.root.parent}, whose inputs already differed)")
            if self.inside_root is not None:
                lines.append(f"  inside it, first: {self.inside_root.describe()} "
                             f"(outputs differ, its {len(self.inside_root.inputs)} inputs matched)")
            elif self.inside:
                lines.append(f"  inside it, differing: {', '.join(e.short() for e in self.inside[:5])}")
            shown = ", ".join(e.short() for e in self.downstream[:20])
            more = f", … and {len(self.downstream) - 20} more" if len(self.downstream) > 20 else ""
            lines.append(f"Downstream of the root ({len(self.downstream)} node"
                         f"{'s' if len(self.downstream) != 1 else ''}): {shown or '-'}{more}")
            lines.append(f"Nodes before the root matched: {self.matched_before}")
            if self.entered_before:
                lines.append(f"Before the root, {len(self.entered_before)} node(s) already differed with "
                             f"differing inputs: {', '.join(e.short() for e in self.entered_before[:5])}")
        else:
            lines.append(self.note)
            if self.downstream:
                shown = ", ".join(e.short() for e in self.downstream[:20])
                lines.append(f"Differing nodes ({len(self.downstream)}): {shown}")
        if self.outputs_differ:
            lines.append(f"Final outputs that differ: {', '.join(self.outputs_differ)}")
        if self.root is not None and self.note:
            lines.append(self.note)
        if len(self.comparisons) > 1:
            lines.append("Comparisons: " + "; ".join(self.comparisons))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        ev = lambda e: None if e is None else e.to_dict()  # noqa: E731
        return {
            "root": ev(self.root), "root_other": ev(self.root_other),
            "downstream": [e.to_dict() for e in self.downstream], "aligned": self.aligned, "note": self.note,
            "matched_before": self.matched_before, "entered_before": [e.to_dict() for e in self.entered_before],
            "inside": [e.to_dict() for e in self.inside], "inside_root": ev(self.inside_root),
            "outputs_differ": list(self.outputs_differ), "compared": self.compared, "unmatched": self.unmatched,
            "runs": list(self.runs), "comparisons": list(self.comparisons), "diverged": self.diverged,
            "message": self.message(),
        }


def _pairs(a: Stream, b: Stream) -> tuple[list[tuple[Event, Event]], bool, int]:
    sig_a = [(e.phase, e.label) for e in a.events]
    sig_b = [(e.phase, e.label) for e in b.events]
    if sig_a == sig_b:
        return list(zip(a.events, b.events)), True, 0
    by_key: dict[tuple[str, str, int], Event] = {}
    seen: dict[tuple[str, str], int] = {}
    for e in b.events:
        k = (e.phase, e.label)
        by_key[(e.phase, e.label, seen.get(k, 0))] = e
        seen[k] = seen.get(k, 0) + 1
    pairs: list[tuple[Event, Event]] = []
    seen = {}
    for e in a.events:
        k = (e.phase, e.label)
        other = by_key.get((e.phase, e.label, seen.get(k, 0)))
        seen[k] = seen.get(k, 0) + 1
        if other is not None:
            pairs.append((e, other))
    return pairs, False, len(a.events) + len(b.events) - 2 * len(pairs)


def _differ(xs: tuple[ArrayDigest, ...], ys: tuple[ArrayDigest, ...]) -> list[int]:
    n = max(len(xs), len(ys))
    return [i for i in range(n) if (xs[i] if i < len(xs) else None) != (ys[i] if i < len(ys) else None)]


def _descendants(events: Iterable[Event], root: Event) -> set[int]:
    inside = {root.step}
    for e in events:  # parents start before their children, so one pass in step order suffices
        if e.parent is not None and e.parent in inside:
            inside.add(e.step)
    inside.discard(root.step)
    return inside


def align(a: Stream, b: Stream) -> Localization:
    """Pair two streams' events and name the root cause of their divergence, if any."""
    pairs, aligned, unmatched = _pairs(a, b)
    notes: list[str] = []
    if not aligned:
        notes.append("streams do not align (different graphs)")
    failed = [f"{s.label} failed: {s.error}" for s in (a, b) if s.status != "ok"]
    outputs_differ = tuple(sorted(k for k in set(a.results) | set(b.results)
                                  if a.results.get(k) != b.results.get(k)))
    out_diff = [bool(_differ(x.outputs, y.outputs)) for x, y in pairs]
    in_diff = [bool(_differ(x.inputs, y.inputs)) for x, y in pairs]
    root_i = next((i for i, (o, n) in enumerate(zip(out_diff, in_diff)) if o and not n), None)
    common = dict(aligned=aligned, outputs_differ=outputs_differ, compared=len(pairs), unmatched=unmatched,
                  runs=(a.label, b.label))
    differing = [pairs[i][0] for i, o in enumerate(out_diff) if o]
    if root_i is None:
        if differing:
            first_i = out_diff.index(True)
            first, other = pairs[first_i]
            which = [first.input_names[i] if i < len(first.input_names) else f"input {i}"
                     for i in _differ(first.inputs, other.inputs)]
            notes.append(f"every one of the {len(differing)} differing nodes also had differing inputs: the "
                         f"divergence entered from outside the graph (the first, {first.describe()}, already "
                         f"had differing {', '.join(which)}; e.g. a differing initial input, or an "
                         f"accumulation done outside a function node)")
        elif outputs_differ:
            seen = f"all {len(pairs)} node events matched" if pairs else "no Chainer function node ran"
            notes.append(f"{seen}, but final outputs differ ({', '.join(outputs_differ)}): the divergence "
                         f"happened outside Chainer function nodes (e.g. gradient accumulation into "
                         f"Variable.grad, or host code)")
        elif unmatched:
            notes.append(f"no divergence in the {len(pairs)} paired node events or the final outputs, "
                         f"but {unmatched} events have no counterpart")
        else:
            notes.append(f"no divergence: {len(pairs)} node events and {len(a.results)} final outputs "
                         f"bit-identical")
        notes += failed
        return Localization(root=None, downstream=differing, note="; ".join(notes), **common)
    root, root_other = pairs[root_i]
    inner = _descendants(a.events, root)
    inside = [pairs[i][0] for i in range(root_i + 1, len(pairs)) if out_diff[i] and pairs[i][0].step in inner]
    inside_root = next((pairs[i][0] for i in range(root_i + 1, len(pairs))
                        if out_diff[i] and not in_diff[i] and pairs[i][0].step in inner), None)
    downstream = [pairs[i][0] for i in range(root_i + 1, len(pairs)) if out_diff[i] and pairs[i][0].step not in inner]
    entered = [pairs[i][0] for i in range(root_i) if out_diff[i]]
    matched_before = sum(1 for i in range(root_i) if not out_diff[i])
    if not outputs_differ:
        notes.append("the final outputs are nevertheless bit-identical")
    notes += failed
    return Localization(root=root, downstream=downstream, note="; ".join(notes), root_other=root_other,
                        matched_before=matched_before, entered_before=entered, inside=inside,
                        inside_root=inside_root, **common)


# ---- localize ----------------------------------------------------------------------------------
def localize(case: Case, subject: str | Subject, *, device: str | Device = "cpu",
             contexts: Sequence[str | Context] | None = None, devices: Sequence[str | Device] | None = None,
             repeats: int = 3, context: str | Context = "default") -> Localization:
    """Run ``subject`` on ``case`` several times and localize the first divergence.

    Either ``repeats`` runs on ``device`` under ``context``, or one run under each of two
    ``contexts`` on ``device``, or one run on each of two ``devices`` under ``context``. Each
    stream is aligned against the first; the first comparison that finds a root cause is
    returned (else the first that found any difference, else the last).
    """
    if contexts is not None and devices is not None:
        raise InvalidArgument("give contexts or devices, not both")
    subj = _subject(subject)
    if contexts is not None:
        ctxs = [_context(c) for c in contexts]
        if len(ctxs) != 2:
            raise InvalidArgument(f"contexts={[c.name for c in ctxs]!r} must name exactly two contexts")
        dev = _device(device)
        streams = [record(subj, case, dev, c, label=c.name) for c in ctxs]
    elif devices is not None:
        devs = [_device(d) for d in devices]
        if len(devs) != 2:
            raise InvalidArgument(f"devices={[d.id for d in devs]!r} must name exactly two devices")
        ctx = _context(context)
        streams = [record(subj, case, d, ctx, label=d.id) for d in devs]
    else:
        if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 2:
            raise InvalidArgument(f"repeats={repeats!r} must be an int >= 2")
        dev, ctx = _device(device), _context(context)
        streams = [record(subj, case, dev, ctx, label=f"run {i + 1}") for i in range(repeats)]
    results = [align(streams[0], s) for s in streams[1:]]
    lines = tuple(f"{r.runs[0]} vs {r.runs[1]}: "
                  + (f"root {r.root.short()}" if r.root is not None else
                     ("diverged" if r.diverged else "identical")) for r in results)
    chosen = next((r for r in results if r.root is not None), None) \
        or next((r for r in results if r.diverged), None) or results[-1]
    return Localization(**{**{f: getattr(chosen, f) for f in chosen.__dataclass_fields__}, "comparisons": lines})


# ---- command line ------------------------------------------------------------------------------
def cmd_localize(r: Reproducer, as_json: bool = False, case: Case | None = None) -> int:
    """Run the localization reproducer ``r`` asks for on ``case`` (default: read with
    :func:`harness.core.cases.load_case_file`, the one case loader) and print it (``as_json``: as JSON);
    HarnessError propagates. 0 when it ran."""
    from harness.subjects.registry import load_plugin

    for spec in r.plugins:
        load_plugin(spec)
    if case is None:
        case = load_case_file(r.case, r.case_id or None)
    device, context = r.devices[-1], r.contexts[-1]
    if r.relation:
        print(localize_relation(case, r.subject, r.relation, device=device, context=context))
        return 0
    two_devices, two_contexts = len(r.devices) == 2, len(r.contexts) == 2
    runs = {} if r.repeats is None else {"repeats": r.repeats}  # (None: localize's own default)
    loc = localize(case, r.subject, device=device, contexts=list(r.contexts) if two_contexts else None,
                   devices=list(r.devices) if two_devices else None, context=context, **runs)
    if as_json:
        print(json.dumps(loc.to_dict(), indent=2, sort_keys=True))
    else:
        print(loc.message())
    return 0
