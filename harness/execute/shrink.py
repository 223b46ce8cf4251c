"""Shrink a case while the same finding still reproduces: passes over the case's structure, run in workers.

Hypothesis shrinks inside the pytest suites; campaigns, the gate and the report find their cases in a corpus and
never did. :func:`shrink` takes a case and a :class:`Target` (the finding: kind, tensor kind, subject, device,
context and the other side) and applies passes, keeping a step only while the finding still reproduces:

1. delete: drop blocks of sequences (halves first, down to one at a time), flatten extra id dimensions, one layer;
2. shorten: every sequence to 1 or half its length;
3. lower: each sequence's length, each id dimension, then the layers, hidden size, input size, embedding width
   and vocabulary (the ignore label with it), each to the lowest value where the finding still shows, by
   bisection (:func:`lowest`): a threshold such as a BLAS library's switch to threads is found in about
   ``log2(n)`` runs, not ``n``;
4. simplify: unidirectional, no initial state, no dropout, uniform ids, no ignore fraction.

It repeats the passes until none makes progress, or the budget (seconds, runs) is spent. Every run goes through
:class:`~harness.execute.isolated.Runner` (the campaign's workers, with their timeout): nothing of the subject
runs here. A nondeterministic finding is kept only where it reproduces in every one of ``attempts`` tries (each
R runs): its minimal case must reproduce from the printed command, not once in a while.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from harness.core.cases import Case
from harness.core.devices import Device
from harness.core.errors import HarnessError, InvalidArgument
from harness.core.vocabulary import MODEL_FAMILIES
from harness.execute.isolated import Runner, measure_isolated
from harness.judge.contracts import Contracts
from harness.judge.finding_kinds import FindingKind, finding_kind, kind_of, tensor_kind

__all__ = ["Target", "ShrinkResult", "shrink", "reproduces", "case_sizes", "smaller", "knobs", "lowest"]


@dataclass(frozen=True)
class Target:
    """The finding that must still reproduce (of a kind a smaller case can show: :attr:`FindingKind.shrinkable`)."""

    kind: FindingKind                  # (its text where built from one)
    subject: str
    device: Device
    context: str = "default"
    other: str = ""                    # the other context or device of a cross-context/device finding
    relation: str = ""
    tensor_kind: str = ""              # "" for a task-level finding (an error)
    error: str = ""                    # "Type in phase" of an error finding
    others: tuple[Device, ...] = ()    # the other device, parsed
    flaky: bool = False                # the subject is not reproducible run to run: it shows only in some runs

    def describe(self) -> str:
        t = f" on {self.tensor_kind}" if self.tensor_kind else ""
        e = f" ({self.error})" if self.error else ""
        return f"{self.kind}{t}{e} of {self.subject} [{self.device.id}] {self.relation or self.context}"

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", finding_kind(self.kind))


@dataclass
class ShrinkResult:
    original: Case
    case: Case
    runs: int
    seconds: float
    complete: bool
    steps: list[str] = field(default_factory=list)

    @property
    def shrunk(self) -> bool:
        return self.case.id != self.original.id


_REPEATS = {FindingKind.REPEAT: 6, FindingKind.PROCESS: 3}


def _error_of(record: Any) -> str:
    e = record.first_error
    return "" if e is None else f"{e.get('type')} in {e.get('phase')}"


#: What one deterministic check of a case showed, for every tensor kind at once (see :func:`reproduces`): the
#: tensor kinds that showed a finding, by :func:`_memo_key`.
Memo = dict[tuple[Any, ...], frozenset[str]]


def _memo_key(case: Case, t: Target) -> tuple[Any, ...] | None:
    """The key of a deterministic check of ``case`` for ``t`` whatever its tensor kind; None where a check
    must run again each time (a nondeterministic finding: it shows only in some runs)."""
    if t.kind in _REPEATS or t.flaky:
        return None
    return (case.id, t.kind, t.subject, t.device.id, t.context, t.other, t.relation, t.error,
            tuple(d.id for d in t.others))


def reproduces(runner: Runner, contracts: Contracts, case: Case, t: Target, attempts: int = 3,
               required: int | None = None, memo: Memo | None = None) -> bool:
    """Whether ``case`` still shows the finding ``t`` (kind and tensor kind; an error's type and phase). A
    nondeterministic finding must show in ``required`` of ``attempts`` tries (default: every one), so that a
    minimal case reproduces from its printed command, not once in a while.

    ``memo`` (a dict the caller keeps) records, for a deterministic finding, every tensor kind a check showed:
    the findings of one case that differ only in their tensor kind (outputs, gradients) shrink one after the
    other through the same cases, and each case runs once for all of them. The subjects checked this way are
    bit-reproducible run to run (their finding is not a nondeterministic one), so a second run would show the
    same."""
    key = None if memo is None else _memo_key(case, t)
    if memo is not None and key is not None:  # (key is None where memo is)
        if key not in memo:
            memo[key] = _kinds_shown(runner, contracts, case, t)
        return _shows(memo[key], t)
    n = max(1, attempts if t.kind in _REPEATS or t.flaky else 1)
    need = n if required is None else max(1, min(required, n))
    hits = 0
    for i in range(n):
        hits += bool(_once(runner, contracts, case, t))
        if hits >= need:
            return True
        if hits + (n - i - 1) < need:
            return False
    return False


def _once(runner: Runner, contracts: Contracts, case: Case, t: Target) -> bool:
    return _shows(_kinds_shown(runner, contracts, case, t, first=True), t)


def _shows(kinds: frozenset[str], t: Target) -> bool:
    """Whether a check that showed ``kinds`` shows ``t`` (its tensor kind; any, for a task-level finding)."""
    return t.tensor_kind in kinds if t.tensor_kind else bool(kinds)


def _kinds_shown(runner: Runner, contracts: Contracts, case: Case, t: Target, first: bool = False
                 ) -> frozenset[str]:
    """The tensor kinds on which ``case`` shows ``t``'s kind of finding ("" for a task-level one, an error of
    ``t.error``); with ``first``, a check stops at the first that shows ``t`` itself."""
    if t.relation:
        return _relation_kinds(runner, contracts, case, t, first)
    fresh = 2 if t.kind == FindingKind.PROCESS else 0
    # a trajectory divergence shows as its step tensors' difference between the two contexts
    want = FindingKind.CONTEXT if t.kind == FindingKind.TRAJECTORY else t.kind
    contexts = [t.other] if want == FindingKind.CONTEXT and t.other else []
    here = measure_isolated(runner, contracts, t.subject, case, t.device, t.context,
                            repeats=_REPEATS.get(t.kind, 6 if t.flaky else 1), fresh=fresh, contexts=contexts,
                            devices=list(t.others), oracle=t.kind == FindingKind.ORACLE)
    shown = [m for m in here.measures if kind_of(m) == want]
    if t.error:
        return frozenset([""]) if _error_of(here.record) == t.error and shown else frozenset()
    if t.kind != want:  # a trajectory is one finding, whatever step tensors show it
        return frozenset([""]) if shown else frozenset()
    return frozenset(tensor_kind(m.tensor) for m in shown) | (frozenset([""]) if shown else frozenset())


def _relation_kinds(runner: Runner, contracts: Contracts, case: Case, t: Target, first: bool) -> frozenset[str]:
    from harness.execute.relations import get_relation, members, pairs
    from harness.judge.verdicts import judge_pair

    related = members(case, [get_relation(t.relation)])
    if not related:
        return frozenset()
    base = runner.run(case, t.subject, t.device, t.context)
    if not base.arrays:
        return frozenset()
    contract = contracts.find(t.subject, t.device.kind, t.context)
    key = {"case_id": case.id, "subject": t.subject, "device": t.device.id, "context": t.context}
    shown: set[str] = set()
    for m in related:
        r = runner.run(m.case, t.subject, t.device, t.context)
        if not r.arrays:
            continue
        for name, b, a in pairs(case.family, t.relation, m.index, base.arrays, r.arrays):
            kind = tensor_kind(name)
            if kind in shown:
                continue
            if judge_pair("relation", contract, key, name, b, a, m.label, relation=t.relation).identical is False:
                shown |= {kind, ""}
                if first and (not t.tensor_kind or kind == t.tensor_kind):
                    return frozenset(shown)
    return frozenset(shown)


# --------------------------------------------------------------------------- passes


def case_sizes(case: Case) -> dict[str, Any]:
    """The dimensions a shrink can reduce, as a person reads them."""
    s = case.spec
    if case.family == "embed":
        return {"ids_shape": list(s["ids_shape"]), "vocab": s["vocab"], "width": s["width"]}
    if case.family in MODEL_FAMILIES:
        return {k: s[k] for k in _MODEL_KNOBS + ("n_layers", "hidden", "width", "vocab") if k in s}
    out: dict[str, Any] = {"lengths": list(s["lengths"]), "hidden": s["hidden"], "n_layers": s["n_layers"]}
    if case.family == "lstm":
        out["in_size"] = s["in_size"]
    else:
        out["vocab"], out["width"] = s["vocab"], s["width"]
    if s.get("bidirectional"):
        out["bidirectional"] = True
    return out


def _measure(case: Case) -> tuple[int, ...]:
    """A total order on cases: fewer elements, then fewer sequences, then smaller dimensions."""
    s = case.spec
    dims = [int(v) for k, v in sorted(s.items()) if k in ("vocab", "width", "hidden", "in_size", "n_layers")
            + _MODEL_KNOBS and isinstance(v, int)]
    seqs = list(s.get("lengths", ())) or list(s.get("ids_shape", ()))
    simple = sum(1 for k in ("bidirectional", "dropout", "ignore_frac") if s.get(k))
    simple += int(s.get("initial_state", "none") != "none") + int(s.get("id_kind", "uniform") != "uniform")
    try:
        size = int(case.size())
    except Exception:  # noqa: BLE001
        size = 0
    return (size, len(seqs), sum(seqs), sum(dims), simple)


def smaller(a: Case, b: Case) -> bool:
    """Whether ``a`` is strictly simpler than ``b``."""
    return _measure(a) < _measure(b)


def _with(case: Case, **spec: Any) -> Case | None:
    new = {**dict(case.spec), **spec}
    for k in [k for k, v in spec.items() if v is None]:
        new.pop(k, None)
    try:
        return Case(case.family, case.seed, new, case.arrays, case.expect, case.tags)
    except (HarnessError, ValueError, TypeError):
        return None  # not a valid case (an ignore label above the new vocabulary, ...): not a candidate


def _delete(case: Case) -> Iterator[tuple[str, Case | None]]:
    s = case.spec
    lengths = list(s.get("lengths", ()))
    n = len(lengths)
    chunk = n // 2
    while chunk >= 1 and n > 1:  # blocks of sequences, largest first (Hypothesis-style block deletion)
        for start in range(0, n, chunk):
            rest = lengths[:start] + lengths[start + chunk:]
            if rest:
                yield f"drop sequences {start}..{min(start + chunk, n) - 1}", _with(case, lengths=rest)
        chunk //= 2
    shape = list(s.get("ids_shape", ()))
    if len(shape) > 1:
        yield "flatten the ids to one dimension", _with(case, ids_shape=[shape[0]])
    if int(s.get("n_layers", 1)) > 1:
        yield "one layer", _with(case, n_layers=1)


def _shorten(case: Case) -> Iterator[tuple[str, Case | None]]:
    lengths = list(case.spec.get("lengths", ()))
    if len(lengths) > 1:
        yield "every sequence of length 1", _with(case, lengths=[1] * len(lengths))
        yield "every sequence half as long", _with(case, lengths=[max(1, n // 2) for n in lengths])


#: A model case's own dimensions a shrink lowers first: the trajectory's steps, the batch, the longest sequence.
_MODEL_KNOBS = ("steps", "batch", "max_len")


@dataclass(frozen=True)
class Knob:
    """One integer dimension of a case (a sequence's length, an id dimension, a size), lowered by bisection."""

    label: str                                   # "sequence 3 of length", "hidden", ...
    get: Callable[[Case], int | None]            # its value in a case (None: the case has no such dimension)
    put: Callable[[Case, int], Case | None]      # the case with the dimension at a value (None: not valid)
    floor: int = 1


def _length_knob(key: str, i: int, label: str) -> Knob:
    def get(c: Case) -> int | None:
        seq = list(c.spec.get(key, ()))
        return int(seq[i]) if i < len(seq) else None

    def put(c: Case, v: int) -> Case | None:
        seq = list(c.spec[key])
        return _with(c, **{key: seq[:i] + [v] + seq[i + 1:]})

    return Knob(label, get, put)


def _size_knob(key: str) -> Knob:
    def get(c: Case) -> int | None:
        v = c.spec.get(key)
        return int(v) if isinstance(v, int) and not isinstance(v, bool) else None

    def put(c: Case, v: int) -> Case | None:
        extra: dict[str, Any] = {}
        il = c.spec.get("ignore_label")
        if key == "vocab" and isinstance(il, int) and v <= il < int(c.spec["vocab"]):
            extra["ignore_label"] = v - 1 if v > 1 else None  # keep a label inside the vocabulary
        return _with(c, **{key: v}, **extra)

    return Knob(key, get, put)


def knobs(case: Case) -> list[Knob]:
    """The integer dimensions of ``case`` a shrink lowers: each sequence's length and id dimension (shorten),
    then the sizes (lower)."""
    s = case.spec
    out = [_length_knob("lengths", i, f"sequence {i} of length") for i in range(len(s.get("lengths", ())))]
    out += [_length_knob("ids_shape", i, f"ids dimension {i} of") for i in range(len(s.get("ids_shape", ())))]
    model = _MODEL_KNOBS if case.family in MODEL_FAMILIES else ()  # a training run: fewer steps, a smaller batch
    return out + [_size_knob(k) for k in model + ("n_layers", "hidden", "in_size", "width", "vocab")
                  if isinstance(s.get(k), int)]


def lowest(value: int, floor: int, holds: Callable[[int], bool]) -> int:
    """The lowest ``v`` in ``[floor, value]`` where ``holds(v)``, found by bisection (``holds(value)`` is taken
    as true: it is the current case). Tries ``floor`` first, then ``value - 1``, so a dimension that is already
    as low as it goes costs two runs, and one that goes straight down costs one; otherwise about
    ``log2(value - floor)`` runs. Where ``holds`` is not monotonic the answer is a value that holds, not
    necessarily the lowest one."""
    if value <= floor:
        return value
    if holds(floor):
        return floor
    if value - 1 == floor or not holds(value - 1):
        return value
    lo, hi = floor, value - 1          # holds(lo) is false, holds(hi) is true
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _simplify(case: Case) -> Iterator[tuple[str, Case | None]]:
    s = case.spec
    if s.get("bidirectional"):
        yield "unidirectional", _with(case, bidirectional=False)
    if s.get("initial_state", "none") != "none":
        yield "no initial state", _with(case, initial_state="none")
    if s.get("dropout"):
        yield "no dropout", _with(case, dropout=0.0)
    if s.get("id_kind", "uniform") != "uniform":
        yield "uniform ids", _with(case, id_kind="uniform")
    if s.get("ignore_frac"):
        yield "no ignore labels", _with(case, ignore_frac=0.0)


#: The passes over a case's structure, in order; "lower" is the bisection of every :func:`knobs` dimension.
PASSES: tuple[tuple[str, Callable[[Case], Iterator[tuple[str, Case | None]]] | None], ...] = (
    ("delete", _delete), ("shorten", _shorten), ("lower", None), ("simplify", _simplify))


def shrink(runner: Runner, contracts: Contracts, case: Case, target: Target, *, budget: float = 60.0,
           max_runs: int = 400, attempts: int = 3, log: Callable[[str], None] | None = None,
           memo: Memo | None = None) -> ShrinkResult:
    """The smallest case the passes reach on which ``target`` still reproduces (``case`` itself where it does
    not reproduce at all: check :func:`reproduces` first). Stops when no pass makes progress, or after
    ``budget`` seconds or ``max_runs`` worker runs (``complete`` False then). ``memo``: see
    :func:`reproduces` (the report keeps one per lane, for the findings of a case that shrink one after
    another)."""
    if case.arrays:
        raise InvalidArgument(f"case {case.id} has explicit arrays: its structure cannot shrink (a relation's "
                              f"member? shrink its base case)")
    t0 = time.perf_counter()
    runs0 = runner.runs
    best, steps = case, []
    memo = {} if memo is None else memo  # a candidate the passes reach twice runs once

    def spent() -> bool:
        return time.perf_counter() - t0 > budget or runner.runs - runs0 >= max_runs

    def keep(cand: Case | None, what: str) -> bool:
        nonlocal best
        if cand is None or cand.id == best.id or not smaller(cand, best) or spent():
            return False
        if not reproduces(runner, contracts, cand, target, attempts, memo=memo):
            return False
        best = cand
        steps.append(what)
        if log is not None:
            log(f"shrink: {what} -> {best.id}")
        return True

    progress = True
    while progress and not spent():
        progress = False
        for _name, gen in PASSES:
            if gen is None:  # lower every integer dimension by bisection, each from the case the last one left
                for k in knobs(best):
                    v = k.get(best)
                    if v is None or spent():
                        continue
                    base = best

                    def holds(x: int, k: Knob = k, base: Case = base) -> bool:
                        return keep(k.put(base, x), f"{k.label} {x}")

                    low = lowest(v, k.floor, holds)
                    progress = progress or low < v
                continue
            for what, cand in list(gen(best)):
                if spent():
                    break
                if keep(cand, what):
                    progress = True
                    break  # restart the pass on the smaller case
    return ShrinkResult(case, best, runner.runs - runs0, time.perf_counter() - t0, complete=not spent(),
                        steps=steps)
