"""`Case`: a small, frozen, portable spec from which every array of a run is rebuilt bit-identically.

A case is plain JSON: its family, a seed, a spec (shapes, dtypes, ignore label, lengths, layers)
and, where Hypothesis chose them, explicit small arrays. Every other array comes from
``numpy.random.Generator(PCG64(SeedSequence([seed, crc32(name)])))``: one stream per array name,
so adding or making explicit one array never changes the bits of another, and the global NumPy
random state is never touched. Nothing here imports Chainer or CuPy.

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
import zlib
from collections import OrderedDict
from dataclasses import InitVar, dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import numpy as np

from harness.core import case_arrays, schema_check, schemas
from harness.core.case_arrays import check_case_arrays, lstm_weight_shapes
from harness.core.errors import CaseError, HarnessError, InvalidArgument
from harness.core.input_parsing import InputProblem, parse_json
from harness.core.vocabulary import FAMILIES

__all__ = [
    "Case", "FAMILIES", "FORMAT_VERSION", "build_arrays", "array_rng", "lstm_weight_shapes",
    "load_corpus", "write_corpus", "encode_array", "decode_array", "corpus_digest",
    "estimate_case_bytes", "max_case_bytes_default", "check_case_size", "check_case_family",
    "load_case_file", "MAX_CASE_BYTES_ENV",
]

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
        (nesting and number sizes are limited before parsing finishes: :func:`harness.core.input_parsing.parse_json`)."""
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
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:12]

    @property
    def bad(self) -> bool:
        """True for a bad-input case (one that carries an expectation)."""
        return self.expect is not None

    def size(self) -> int:
        """A rough count of elements, for plots of error against input size."""
        s = self.spec
        if self.family == "embed":
            return int(np.prod(s["ids_shape"])) * int(s["width"])
        lengths = s["lengths"]
        width = s.get("in_size", s.get("width", 1))
        return int(sum(lengths)) * int(width) * int(s["n_layers"])

    def __repr__(self) -> str:
        return f"Case({self.family}, id={self.id}, seed={self.seed})"


# ---- validation ----------------------------------------------------------------------------
def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def _validate(case: "Case", schema: bool = True) -> None:
    """The whole case checked against :data:`harness.core.schemas.CASE` (its spec against the family's keys in
    :data:`harness.core.schemas.SPEC_FIELDS`: every key known, typed and in range; unless ``schema`` is false),
    then the rules that depend on whether the case is a bad input."""
    problem = schema_check.check(case.to_dict(), schemas.CASE) if schema else None
    if problem is not None:
        raise InvalidArgument(problem)
    _validate_spec(case.family, case.spec, bad=case.expect is not None)
    # the arrays and the fields that must agree with each other, decoded once here (build_arrays copies them)
    object.__setattr__(case, "_decoded", check_case_arrays(case.family, case.spec, case.arrays, case.expect is not None))


def _validate_spec(family: str, spec: Mapping[str, Any], bad: bool) -> None:
    """The spec rules a schema does not say: a valid case's shapes and lengths."""
    if family == "embed" and not bad and not 1 <= len(spec["ids_shape"]) <= 3:
        raise InvalidArgument(f"$.spec.ids_shape={list(spec['ids_shape'])!r} must have 1 to 3 dimensions "
                              f"(more only in a bad-input case)")
    if family in ("lstm", "pipeline") and not bad and min(spec["lengths"]) < 1:
        raise InvalidArgument(f"$.spec.lengths={list(spec['lengths'])!r} must hold ints >= 1 (0 only in a "
                              f"bad-input case)")


# ---- rebuilding arrays ----------------------------------------------------------------------
def array_rng(seed: int, name: str) -> np.random.Generator:
    """The private generator of one named array of a case."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(name.encode())])))


def _grad(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, kind: str) -> np.ndarray:
    if kind == "ones":
        return np.ones(shape, dtype=dtype)
    if kind == "zeros":
        return np.zeros(shape, dtype=dtype)
    g = rng.standard_normal(shape)
    if kind == "large":
        # Large but finite in every dtype: float16 tops out at 65504.
        g = g * (1e3 if dtype == "float16" else 1e6)
    elif kind == "cancel":
        # Pairs of nearly opposite values make sums cancel, so accumulation order shows in the bits.
        big = np.where(rng.random(shape) < 0.5, -1.0, 1.0) * (1e2 if dtype == "float16" else 1e4)
        g = big + g * 1e-2
    out = g.astype(dtype)
    if kind == "random" and out.size:
        out.ravel()[rng.random(out.size) < 0.05] = 0  # exact zeros too
    return out


def _ids(spec: Mapping[str, Any], rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    vocab = int(spec["vocab"])
    kind = spec.get("id_kind", "uniform")
    n = int(np.prod(shape)) if shape else 1
    if kind == "all_equal":
        flat = np.full(n, int(rng.integers(0, vocab)), dtype=np.int64)
    elif kind == "collision":
        distinct = max(1, min(int(spec.get("distinct", 2)), vocab))
        pool = rng.choice(vocab, size=distinct, replace=False)
        flat = pool[rng.integers(0, distinct, size=n)]
    else:
        flat = rng.integers(0, vocab, size=n)
        if kind == "sorted":
            flat = np.sort(flat)
    ids = flat.reshape(shape)
    il = spec.get("ignore_label")
    frac = float(spec.get("ignore_frac", 0.0))
    if il is not None and frac > 0 and ids.size:
        mask = rng.random(shape) < frac
        if frac >= 1.0:
            mask[...] = True
        ids = np.where(mask, il, ids)
    return ids


def _padded(spec: Mapping[str, Any], ids: np.ndarray, lengths: list[int]) -> np.ndarray:
    """``(batch, steps)`` ids with row ``i`` cut to ``lengths[i]`` and padded with ``pad_id`` (else the ignore
    label), its first id ``sos_id`` where the spec gives one (ESPnet's decoder input: sos y_1 .. y_n eos eos)."""
    pad = spec.get("pad_id", spec.get("ignore_label"))
    if pad is None:
        raise CaseError(f"$.spec.row_lengths={lengths!r} pads its rows: give pad_id or ignore_label")
    keep = np.arange(ids.shape[1])[None, :] < np.asarray(lengths, dtype=np.int64)[:, None]
    out = np.where(keep, ids, int(pad))
    if spec.get("sos_id") is not None and out.shape[1]:
        out[:, 0] = np.where(keep[:, 0], int(spec["sos_id"]), out[:, 0])
    return out


def _as_id_dtype(ids: np.ndarray, dtype: str) -> np.ndarray:
    # Deliberately a plain cast: an out-of-range value wraps, which is what a user's cast would do.
    return ids.astype(dtype)


def _lstm_arrays(spec: Mapping[str, Any], seed: int, in_size: int, lengths: list[int],
                 out: dict[str, np.ndarray], with_xs: bool) -> None:
    dtype = spec.get("dtype", "float32")
    hidden = int(spec["hidden"])
    n_layers = int(spec["n_layers"])
    bi = bool(spec.get("bidirectional", False))
    dirs = 2 if bi else 1
    batch = len(lengths)
    scale = float(spec.get("w_scale", 1.0))
    kind = spec.get("weight_kind", "lecun")
    widths = spec.get("xs_widths")  # bad inputs: per-sequence widths that disagree
    if with_xs:
        for i, n in enumerate(lengths):
            w = int(widths[i]) if widths is not None else in_size
            out[f"xs.{i}"] = array_rng(seed, f"xs.{i}").standard_normal((n, w)).astype(dtype)
    for name, shape in lstm_weight_shapes(n_layers, in_size, hidden, bi):
        # lecun: N(0, 1/fan_in), Chainer's own default (LeCunNormal) for NStepLSTM, what a trained model is
        # near; chaotic: N(0, 0.25) whatever the width, a network that amplifies (kept for stress). Biases are
        # drawn at the same scale as their matrices' rows.
        k, j = (int(v) for v in name.split(".")[1:])
        fan_in = (in_size if k // dirs == 0 else hidden * dirs) if j < 4 else hidden
        base = 0.5 if kind == "chaotic" else 1.0 / np.sqrt(max(1, fan_in))
        out[name] = (array_rng(seed, name).standard_normal(shape) * (scale * base)).astype(dtype)
    if spec.get("initial_state", "none") == "given":
        for name in ("hx", "cx"):
            out[name] = array_rng(seed, name).standard_normal((n_layers * dirs, batch, hidden)).astype(dtype)
    kind = spec.get("gy_kind", "random")
    for i, n in enumerate(lengths):
        out[f"gys.{i}"] = _grad(array_rng(seed, f"gys.{i}"), (n, hidden * dirs), dtype, kind)
    for name in ("ghy", "gcy"):
        out[name] = _grad(array_rng(seed, name), (n_layers * dirs, batch, hidden), dtype, kind)


# ---- limits ------------------------------------------------------------------------------------
#: Environment variable that overrides :func:`max_case_bytes_default` (bytes, an int).
MAX_CASE_BYTES_ENV = "HARNESS_MAX_CASE_BYTES"


def _itemsize(dtype: Any, default: int = 8) -> int:
    try:
        return max(int(np.dtype(dtype).itemsize), 1)
    except TypeError:
        return default


def _prod(shape: Iterable[int]) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    return n


def estimate_case_bytes(case: Case) -> int:
    """The bytes of the case's input arrays, from its spec's shapes alone (nothing is allocated).

    A lower bound on what a run needs (subjects also hold outputs and gradients, about as much
    again); integer arithmetic, so a ``[30000, 30000]`` shape costs nothing to estimate.
    """
    s = case.spec
    total = 0
    if case.family == "embed":
        shape = [int(n) for n in s["ids_shape"]]
        vocab, width = int(s["vocab"]), int(s["width"])
        wsize = _itemsize(s.get("w_dtype", "float32"))
        n_ids = _prod(shape)
        # Ids are drawn as int64, then cast; W, gy and ggW in the weight dtype.
        total += n_ids * (8 + _itemsize(s.get("id_dtype", "int32")))
        total += _prod(s.get("w_shape", (vocab, width))) * wsize
        total += n_ids * width * (8 + wsize)  # gy, drawn as float64 then cast
        total += vocab * width * (8 + wsize)  # ggW
    else:
        lengths = [int(n) for n in s["lengths"]]
        hidden, n_layers = int(s["hidden"]), int(s["n_layers"])
        in_size = int(s["in_size"]) if case.family == "lstm" else int(s["width"])
        dirs = 2 if s.get("bidirectional", False) else 1
        size = _itemsize(s.get("dtype", "float32"))
        batch = len(lengths)
        steps = sum(lengths)
        if case.family == "lstm":
            widths = s.get("xs_widths")
            total += sum(n * (int(widths[i]) if widths is not None and i < len(widths) else in_size)
                         for i, n in enumerate(lengths)) * (8 + size)
        else:
            vocab = int(s["vocab"])
            total += batch * max(lengths + [0]) * 16 + vocab * in_size * (8 + size)
        total += sum(_prod(shape) for _, shape in lstm_weight_shapes(n_layers, in_size, hidden, dirs == 2)) * (8 + size)
        total += 4 * n_layers * dirs * batch * hidden * (8 + size)  # hx, cx, ghy, gcy
        total += steps * hidden * dirs * (8 + size)  # gys
    for enc in case.arrays.values():
        try:
            total += _prod(enc.get("shape", ())) * _itemsize(enc.get("dtype"))
        except (TypeError, ValueError):
            pass
    return int(total)


def max_case_bytes_default() -> int:
    """The default per-case limit: ``$HARNESS_MAX_CASE_BYTES``, else half the machine's RAM (what one worker may
    use). It bounds a run's estimated peak (:func:`harness.core.cost.over_limit`: inputs, the subject's or the
    oracle's working set, the process), checked before any work; building the arrays checks their bytes
    against it again.
    """
    env = os.environ.get(MAX_CASE_BYTES_ENV, "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            raise InvalidArgument(f"{MAX_CASE_BYTES_ENV}={env!r} must be a positive int (bytes)") from None
        if value <= 0:
            raise InvalidArgument(f"{MAX_CASE_BYTES_ENV}={env!r} must be a positive int (bytes)")
        return value
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # not POSIX: assume 16 GiB, so 8 GiB
        ram = 16 << 30
    return max(int(ram) // 2, 1 << 20)


def check_case_size(case: Case, limit: int | None = None) -> int:
    """Raise a one-line :class:`CaseError` when ``case`` needs more than ``limit`` bytes; return the estimate.

    ``limit`` None means :func:`max_case_bytes_default`. Call before building arrays or starting work.
    """
    limit = max_case_bytes_default() if limit is None else int(limit)
    try:
        est = estimate_case_bytes(case)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CaseError(f"case {case.id}: size cannot be estimated: {type(exc).__name__}: {_one_line(exc)}") from exc
    if est > limit:
        raise CaseError(f"case {case.id} needs about {est:,} bytes of inputs, over the limit of {limit:,} bytes "
                        f"(max-case-bytes; set {MAX_CASE_BYTES_ENV} or --max-case-bytes to raise it)")
    return est


def check_case_family(case: Case, family: str, subject: str) -> None:
    """Refuse, in one line, to run ``case`` on subject ``subject`` of another ``family``."""
    if case.family != family:
        raise CaseError(f"case {case.id} is a {case.family} case; subject={subject!r} takes {family} cases")


class _BuiltArrays(OrderedDict[str, "dict[str, np.ndarray]"]):
    """Built arrays by case id, most recently used last, with their bytes summed as entries come and go (a sum
    over every entry at each build would grow with the square of a corpus)."""

    def __init__(self) -> None:
        super().__init__()
        self.held = 0

    def add(self, key: str, arrays: dict[str, np.ndarray], limit: int) -> None:
        """Keep ``arrays`` as the newest entry; drop the oldest while more than ``limit`` bytes are held (the
        newest is always kept)."""
        self[key] = arrays
        self.held += sum(a.nbytes for a in arrays.values())
        while len(self) > 1 and self.held > limit:
            self.held -= sum(a.nbytes for a in self.popitem(last=False)[1].values())


#: Built arrays kept per process, most recently used last, up to :data:`BUILT_BYTES` (the newest always).
_BUILT = _BuiltArrays()

#: Bytes of built arrays a process keeps. A campaign runs a case once per subject, subject after subject, so a
#: worker meets each case again only after every other case of its corpus: the whole default corpus is a few
#: MiB, and with eight cases kept (the old bound) nearly every task rebuilt its arrays in each worker.
BUILT_BYTES = 64 << 20


def build_arrays(case: Case, max_bytes: int | None = None) -> dict[str, np.ndarray]:
    """Every input array of ``case``, rebuilt bit-identically on any machine (host NumPy arrays).

    The arrays of recent cases are kept (up to :data:`BUILT_BYTES`), so the runs of a case pay for the random
    draws once per process; each call returns fresh copies, so a subject that writes into its inputs changes
    nothing. A case whose estimate (:func:`estimate_case_bytes`) exceeds ``max_bytes`` (default
    :func:`max_case_bytes_default`) is refused with a :class:`CaseError` before anything is allocated.
    """
    key = case.id
    built = _BUILT.get(key)
    if built is None:
        check_case_size(case, max_bytes)
        built = _build_arrays(case)
        _BUILT.add(key, built, BUILT_BYTES)
    else:
        _BUILT.move_to_end(key)
    return {k: v.copy() for k, v in built.items()}


def _build_arrays(case: Case) -> dict[str, np.ndarray]:
    s = case.spec
    seed = case.seed
    out: dict[str, np.ndarray] = {}
    try:
        if case.family == "embed":
            shape = tuple(int(n) for n in s["ids_shape"])
            vocab, width = int(s["vocab"]), int(s["width"])
            wdt = s.get("w_dtype", "float32")
            w_shape = tuple(s.get("w_shape", (vocab, width)))
            ids = _ids(s, array_rng(seed, "x"), shape)
            if "row_lengths" in s and ids.ndim == 2:  # a padded batch, as a recipe's decoder or LM feeds it
                rows = [int(n) for n in s["row_lengths"]][:shape[0]]
                ids = _padded(s, ids, rows + [shape[1]] * (shape[0] - len(rows)))
            out["x"] = _as_id_dtype(ids, s.get("id_dtype", "int32"))
            out["W"] = (array_rng(seed, "W").standard_normal(w_shape) * float(s.get("w_scale", 1.0))).astype(wdt)
            out["gy"] = _grad(array_rng(seed, "gy"), shape + (width,), wdt, s.get("gy_kind", "random"))
            out["ggW"] = array_rng(seed, "ggW").standard_normal((vocab, width)).astype(wdt)
        elif case.family == "lstm":
            _lstm_arrays(s, seed, int(s["in_size"]), [int(n) for n in s["lengths"]], out, with_xs=True)
        else:  # pipeline
            lengths = [int(n) for n in s["lengths"]]
            vocab, width = int(s["vocab"]), int(s["width"])
            il = s.get("ignore_label")
            ids = _ids({**s, "ignore_label": None}, array_rng(seed, "x"), (len(lengths), max(lengths)))
            ids = _padded({**s, "pad_id": s.get("pad_id", -1 if il is None else il)}, ids, lengths)
            out["x"] = ids.astype(s.get("id_dtype", "int32"))
            out["W"] = (array_rng(seed, "W").standard_normal((vocab, width))).astype(s.get("dtype", "float32"))
            _lstm_arrays(s, seed, width, lengths, out, with_xs=False)
    except (KeyError, TypeError, ValueError, OverflowError, IndexError, MemoryError) as exc:
        raise CaseError(f"case {case.id}: arrays cannot be rebuilt: {type(exc).__name__}: {exc}") from exc
    for name, a in case._decoded.items():  # type: ignore[attr-defined]  # set by _validate
        out[name] = a.copy()
    try:
        _inject(case, out)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise CaseError(f"case {case.id}: inject cannot be applied: {type(exc).__name__}: {_one_line(exc)}") from exc
    return out


def _inject(case: Case, out: dict[str, np.ndarray]) -> None:
    s = case.spec
    for inj in s.get("inject", ()):  # bad inputs: NaN / Inf planted at given flat positions (names checked
        # when the case was made: harness.core.case_arrays)
        arr = out[inj["array"]]
        if arr.size:
            arr.ravel()[int(inj["index"]) % arr.size] = float(inj["value"])


# ---- corpora ----------------------------------------------------------------------------------
def write_corpus(cases: Iterable[Case], path: str) -> int:
    """Write cases as JSON lines (canonical bytes; same cases, same file), atomically, mode 0644.
    Returns the count."""
    from harness.core.fileio import atomic_write

    lines = [c.to_json() + "\n" for c in cases]
    atomic_write(path, "".join(lines))
    return len(lines)


def _read_bytes(path: str, what: str) -> bytes:
    if os.path.isdir(path):
        raise CaseError(f"{what}={path!r} is a directory, not a file")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise CaseError(f"{what}={path!r} cannot be read: {exc.strerror or exc}") from exc


def load_corpus(path: str) -> list[Case]:
    """Read a JSON-lines corpus; a bad line (bad JSON, bad type, not UTF-8) raises :class:`CaseError` naming file:line."""
    cases: list[Case] = []
    data = _read_bytes(path, "corpus")
    for lineno, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            cases.append(Case.from_json(line))
        except HarnessError as exc:
            raise CaseError(f"{path}:{lineno}: {exc}") from exc
    return cases


def load_case_file(path: str, case_id: str | None = None) -> Case:
    """One case from a file holding one case JSON, or from a corpus (then ``case_id`` picks it).

    For ``replay``: every problem (missing, a directory, not UTF-8, bad JSON, an unknown id) is one line.
    """
    if not os.path.exists(path):
        raise CaseError(f"case file={path!r} does not exist")
    data = _read_bytes(path, "case file")
    if b"\n" in data.strip():
        cases = load_corpus(path)
        if case_id is None:
            if len(cases) == 1:
                return cases[0]
            raise CaseError(f"{path} holds {len(cases)} cases: pick one with --case-id")
        for c in cases:
            if c.id == case_id:
                return c
        raise CaseError(f"case-id={case_id!r} is not in {path}")
    try:
        case = Case.from_json(data)
    except CaseError as exc:
        raise CaseError(f"{path}:1: {exc}") from exc
    if case_id is not None and case.id != case_id:
        raise CaseError(f"case-id={case_id!r} is not in {path} (it holds {case.id})")
    return case


def corpus_digest(cases: Iterable[Case]) -> str:
    """SHA-256 of the corpus's canonical lines, in order."""
    h = hashlib.sha256()
    for c in cases:
        h.update(c.to_json().encode() + b"\n")
    return h.hexdigest()
