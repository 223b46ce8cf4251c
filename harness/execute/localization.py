"""Localize a divergence: the first Chainer function whose outputs differ while its inputs matched.

Two runs of one subject (repeats, two contexts, or two devices) are each recorded as a stream of digests by
:class:`~harness.execute.hooks.HashStreamHook` (:func:`record`). :func:`align` pairs the events of two streams
and names the *root cause*: the first event, in the order the events started, whose outputs differ while every
one of its inputs matched. Everything that differs after it is *downstream of the root*. The result is a
:class:`Localization` record, with a JSON round trip.

The subject runs under the hooks in a child process, never in the harness's own: :func:`localize_in_child` sends
a :class:`~harness.judge.reproducer.Reproducer` as a JSON request to :func:`localize_request` there
(:func:`harness.execute.sandbox.run_call`) and reads the record back; :func:`localize_findings` does so for a
report's findings, within a budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from harness.core.cases import Case
from harness.core.contexts import Context, get_context
from harness.core.corpus_files import load_case_file
from harness.core.devices import CPU, Device, parse_device
from harness.core.errors import InvalidArgument, SetupError
from harness.execute.hooks import MISSING, ArrayDigest, Event, HashStreamHook, RowHashHook, Stream
from harness.execute.settings import LOCALIZE_REPEATS
from harness.judge import findings as F
from harness.judge.reproducer import Reproducer
from harness.subjects.base import Subject, execute

__all__ = ["Localization", "record", "align", "chosen_comparison", "localize", "localize_relation",
           "localize_reproducer", "localize_request", "localize_in_child", "localize_findings"]


# ---- recording, and the relations' row-by-row comparison ----------------------------------------------
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
                db = other.outputs[k] if k < len(other.outputs) else MISSING
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

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Localization":
        """The record :meth:`to_dict` wrote (its ``diverged`` and ``message`` are derived, not read)."""
        ev = lambda e: None if e is None else Event.from_dict(e)  # noqa: E731
        runs = tuple(str(r) for r in d.get("runs", ("", "")))
        return cls(root=ev(d.get("root")), downstream=[Event.from_dict(e) for e in d.get("downstream", ())],
                   aligned=bool(d["aligned"]), note=str(d["note"]), root_other=ev(d.get("root_other")),
                   matched_before=int(d.get("matched_before", 0)),
                   entered_before=[Event.from_dict(e) for e in d.get("entered_before", ())],
                   inside=[Event.from_dict(e) for e in d.get("inside", ())], inside_root=ev(d.get("inside_root")),
                   outputs_differ=tuple(str(o) for o in d.get("outputs_differ", ())),
                   compared=int(d.get("compared", 0)), unmatched=int(d.get("unmatched", 0)),
                   runs=(runs[0], runs[1]) if len(runs) == 2 else ("", ""),
                   comparisons=tuple(str(c) for c in d.get("comparisons", ())))

    def cause(self) -> str:
        """One line: where it starts (the root cause's line without its label), else the message's first line."""
        if self.root is not None:
            return self._root_lines(self.root, self.root_other, "")[0]
        first = next((ln.strip() for ln in self.message().splitlines() if ln.strip()), "")
        return first or "no differing function node"


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
    common: dict[str, Any] = dict(aligned=aligned, outputs_differ=outputs_differ, compared=len(pairs),
                                  unmatched=unmatched, runs=(a.label, b.label))
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
             repeats: int = LOCALIZE_REPEATS, context: str | Context = "default") -> Localization:
    """Run ``subject`` on ``case`` several times and localize the first divergence.

    Either ``repeats`` runs on ``device`` under ``context``, or one run under each of two
    ``contexts`` on ``device``, or one run on each of two ``devices`` under ``context``. Each
    stream is aligned against the first; the comparison returned is chosen by ``chosen_comparison``.
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
    chosen = chosen_comparison(results)
    return Localization(**{**{f: getattr(chosen, f) for f in chosen.__dataclass_fields__}, "comparisons": lines})


def chosen_comparison(results: Sequence[Localization]) -> Localization:
    """The comparison a localization reports: the first with a root cause whose divergence reaches the final
    outputs (what the user saw differ), else the first with a root cause, else the first that found any
    difference, else the last. A root whose differences are rounded away downstream (a saturated tanh) is
    real but explains nothing the user saw, so a pair whose outputs differ is preferred to it."""
    return next((r for r in results if r.root is not None and r.outputs_differ), None) \
        or next((r for r in results if r.root is not None), None) \
        or next((r for r in results if r.diverged), None) or results[-1]


# ---- as a request, in a child process ---------------------------------------------------------------------


def localize_reproducer(r: Reproducer) -> Localization:
    """The localization ``r`` asks for, run here (in a process that may run subjects): its plug-ins loaded, its
    case read with :func:`~harness.core.corpus_files.load_case_file` (the one case loader). Two devices or two contexts
    compare one run each; a relation compares its members with the whole batch (the record's note says where
    they depart); else ``r.repeats`` runs (default :data:`harness.execute.settings.LOCALIZE_REPEATS`)."""
    from harness.subjects.registry import load_plugin

    for spec in r.plugins:
        load_plugin(spec)
    case = load_case_file(r.case, r.case_id or None)
    if r.relation:
        line = localize_relation(case, r.subject, r.relation, device=r.devices[0], context=r.contexts[0])
        return Localization(root=None, downstream=[], aligned=True, note=line)
    return localize(case, r.subject, device=r.devices[0], context=r.contexts[0],
                    contexts=r.contexts if len(r.contexts) > 1 else None,
                    devices=r.devices if len(r.devices) > 1 else None,
                    repeats=LOCALIZE_REPEATS if r.repeats is None else r.repeats)


def localize_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """The named function a child runs (:func:`harness.execute.sandbox.run_call`): a reproducer's JSON in,
    its :class:`Localization`'s JSON out."""
    return localize_reproducer(Reproducer.from_dict(request)).to_dict()


def _in_child(r: Reproducer, timeout: float, max_case_bytes: int | None = None) -> tuple[Localization | None, str]:
    """The record, or None and one line saying why there is none. ``max_case_bytes`` (a user's case limit) is
    the child's too: it builds the case's arrays under it (:func:`harness.core.cases.build_arrays`)."""
    from harness.core.case_limits import MAX_CASE_BYTES_ENV
    from harness.execute.sandbox import run_call

    env = {} if max_case_bytes is None else {MAX_CASE_BYTES_ENV: str(int(max_case_bytes))}
    res = run_call(localize_request, r.to_dict(), timeout, env=env)
    if not res.ok:
        return None, res.reason()
    return Localization.from_dict(res.answer or {}), ""


def localize_in_child(r: Reproducer, timeout: float, max_case_bytes: int | None = None) -> Localization:
    """:func:`localize_reproducer` in a child process (its own process group, killed whole at ``timeout``
    seconds, building the case under ``max_case_bytes``); a child that crashed, hung, exited or refused the
    request raises :class:`SetupError` saying why."""
    loc, why = _in_child(r, timeout, max_case_bytes)
    if loc is None:
        raise SetupError(f"localize: {why}")
    return loc


def localize_findings(found: Sequence[F.Finding], *, budget: float = 90.0, per_finding: float = 60.0,
                      parallel: int = 2, max_case_bytes: int | None = None) -> list[F.Finding]:
    """``found`` with ``cause`` filled for each localizable finding, until ``budget`` seconds are spent.

    Once per finding (the group shares one cause), on its reproducer's case (the minimal one where shrinking
    found it), each in a child process: a crash, a hang or an exit there is this finding's
    "not localized: <why>", never the report's end. Findings with the same reproducer (another tensor kind of
    the same minimal case) share one run; ``parallel`` children run at once (each is one interpreter)."""
    from concurrent.futures import ThreadPoolExecutor

    out = list(found)
    t0 = time.perf_counter()
    requests: dict[Reproducer, list[int]] = {}
    for i, f in enumerate(found):
        r = F.reproducer_of(f, "localize")
        if r is not None and not f.cause:
            requests.setdefault(r.for_verb("localize"), []).append(i)
    causes: dict[Reproducer, str] = {}

    def one(r: Reproducer) -> None:
        left = budget - (time.perf_counter() - t0)
        if left <= 1:
            return
        loc, why = _in_child(r, min(per_finding, left), max_case_bytes)
        causes[r] = loc.cause() if loc is not None else f"not localized: {why}"

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        list(pool.map(one, requests))
    for r, idx in requests.items():
        if r in causes:
            for i in idx:
                out[i] = F.with_cause(found[i], causes[r])
    return out
