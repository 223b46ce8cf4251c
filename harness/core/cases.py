"""`Case`: a small, frozen, portable spec from which every array of a run is rebuilt bit-identically.

A case is plain JSON: its family, a seed, a spec (shapes, dtypes, ignore label, lengths, layers)
and, where Hypothesis chose them, explicit small arrays. Every other array is drawn from the seed, one
private stream per array name (:mod:`harness.core.array_draws`); :func:`build_arrays` hands out a case's
arrays, kept per process, after :func:`harness.core.case_limits.check_case_size` has let the case through.
Corpus files of cases are :mod:`harness.core.corpus_files`. Nothing here imports Chainer or CuPy.

Array names are shared by every subject and the oracle, so results compare by name:

- embed: ``x`` (ids), ``W``, ``gy`` (upstream gradient of ``y``), ``ggW`` (weights of the scalar
  ``sum(gW * ggW)`` whose gradient is the double backward).
- lstm: ``xs.{i}``, ``hx``, ``cx``, ``ws.{k}.{j}``, ``bs.{k}.{j}`` (``k = layer * dirs + direction``,
  ``j`` in 0..7, Chainer's layout), ``gys.{i}``, ``ghy``, ``gcy``.
- pipeline: ``x`` (padded ids, ``(batch, max_len)``), ``W`` and the lstm names except ``xs``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import InitVar, dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Collection, Generic, Mapping, TypeVar

import numpy as np

from harness.core import case_arrays, schema_check, schemas
from harness.core.array_draws import SHARED_MIN_BYTES, draw_arrays, load_shared, shared_folder, store_shared
from harness.core.case_arrays import array_layout, check_case_arrays, lstm_weight_shapes
from harness.core.case_limits import check_case_size
from harness.core.errors import CaseError, InvalidArgument, one_line
from harness.core.input_parsing import InputProblem, parse_json
from harness.core.kept import ArrayCache, Kept
from harness.core.model_cases import check_model_spec
from harness.core.vocabulary import FAMILIES

T = TypeVar("T")

__all__ = ["Case", "ContentMemo", "FAMILIES", "FORMAT_VERSION", "build_arrays", "build_seconds",
           "lstm_weight_shapes", "encode_array", "decode_array"]

FORMAT_VERSION = 1
# The vocabularies of a spec live with its schema (harness.core.schemas); these names are kept for callers.
ID_DTYPES = schemas.ID_DTYPES
FLOAT_DTYPES = schemas.FLOAT_DTYPES
ID_KINDS = schemas.ID_KINDS
GRAD_KINDS = schemas.GRAD_KINDS
#: Which outputs of an LSTM or pipeline case receive an upstream gradient (``spec["grad_outputs"]``), as a
#: user's loss leaves them: every one; the final state only (``hy``; ``cy``); the sequence outputs only; the
#: first half of the sequences' outputs (none for the others); ``hy`` and that half. The others get ``None``.
GRAD_OUTPUTS = schemas.GRAD_OUTPUTS
#: How LSTM weights are drawn (``spec["weight_kind"]``): ``lecun`` (the default: N(0, 1/fan_in) per matrix, as
#: Chainer's NStepLSTM initializes them) or ``chaotic`` (N(0, 0.25) whatever the width: a network that
#: amplifies its rounding errors, for stress). ``w_scale`` multiplies either.
WEIGHT_KINDS = schemas.WEIGHT_KINDS


def receives_gradient(spec: Mapping[str, Any], output: str, n_sequences: int) -> bool:
    """Whether ``output`` (``hy``, ``cy`` or ``ys.{i}``) of a case receives an upstream gradient.

    >>> [receives_gradient({"grad_outputs": "hy_ys_some"}, o, 4) for o in ("hy", "cy", "ys.0", "ys.1", "ys.2")]
    [True, False, True, True, False]
    """
    kind = spec.get("grad_outputs", "all")
    if kind == "all":
        return True
    if output in ("hy", "cy"):
        return output in kind.split("_")
    i = int(output.split(".")[1])
    if kind == "ys":
        return True
    return kind.endswith("ys_some") and i < max(1, n_sequences // 2)


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def encode_array(a: np.ndarray) -> dict[str, Any]:
    """An explicit array as JSON: integers as a list, floats as their raw bits (NaN payloads survive)."""
    a = np.ascontiguousarray(a)
    out: dict[str, Any] = {"dtype": a.dtype.name, "shape": list(a.shape)}
    if a.dtype.kind in "iub":
        out["data"] = a.ravel().tolist()
    else:
        out["bits"] = base64.b64encode(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()).decode()
    return out


def decode_array(spec: Mapping[str, Any]) -> np.ndarray:
    """Inverse of :func:`encode_array` (:func:`harness.core.case_arrays.decode_array`, as a :class:`CaseError`)."""
    problem = schema_check.check(_thaw(spec), schemas.CASE["properties"]["arrays"]["additionalProperties"])
    if problem is not None:
        raise CaseError(f"explicit array: {problem}")
    try:
        return case_arrays.decode_array("array", spec)
    except InvalidArgument as exc:
        raise CaseError(str(exc)) from exc


@dataclass(frozen=True)
class Case:
    """One portable test case. ``spec`` and ``arrays`` are read-only mappings."""

    family: str
    seed: int
    spec: Mapping[str, Any]
    arrays: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: What a user should expect from a bad input: None for a valid case, else e.g.
    #: {"kind": "raises", "errors": ["ValueError"], "why": "..."}. Part of the id.
    expect: Mapping[str, Any] | None = None
    #: Free-form tags (the kinds a strategy chose); informative, part of the id.
    tags: tuple[str, ...] = ()
    #: False only where the schema was checked already (:meth:`from_own_json`); the case's own rules still are.
    schema: InitVar[bool] = True

    def __post_init__(self, schema: bool) -> None:
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise InvalidArgument(f"seed={self.seed!r} must be a non-negative int")
        object.__setattr__(self, "spec", _freeze(dict(self.spec)))
        object.__setattr__(self, "arrays", _freeze(dict(self.arrays)))
        object.__setattr__(self, "expect", None if self.expect is None else _freeze(dict(self.expect)))
        object.__setattr__(self, "tags", tuple(sorted(set(self.tags))))
        _validate(self, schema)

    # ---- serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The canonical plain-data form (sorted keys; lists, not tuples)."""
        d: dict[str, Any] = {"version": FORMAT_VERSION, "family": self.family, "seed": self.seed,
                             "spec": _thaw(self.spec)}
        if self.arrays:
            d["arrays"] = _thaw(self.arrays)
        if self.expect is not None:
            d["expect"] = _thaw(self.expect)
        if self.tags:
            d["tags"] = list(self.tags)
        return d

    def to_json(self) -> str:
        """Canonical JSON: the same case always gives the same bytes."""
        return self._json

    @functools.cached_property
    def _json(self) -> str:
        # A case is immutable (frozen, its mappings read-only): its JSON and id are computed once. A campaign
        # asks for them once per task and run; building them each time was a tenth of the parent's work.
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, schema: bool = True) -> "Case":
        """Rebuild a case from :meth:`to_dict` output, validated whole against
        :data:`harness.core.schemas.CASE` first (unless ``schema`` is false: :meth:`from_own_json`); bad data
        raises a one-line :class:`CaseError` naming the JSON path of the first bad field and its value."""
        if not isinstance(d, Mapping):
            raise CaseError(f"a case must be a JSON object, got {type(d).__name__}")
        problem = schema_check.check(_thaw(d), schemas.CASE) if schema else None
        if problem is not None:
            raise CaseError(problem)
        try:
            # The schema was checked above on the data itself (or, for from_own_json, when the case was built);
            # the canonical form holds the same fields, so the constructor checks only the case's own rules.
            case = cls(family=d["family"], seed=d["seed"], spec=d["spec"], arrays=d.get("arrays", {}),
                       expect=d.get("expect"), tags=tuple(d.get("tags", ())), schema=False)
        except InvalidArgument as exc:  # one error type for "this case text is bad"
            raise CaseError(str(exc)) from exc
        if "id" in d and d["id"] != case.id:
            raise CaseError(f"case id={d['id']!r} does not match its content (computed {case.id!r})")
        return case

    @classmethod
    def from_json(cls, text: str | bytes) -> "Case":
        """Parse one case from JSON text (or UTF-8 bytes); every bad input raises a one-line :class:`CaseError`
        (nesting and number sizes are limited before parsing finishes:
        :func:`harness.core.input_parsing.parse_json`)."""
        try:
            data = parse_json(text, "case text")
        except InputProblem as exc:
            raise CaseError(str(exc)) from None
        return cls.from_dict(data)

    @classmethod
    def from_own_json(cls, text: str) -> "Case":
        """A case from the JSON :meth:`to_json` wrote in this harness's own process (a campaign sending a task to
        its worker): the case was checked against :data:`harness.core.schemas.CASE` when it was built, so the
        schema is not checked again (it is half of a parse, and a fresh worker parses every case it runs); the
        case's own invariants still are. Text from a file or a user goes through :meth:`from_json`."""
        return cls.from_dict(json.loads(text), schema=False)

    @functools.cached_property
    def id(self) -> str:
        """A stable short id: the first 12 hex digits of SHA-256 of the canonical JSON."""
        return self._sha256[:12]

    @functools.cached_property
    def _sha256(self) -> str:
        """SHA-256 of the canonical JSON, all 64 hex digits: what identifies the case's content exactly."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @property
    def bad(self) -> bool:
        """True for a bad-input case (one that carries an expectation)."""
        return self.expect is not None

    def size(self) -> int:
        """A rough count of elements, for plots of error against input size."""
        s = self.spec
        if self.family == "embed":
            return int(np.prod(s["ids_shape"])) * int(s["width"])
        if self.family == "model":  # the elements one step reads: its batch, its widths, its layers
            return int(s["batch"]) * int(s["max_len"]) * int(s["width"]) * int(s["n_layers"])
        lengths = s["lengths"]
        width = s.get("in_size", s.get("width", 1))
        return int(sum(lengths)) * int(width) * int(s["n_layers"])

    def __repr__(self) -> str:
        return f"Case({self.family}, id={self.id}, seed={self.seed})"


# ---- validation ----------------------------------------------------------------------------
def _validate(case: "Case", schema: bool = True) -> None:
    """The whole case checked against :data:`harness.core.schemas.CASE` (its spec against the family's keys in
    :data:`harness.core.schemas.SPEC_FIELDS`: every key known, typed and in range; unless ``schema`` is false),
    then the rules that depend on whether the case is a bad input."""
    problem = _schema_problem(case) if schema else None
    if problem is not None:
        raise InvalidArgument(problem)
    _validate_spec(case.family, case.spec, bad=case.expect is not None)
    # the arrays and the fields that must agree with each other, decoded once here (build_arrays copies them)
    decoded = check_case_arrays(case.family, case.spec, case.arrays, case.expect is not None)
    object.__setattr__(case, "_decoded", decoded)


class ContentMemo(Generic[T]):
    """What a function of a case's content alone gave, kept per process by the SHA-256 of the case's canonical
    JSON (equal text, equal value), at most ``kept`` values, the least recently used dropped first
    (:class:`~harness.core.kept.Kept`, each value costing 1). A case with no JSON text (a NaN in a spec being
    refused) is computed each time."""

    def __init__(self, kept: int = 4096) -> None:
        self.kept = kept
        self._values: Kept[str, T] = Kept(lambda value: 1)

    def get(self, case: "Case", compute: Callable[["Case"], T]) -> T:
        """``compute(case)``, or the value it gave for a case of the same content."""
        try:
            key = case._sha256
        except (TypeError, ValueError):
            return compute(case)
        got = self._values.recent(key, _UNKEPT)
        if got is not _UNKEPT:
            return got  # type: ignore[no-any-return]
        value = compute(case)
        self._values.add(key, value, self.kept)
        return value


_UNKEPT = object()  # what Kept.recent answers for a content not kept (None is a value a memo keeps)


#: The schema's verdict on each case content: a process builds the same cases again and again (every default
#: corpus builds the corner cases, whose lengths run to a thousand items that jsonschema checks one by one).
_SCHEMA_VERDICTS: ContentMemo[str | None] = ContentMemo()


def _schema_problem(case: "Case") -> str | None:
    """The first problem :data:`harness.core.schemas.CASE` finds in the case's canonical form, or None."""
    return _SCHEMA_VERDICTS.get(case, lambda c: schema_check.check(c.to_dict(), schemas.CASE))


def _validate_spec(family: str, spec: Mapping[str, Any], bad: bool) -> None:
    """The spec rules a schema does not say: a valid case's shapes and lengths."""
    if family == "embed" and not bad and not 1 <= len(spec["ids_shape"]) <= 3:
        raise InvalidArgument(f"$.spec.ids_shape={list(spec['ids_shape'])!r} must have 1 to 3 dimensions "
                              f"(more only in a bad-input case)")
    if family == "model":
        check_model_spec(spec)
    if family in ("lstm", "pipeline") and not bad and min(spec["lengths"]) < 1:
        raise InvalidArgument(f"$.spec.lengths={list(spec['lengths'])!r} must hold ints >= 1 (0 only in a "
                              f"bad-input case)")


# ---- rebuilding arrays ----------------------------------------------------------------------
class _BuiltArrays(ArrayCache[str]):
    """Built arrays by case id (:class:`~harness.core.kept.ArrayCache`). The shared draws of a case
    (mapped, :func:`harness.core.array_draws.load_shared`) are not held: only their names, in ``mapped``."""

    def __init__(self) -> None:
        super().__init__()
        self.mapped: dict[str, frozenset[str]] = {}

    def add(self, key: str, arrays: dict[str, np.ndarray], limit: int,
            mapped: frozenset[str] = frozenset()) -> None:
        """Keep ``arrays`` (and the names of the case's mapped draws) as the newest entry."""
        with self._lock:
            super().add(key, arrays, limit)
            self.mapped[key] = mapped

    def entry(self, key: str) -> tuple[dict[str, np.ndarray], frozenset[str]] | None:
        """The held arrays of ``key`` and the names of its mapped draws, now the most recently used; None where
        there are none."""
        with self._lock:
            got = self.recent(key)
            return None if got is None else (got, self.mapped.get(key, frozenset()))

    def _gone(self, key: str) -> None:
        self.mapped.pop(key, None)


#: Built arrays kept per process, most recently used last, up to :data:`BUILT_BYTES` (the newest always).
_BUILT = _BuiltArrays()

#: Bytes of built arrays a process keeps. A campaign runs a case once per subject, subject after subject, so a
#: worker meets each case again only after every other case of its corpus: the whole default corpus is about 80
#: MiB (two hidden-1,024 corner cases hold 16 MiB of weights each), and with eight cases kept (the old bound)
#: nearly every task rebuilt its arrays in each worker.
BUILT_BYTES = 128 << 20


#: Wall seconds this process has spent in :func:`build_arrays`, every call together (one cell: a run reads it
#: before and after, :func:`harness.subjects.base.execute`).
_BUILD_SECONDS = [0.0]


def build_seconds() -> float:
    """Wall seconds this process has spent building case arrays (:func:`build_arrays`), all calls together."""
    return _BUILD_SECONDS[0]


def build_arrays(case: Case, max_bytes: int | None = None,
                 names: Collection[str] | None = None) -> dict[str, np.ndarray]:
    """Every input array of ``case``, rebuilt bit-identically on any machine (host NumPy arrays).

    Each call returns the caller's own arrays, so a subject that writes into its inputs changes nothing. Drawn
    arrays of :data:`~harness.core.array_draws.SHARED_MIN_BYTES` or more are drawn once per harness process
    and shared by its workers: each call maps them copy-on-write (:func:`harness.core.array_draws.load_shared`:
    no copy, and a write stays the writer's). The smaller arrays of recent cases are kept (up to
    :data:`BUILT_BYTES`) and copied, so the runs of a case pay for their draws once per process. A case whose
    estimate (:func:`harness.core.case_limits.estimate_case_bytes`) exceeds ``max_bytes`` (default
    :func:`harness.core.case_limits.max_case_bytes_default`) is refused with a :class:`CaseError` before
    anything is allocated.
    ``names`` (optional) asks for those arrays only: only they are drawn (the judge needs the ids and the
    upstream gradient of a case, not its weights). Such a partial build is not kept.
    """
    t0 = time.perf_counter()
    try:
        return _build_or_copy(case, max_bytes, names)
    finally:
        _BUILD_SECONDS[0] += time.perf_counter() - t0


def _build_or_copy(case: Case, max_bytes: int | None, names: Collection[str] | None) -> dict[str, np.ndarray]:
    key = case.id
    kept = _BUILT.entry(key)
    if kept is None:
        check_case_size(case, max_bytes)
        if names is not None:
            return _build_arrays(case, frozenset(names))
        out = _build_arrays(case)
        mapped = _shared_names(case)
        _BUILT.add(key, {k: v.copy() for k, v in out.items() if k not in mapped}, BUILT_BYTES, mapped)
        return out
    built, mapped = kept
    out = {k: v.copy() for k, v in built.items() if names is None or k in names}
    again = frozenset(k for k in mapped if names is None or k in names)
    if again:
        out.update(_drawn_part(case, again))
    return out


def _shared_names(case: Case, names: frozenset[str] | None = None) -> frozenset[str]:
    """The drawn arrays of ``case`` (of ``names``) that are shared: big enough, and not given in the case."""
    if shared_folder() is None:
        return frozenset()
    try:
        layout = array_layout(case.family, case.spec)
    except (KeyError, TypeError, ValueError):
        return frozenset()
    decoded = case._decoded  # type: ignore[attr-defined]  # set by _validate
    return frozenset(n for n, (shape, dt) in layout.items()
                     if n not in decoded and (names is None or n in names)
                     and int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize >= SHARED_MIN_BYTES)


def _draw(case: Case, names: frozenset[str] | None) -> dict[str, np.ndarray]:
    """The drawn arrays of ``case`` (of ``names``): the shared ones mapped where stored, the rest drawn here (and
    the shared ones among them stored for the other processes)."""
    folder = shared_folder()
    shared = _shared_names(case, names)
    out: dict[str, np.ndarray] = {}
    if folder is not None and shared:
        layout = array_layout(case.family, case.spec)
        for n in sorted(shared):
            a = load_shared(folder, case.id, n, *layout[n])
            if a is not None:
                out[n] = a
        todo = (frozenset(layout) if names is None else names) - frozenset(out)
        drawn = _draw_apart(case, todo, shared)
        for n in sorted(shared - frozenset(out)):
            a = drawn.get(n)
            if a is not None and (a.shape, a.dtype.name) == layout[n]:
                store_shared(folder, case.id, n, a)
        out.update(drawn)
        return out
    return draw_arrays(case.family, case.seed, case.spec, names)


def _draw_apart(case: Case, names: frozenset[str], big: frozenset[str]) -> dict[str, np.ndarray]:
    """``names`` drawn, each of the ``big`` ones in a thread of its own (each array has its own generator, and
    NumPy's draws and casts leave the interpreter's lock: an embedding's two 260 MB tables take one table's
    time where two cores are free)."""
    apart = sorted(names & big)
    if len(apart) < 2 or (os.cpu_count() or 1) < 2:
        return draw_arrays(case.family, case.seed, case.spec, names)
    with ThreadPoolExecutor(min(len(apart), os.cpu_count() or 1)) as pool:
        parts = pool.map(lambda n: draw_arrays(case.family, case.seed, case.spec, frozenset([n])), apart)
        out = draw_arrays(case.family, case.seed, case.spec, names - frozenset(apart))
        for part in parts:
            out.update(part)
    return out


def _drawn_part(case: Case, names: frozenset[str]) -> dict[str, np.ndarray]:
    """``names`` (drawn arrays of ``case``) built again, with their injections."""
    try:
        out = _draw(case, names)
    except (KeyError, TypeError, ValueError, OverflowError, IndexError, MemoryError) as exc:
        raise CaseError(f"case {case.id}: arrays cannot be rebuilt: {type(exc).__name__}: {exc}") from exc
    _inject_or_raise(case, out, names)
    return out


def _build_arrays(case: Case, names: frozenset[str] | None = None) -> dict[str, np.ndarray]:
    try:
        out = _draw(case, names)
    except (KeyError, TypeError, ValueError, OverflowError, IndexError, MemoryError) as exc:
        raise CaseError(f"case {case.id}: arrays cannot be rebuilt: {type(exc).__name__}: {exc}") from exc
    for name, a in case._decoded.items():  # type: ignore[attr-defined]  # set by _validate
        out[name] = a.copy()
    if names is not None:
        out = {k: v for k, v in out.items() if k in names}
    _inject_or_raise(case, out, names)
    return out


def _inject_or_raise(case: Case, out: dict[str, np.ndarray], names: frozenset[str] | None) -> None:
    try:
        _inject(case, out, names)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise CaseError(f"case {case.id}: inject cannot be applied: {type(exc).__name__}: {one_line(exc)}") from exc


def _inject(case: Case, out: dict[str, np.ndarray], names: frozenset[str] | None = None) -> None:
    s = case.spec
    for inj in s.get("inject", ()):  # bad inputs: NaN / Inf planted at given flat positions (names checked
        # when the case was made: harness.core.case_arrays)
        if names is not None and inj["array"] not in names:
            continue  # an array not asked for (not built)
        arr = out[inj["array"]]
        if arr.size:
            arr.ravel()[int(inj["index"]) % arr.size] = float(inj["value"])
