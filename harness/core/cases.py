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
import hashlib
import json
import zlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from harness.core.errors import CaseError, InvalidArgument

__all__ = [
    "Case", "FAMILIES", "FORMAT_VERSION", "build_arrays", "array_rng", "lstm_weight_shapes",
    "load_corpus", "write_corpus", "encode_array", "decode_array", "corpus_digest",
]

FORMAT_VERSION = 1
FAMILIES = ("embed", "lstm", "pipeline")
ID_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32")
FLOAT_DTYPES = ("float16", "float32", "float64")
ID_KINDS = ("uniform", "collision", "all_equal", "sorted", "explicit")
GRAD_KINDS = ("random", "ones", "zeros", "large", "cancel")


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
    """Inverse of :func:`encode_array`."""
    try:
        dtype = np.dtype(spec["dtype"])
        shape = tuple(int(s) for s in spec["shape"])
        if "data" in spec:
            return np.array(list(spec["data"]), dtype=dtype).reshape(shape)
        raw = base64.b64decode(spec["bits"])
        return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)
    except (KeyError, TypeError, ValueError) as exc:
        raise CaseError(f"explicit array {dict(spec)!r} cannot be decoded: {exc}") from exc


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

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise InvalidArgument(f"family={self.family!r} is not one of {', '.join(FAMILIES)}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise InvalidArgument(f"seed={self.seed!r} must be a non-negative int")
        object.__setattr__(self, "spec", _freeze(dict(self.spec)))
        object.__setattr__(self, "arrays", _freeze(dict(self.arrays)))
        object.__setattr__(self, "expect", None if self.expect is None else _freeze(dict(self.expect)))
        object.__setattr__(self, "tags", tuple(sorted(set(self.tags))))
        _validate_spec(self.family, self.spec, bad=self.expect is not None)

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
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Case":
        """Rebuild a case from :meth:`to_dict` output; bad data raises :class:`CaseError`."""
        if not isinstance(d, Mapping):
            raise CaseError(f"a case must be a JSON object, got {type(d).__name__}")
        version = d.get("version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise CaseError(f"case version={version!r} is not supported (this harness reads {FORMAT_VERSION})")
        unknown = set(d) - {"version", "family", "seed", "spec", "arrays", "expect", "tags", "id"}
        if unknown:
            raise CaseError(f"case has unknown fields: {', '.join(sorted(unknown))}")
        try:
            case = cls(family=d["family"], seed=d["seed"], spec=d["spec"], arrays=d.get("arrays", {}),
                       expect=d.get("expect"), tags=tuple(d.get("tags", ())))
        except KeyError as exc:
            raise CaseError(f"case is missing the field {exc.args[0]!r}") from exc
        if "id" in d and d["id"] != case.id:
            raise CaseError(f"case id={d['id']!r} does not match its content (computed {case.id!r})")
        return case

    @classmethod
    def from_json(cls, text: str) -> "Case":
        """Parse one case from JSON text."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CaseError(f"case JSON is not valid: {exc}") from exc
        return cls.from_dict(data)

    @property
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
def _need(spec: Mapping[str, Any], key: str, family: str) -> Any:
    if key not in spec:
        raise InvalidArgument(f"{family} case spec is missing {key!r}")
    return spec[key]


def _positive(spec: Mapping[str, Any], key: str, family: str, minimum: int = 1) -> int:
    v = _need(spec, key, family)
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise InvalidArgument(f"{key}={v!r} must be an int >= {minimum}")
    return v


def _validate_spec(family: str, spec: Mapping[str, Any], bad: bool) -> None:
    kind = spec.get("gy_kind", "random")
    if kind not in GRAD_KINDS:
        raise InvalidArgument(f"gy_kind={kind!r} is not one of {', '.join(GRAD_KINDS)}")
    if family in ("embed", "pipeline"):
        _positive(spec, "vocab", family)
        _positive(spec, "width", family)
        idk = spec.get("id_kind", "uniform")
        if idk not in ID_KINDS:
            raise InvalidArgument(f"id_kind={idk!r} is not one of {', '.join(ID_KINDS)}")
        frac = spec.get("ignore_frac", 0.0)
        if not 0.0 <= float(frac) <= 1.0:
            raise InvalidArgument(f"ignore_frac={frac!r} must be within [0, 1]")
        il = spec.get("ignore_label")
        if il is not None and (not isinstance(il, int) or isinstance(il, bool)):
            raise InvalidArgument(f"ignore_label={il!r} must be an int or None")
    if family == "embed":
        shape = _need(spec, "ids_shape", family)
        if not bad and not 1 <= len(shape) <= 3:
            raise InvalidArgument(f"ids_shape={list(shape)!r} must have 1 to 3 dimensions")
        if any((not isinstance(n, int)) or n < 0 for n in shape):
            raise InvalidArgument(f"ids_shape={list(shape)!r} must hold non-negative ints")
        dt = spec.get("id_dtype", "int32")
        if dt not in ID_DTYPES:
            raise InvalidArgument(f"id_dtype={dt!r} is not one of {', '.join(ID_DTYPES)}")
        wdt = spec.get("w_dtype", "float32")
        if wdt not in FLOAT_DTYPES:
            raise InvalidArgument(f"w_dtype={wdt!r} is not one of {', '.join(FLOAT_DTYPES)}")
    if family in ("lstm", "pipeline"):
        _positive(spec, "n_layers", family)
        _positive(spec, "hidden", family)
        if family == "lstm":
            _positive(spec, "in_size", family)
        lengths = _need(spec, "lengths", family)
        if len(lengths) < 1:
            raise InvalidArgument("lengths=[] must hold at least one sequence")
        if any((not isinstance(n, int)) or n < (0 if bad else 1) for n in lengths):
            raise InvalidArgument(f"lengths={list(lengths)!r} must hold ints >= 1")
        dt = spec.get("dtype", "float32")
        if dt not in FLOAT_DTYPES:
            raise InvalidArgument(f"dtype={dt!r} is not one of {', '.join(FLOAT_DTYPES)}")
        d = float(spec.get("dropout", 0.0))
        if not 0.0 <= d < 1.0:
            raise InvalidArgument(f"dropout={d!r} must be within [0, 1)")


# ---- rebuilding arrays ----------------------------------------------------------------------
def array_rng(seed: int, name: str) -> np.random.Generator:
    """The private generator of one named array of a case."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(name.encode())])))


def lstm_weight_shapes(n_layers: int, in_size: int, hidden: int, bidirectional: bool
                       ) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Names and shapes of Chainer's NStepLSTM weights: w0..w3 input-to-hidden, w4..w7 hidden-to-hidden."""
    dirs = 2 if bidirectional else 1
    for layer in range(n_layers):
        for d in range(dirs):
            k = layer * dirs + d
            width = in_size if layer == 0 else hidden * dirs
            for j in range(8):
                yield f"ws.{k}.{j}", (hidden, width if j < 4 else hidden)
            for j in range(8):
                yield f"bs.{k}.{j}", (hidden,)


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
    scale = float(spec.get("w_scale", 0.5))
    widths = spec.get("xs_widths")  # bad inputs: per-sequence widths that disagree
    if with_xs:
        for i, n in enumerate(lengths):
            w = int(widths[i]) if widths is not None else in_size
            out[f"xs.{i}"] = array_rng(seed, f"xs.{i}").standard_normal((n, w)).astype(dtype)
    for name, shape in lstm_weight_shapes(n_layers, in_size, hidden, bi):
        out[name] = (array_rng(seed, name).standard_normal(shape) * scale).astype(dtype)
    if spec.get("initial_state", "none") == "given":
        for name in ("hx", "cx"):
            out[name] = array_rng(seed, name).standard_normal((n_layers * dirs, batch, hidden)).astype(dtype)
    kind = spec.get("gy_kind", "random")
    for i, n in enumerate(lengths):
        out[f"gys.{i}"] = _grad(array_rng(seed, f"gys.{i}"), (n, hidden * dirs), dtype, kind)
    for name in ("ghy", "gcy"):
        out[name] = _grad(array_rng(seed, name), (n_layers * dirs, batch, hidden), dtype, kind)


_BUILT: dict[str, dict[str, np.ndarray]] = {}


def build_arrays(case: Case) -> dict[str, np.ndarray]:
    """Every input array of ``case``, rebuilt bit-identically on any machine (host NumPy arrays).

    The last few cases' arrays are kept, so the repetitions of a case pay for the random draws
    once; each call returns fresh copies, so a subject that writes into its inputs changes nothing.
    """
    key = case.id
    if key not in _BUILT:
        if len(_BUILT) >= 8:
            _BUILT.pop(next(iter(_BUILT)))
        _BUILT[key] = _build_arrays(case)
    return {k: v.copy() for k, v in _BUILT[key].items()}


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
            out["x"] = _as_id_dtype(_ids(s, array_rng(seed, "x"), shape), s.get("id_dtype", "int32"))
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
            pad = -1 if il is None else il
            steps = np.arange(max(lengths))[None, :]
            ids = np.where(steps < np.asarray(lengths)[:, None], ids, pad)
            out["x"] = ids.astype(s.get("id_dtype", "int32"))
            out["W"] = (array_rng(seed, "W").standard_normal((vocab, width))).astype(s.get("dtype", "float32"))
            _lstm_arrays(s, seed, width, lengths, out, with_xs=False)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise CaseError(f"case {case.id}: arrays cannot be rebuilt: {type(exc).__name__}: {exc}") from exc
    for name, enc in case.arrays.items():
        out[name] = decode_array(enc)
    for inj in s.get("inject", ()):  # bad inputs: NaN / Inf planted at given flat positions
        arr = out[inj["array"]]
        if arr.size:
            arr.ravel()[int(inj["index"]) % arr.size] = float(inj["value"])
    return out


# ---- corpora ----------------------------------------------------------------------------------
def write_corpus(cases: Iterable[Case], path: str) -> int:
    """Write cases as JSON lines (canonical bytes; same cases, same file), atomically, mode 0644.
    Returns the count."""
    from harness.core.fileio import atomic_write

    lines = [c.to_json() + "\n" for c in cases]
    atomic_write(path, "".join(lines))
    return len(lines)


def load_corpus(path: str) -> list[Case]:
    """Read a JSON-lines corpus; a bad line raises :class:`CaseError` naming the file and line."""
    cases: list[Case] = []
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    cases.append(Case.from_json(line))
                except (CaseError, InvalidArgument) as exc:
                    raise CaseError(f"{path}:{lineno}: {exc}") from exc
    except OSError as exc:
        raise CaseError(f"corpus={path!r} cannot be read: {exc.strerror}") from exc
    return cases


def corpus_digest(cases: Iterable[Case]) -> str:
    """SHA-256 of the corpus's canonical lines, in order."""
    h = hashlib.sha256()
    for c in cases:
        h.update(c.to_json().encode() + b"\n")
    return h.hexdigest()
