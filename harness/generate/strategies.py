"""Hypothesis strategies for :class:`~harness.core.cases.Case` objects, and deterministic corpora.

Every strategy is a plain function with keyword-only bounds that are validated *when it is
called* (before anything is drawn); a bad bound raises :class:`~harness.core.errors.InvalidArgument`
naming the argument and its value, in Hypothesis's style (``min_len=9 is larger than max_len=4``).
Nothing here imports Chainer or CuPy: a strategy only writes a spec, and
:func:`harness.core.cases.build_arrays` turns the spec into arrays.

Each parameter space is written once, as a builder over a tiny "source" of choices
(:class:`_Source`). The Hypothesis strategies run the builders on a source backed by ``draw``
(so they shrink and explore like any strategy); :func:`corpus` runs the *same* builders on a
source backed by ``random.Random``. Corpora do not go through Hypothesis because Hypothesis's
generation, even under ``@seed``, mixes in integer and float constants that it collects from
every non-site-packages module in ``sys.modules``: two fresh processes with the same imports
agree, but a corpus drawn inside pytest (where the test modules are loaded) differs from one
drawn by the command line, and editing any constant in the harness would change every corpus.

Strategies
----------
``embed_cases``, ``lstm_cases``, ``pipeline_cases``, ``cases(family, **bounds)``,
``any_case(**bounds)`` and ``bad_inputs(family=None)``. The kinds a builder chose are recorded in
``Case.tags`` (``lengths:unsorted``, ``ignore:oov``, ``ids:empty``, ``bad:float_ids`` ...) and,
inside a Hypothesis test, reported with :func:`hypothesis.event`.

Expectations of bad inputs (``Case.expect``)
--------------------------------------------
A valid case has ``expect=None``. A bad case carries a JSON object with these keys:

``kind`` (always)
    ``"raises"``: the call must raise one of ``errors``.
    ``"documented"``: the call does not raise (outside Chainer's debug mode); what it does
    instead is described in ``behaviour``.
    ``"propagates"``: no error; NaN/Inf read by an output appear in that output.
    ``"either"``: any one of the expectations listed in ``of`` is acceptable; used where the
    behaviour is not known yet (zero-length sequences).
``errors``
    (``raises``) exception class names, matched against the class and its bases by name
    (``"InvalidType"`` is ``chainer.utils.type_check.InvalidType``).
``errors_in_debug``
    (``documented``) class names raised instead when ``chainer.set_debug(True)`` is on.
``subjects``
    optional: subject names the expectation applies to; every other subject must treat the
    case as a valid one (no error).
``devices``
    optional: device kinds (``"cpu"``, ``"gpu"``) the expectation applies to; on the others the
    outcome is described in ``behaviour``.
``of``
    (``either``) a list of expectations (objects with the keys above).
``behaviour``
    human-readable text: what a user should expect, and why.

Sizes
-----
:data:`SIZE_BOUNDS` holds the bounds of each family per profile (``ci``, ``dev``, ``audit``);
:func:`bounds_for` returns one of them.
"""

from __future__ import annotations

import inspect
import math
import random
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

import numpy as np

from harness.core.cases import FAMILIES, FLOAT_DTYPES, Case, encode_array, lstm_weight_shapes
from harness.core.errors import InvalidArgument
from harness.generate.edges import with_edge_tags

if TYPE_CHECKING:
    from hypothesis import strategies as st

# Hypothesis is imported where a strategy is made or drawn from: the seeded corpora (:func:`corpus`, what
# ``harness report`` runs) do not use it, and its import is a sixth of a second at every report's start.

__all__ = [
    "embed_cases", "lstm_cases", "pipeline_cases", "cases", "any_case", "bad_inputs",
    "corpus", "bad_corpus", "bounds_for", "in_support", "SIZE_BOUNDS", "BAD_KINDS", "IGNORE_KINDS",
    "ID_DISTRIBUTIONS", "LENGTH_PATTERNS", "GY_KINDS", "SIGNED_ID_DTYPES", "UNSIGNED_ID_DTYPES",
]

T = TypeVar("T")

SIGNED_ID_DTYPES = ("int8", "int16", "int32", "int64")
UNSIGNED_ID_DTYPES = ("uint8", "uint16", "uint32", "uint64")
_ID_RANGE = {name: (int(np.iinfo(name).min), int(np.iinfo(name).max))
             for name in SIGNED_ID_DTYPES + UNSIGNED_ID_DTYPES}

#: Ignore-label kinds of embed cases, with their weights.
IGNORE_KINDS = ("none", "minus_one", "zero", "last", "middle", "oov", "neg_large")
#: ``middle``: strictly between 0 and V-1 (Chainer's own EmbedID tests use ignore_label=1 with V=3).
_IGNORE_WEIGHTS = {"none": 3, "minus_one": 2, "zero": 1, "last": 1, "middle": 1, "oov": 1, "neg_large": 1}
#: Id distributions of embed cases (``id_kind``), with their weights.
ID_DISTRIBUTIONS = ("uniform", "collision", "all_equal", "sorted", "explicit")
_ID_WEIGHTS = {"uniform": 4, "collision": 2, "all_equal": 1, "sorted": 1, "explicit": 2}
#: Upstream-gradient kinds; most examples are ``random``.
GY_KINDS = ("random", "ones", "zeros", "large", "cancel")
_GY_WEIGHTS = {"random": 6, "ones": 1, "zeros": 1, "large": 1, "cancel": 1}
#: Patterns of sequence lengths (tagged ``lengths:<pattern>``).
LENGTH_PATTERNS = ("equal", "decreasing", "increasing", "unsorted", "one_long", "ties")
#: ``ties``: sorted longest first with repeated lengths, as batches of ragged sequences usually come
#: (``[3, 2, 2, 1, 1]``); a relation's sub-batches and duplicates need them.
_LENGTH_WEIGHTS = {"equal": 2, "decreasing": 2, "increasing": 1, "unsorted": 2, "one_long": 1, "ties": 2}

_SEED_MAX = 2**32 - 1
_MAX_EXPLICIT_IDS = 32  # explicit id arrays stay small: they are stored in the corpus


# ---- the source of choices ------------------------------------------------------------------
class _Source:
    """The choices a builder makes. Subclasses draw them from Hypothesis or from ``random``."""

    def integer(self, lo: int, hi: int) -> int:
        """An int in ``[lo, hi]``; simplest: ``lo``."""
        raise NotImplementedError

    def unit(self) -> float:
        """A float in ``[0, 1]``."""
        raise NotImplementedError

    def ids(self, dtype: str, shape: tuple[int, ...], vocab: int, extra: int | None) -> np.ndarray:
        """An explicit id array: values in ``[0, vocab)``, plus ``extra`` (an ignore label) now and then."""
        raise NotImplementedError

    def label(self, name: str, value: Any) -> None:
        """Report a kind that was drawn (a Hypothesis event)."""

    # Everything else is built on integer(), so both sources share it.
    def choice(self, options: Sequence[T]) -> T:
        """One of ``options``; simplest: the first."""
        if not options:
            raise InvalidArgument("choice from an empty sequence")  # pragma: no cover - builder bug
        return options[self.integer(0, len(options) - 1)]

    def weighted(self, options: Mapping[T, int] | Sequence[tuple[T, int]]) -> T:
        """One of the options with weight > 0, in proportion to the weights; simplest: the first."""
        pairs = list(options.items()) if isinstance(options, Mapping) else list(options)
        pairs = [(v, w) for v, w in pairs if w > 0]
        k = self.integer(0, sum(w for _, w in pairs) - 1)
        for value, w in pairs:
            if k < w:
                return value
            k -= w
        raise AssertionError("unreachable")  # pragma: no cover

    def boolean(self) -> bool:
        return bool(self.integer(0, 1))

    def sized(self, lo: int, hi: int) -> int:
        """An int in ``[lo, hi]`` spread over magnitudes: small ones, the edges, and log-uniform."""
        if lo >= hi:
            return lo
        mode = self.weighted((("low", 2), ("log", 5), ("edge", 1)))
        if mode == "low":
            return self.integer(lo, min(hi, lo + 7))
        if mode == "edge":
            return self.choice((lo, hi))
        e = self.integer(lo.bit_length(), hi.bit_length())
        if e == 0:
            return 0
        return self.integer(max(lo, 1 << (e - 1)), min(hi, (1 << e) - 1))

    def distinct(self, lo: int, hi: int, n: int) -> list[int]:
        """``n`` distinct ints from ``[lo, hi]`` (``n <= hi - lo + 1``), in draw order."""
        pool = list(range(lo, hi + 1))
        return [pool.pop(self.integer(0, len(pool) - 1)) for _ in range(n)]


class _HypothesisSource(_Source):
    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        # Made only inside a Hypothesis draw: the modules are taken here once, not at each draw.
        import hypothesis
        from hypothesis import strategies
        from hypothesis.extra import numpy as hnp

        self._draw = draw
        self._hypothesis, self._st, self._hnp = hypothesis, strategies, hnp

    def integer(self, lo: int, hi: int) -> int:
        return lo if lo == hi else self._draw(self._st.integers(lo, hi))

    def unit(self) -> float:
        return self._draw(self._st.floats(0.0, 1.0))

    def ids(self, dtype: str, shape: tuple[int, ...], vocab: int, extra: int | None) -> np.ndarray:
        elements: st.SearchStrategy[int] = self._st.integers(0, vocab - 1)
        if extra is not None:
            elements = self._st.one_of(elements, self._st.just(extra))
        return self._draw(self._hnp.arrays(np.dtype(dtype), shape, elements=elements))

    def label(self, name: str, value: Any) -> None:
        if self._hypothesis.currently_in_test_context():
            self._hypothesis.event(name, str(value))


class _RandomSource(_Source):
    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return lo if lo == hi else self._rng.randint(lo, hi)

    def unit(self) -> float:
        return self._rng.random()

    def ids(self, dtype: str, shape: tuple[int, ...], vocab: int, extra: int | None) -> np.ndarray:
        n = math.prod(shape)
        vals = [extra if extra is not None and self._rng.random() < 0.2 else self._rng.randrange(vocab)
                for _ in range(n)]
        return np.array(vals, dtype=dtype).reshape(shape)


# ---- eager validation -------------------------------------------------------------------------
def _check_int(name: str, value: Any, minimum: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be an int")
    if minimum is not None and value < minimum:
        raise InvalidArgument(f"{name}={value!r} must be at least {minimum}")
    return value


def _check_order(lo_name: str, lo: int, hi_name: str, hi: int) -> None:
    if lo > hi:
        raise InvalidArgument(f"{lo_name}={lo!r} is larger than {hi_name}={hi!r}")


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be a bool")
    return value


def _check_dtypes(name: str, value: Any, allowed: Sequence[str], hint: str = "") -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise InvalidArgument(f"{name}={value!r} must be a tuple of dtype names")
    if not value:
        raise InvalidArgument(f"{name}={value!r} must not be empty")
    for v in value:
        if v not in allowed:
            raise InvalidArgument(f"{name}={value!r} contains {v!r}, which is not one of "
                                  f"{', '.join(allowed)}{hint}")
    return tuple(dict.fromkeys(value))  # drop repeats, keep order


def _check_family(name: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise InvalidArgument(f"{name}={value!r} is not one of {', '.join(map(str, allowed))}")
    return value


@dataclass(frozen=True)
class _EmbedBounds:
    min_vocab: int
    max_vocab: int
    min_width: int
    max_width: int
    max_ids: int
    id_dtypes: tuple[str, ...]
    w_dtypes: tuple[str, ...]
    allow_empty: bool
    explicit: bool = True  # bad-input bases turn explicit id arrays off

    def eligible_id_dtypes(self) -> tuple[str, ...]:
        return tuple(d for d in self.id_dtypes if _ID_RANGE[d][1] + 1 >= self.min_vocab)


@dataclass(frozen=True)
class _LstmBounds:
    min_batch: int
    max_batch: int
    min_len: int
    max_len: int
    max_layers: int
    max_in: int
    max_hidden: int
    dtypes: tuple[str, ...]
    allow_dropout: bool


@dataclass(frozen=True)
class _PipelineBounds:
    min_batch: int
    max_batch: int
    min_len: int
    max_len: int
    max_layers: int
    min_vocab: int
    max_vocab: int
    min_width: int
    max_width: int
    max_hidden: int
    dtypes: tuple[str, ...]


def _embed_bounds(*, min_vocab: int = 1, max_vocab: int = 50_000, min_width: int = 1, max_width: int = 64,
                  max_ids: int = 1024, id_dtypes: Sequence[str] = SIGNED_ID_DTYPES,
                  w_dtypes: Sequence[str] = FLOAT_DTYPES, allow_empty: bool = True) -> _EmbedBounds:
    _check_int("min_vocab", min_vocab, 1)
    _check_int("max_vocab", max_vocab, 1)
    _check_order("min_vocab", min_vocab, "max_vocab", max_vocab)
    _check_int("min_width", min_width, 1)
    _check_int("max_width", max_width, 1)
    _check_order("min_width", min_width, "max_width", max_width)
    _check_int("max_ids", max_ids, 1)
    ids = _check_dtypes("id_dtypes", id_dtypes, SIGNED_ID_DTYPES,
                        " (unsigned and float ids are bad inputs: see bad_inputs)")
    ws = _check_dtypes("w_dtypes", w_dtypes, FLOAT_DTYPES)
    _check_bool("allow_empty", allow_empty)
    b = _EmbedBounds(min_vocab, max_vocab, min_width, max_width, max_ids, ids, ws, allow_empty)
    if not b.eligible_id_dtypes():
        widest = max(ids, key=lambda d: _ID_RANGE[d][1])
        raise InvalidArgument(f"min_vocab={min_vocab!r} is larger than any of id_dtypes={tuple(ids)!r} "
                              f"can index ({widest} holds ids up to {_ID_RANGE[widest][1]})")
    return b


def _lstm_bounds(*, min_batch: int = 1, max_batch: int = 64, min_len: int = 1, max_len: int = 32,
                 max_layers: int = 3, max_in: int = 32, max_hidden: int = 32,
                 dtypes: Sequence[str] = ("float32",), allow_dropout: bool = True) -> _LstmBounds:
    _check_int("min_batch", min_batch, 1)
    _check_int("max_batch", max_batch, 1)
    _check_order("min_batch", min_batch, "max_batch", max_batch)
    _check_int("min_len", min_len, 1)
    _check_int("max_len", max_len, 1)
    _check_order("min_len", min_len, "max_len", max_len)
    _check_int("max_layers", max_layers, 1)
    _check_int("max_in", max_in, 1)
    _check_int("max_hidden", max_hidden, 1)
    dts = _check_dtypes("dtypes", dtypes, FLOAT_DTYPES)
    _check_bool("allow_dropout", allow_dropout)
    return _LstmBounds(min_batch, max_batch, min_len, max_len, max_layers, max_in, max_hidden, dts,
                       allow_dropout)


def _pipeline_bounds(*, min_batch: int = 1, max_batch: int = 16, min_len: int = 1, max_len: int = 16,
                     max_layers: int = 3, min_vocab: int = 1, max_vocab: int = 10_000, min_width: int = 1,
                     max_width: int = 32, max_hidden: int = 32, dtypes: Sequence[str] = ("float32",)
                     ) -> _PipelineBounds:
    _check_int("min_batch", min_batch, 1)
    _check_int("max_batch", max_batch, 1)
    _check_order("min_batch", min_batch, "max_batch", max_batch)
    _check_int("min_len", min_len, 1)
    _check_int("max_len", max_len, 1)
    _check_order("min_len", min_len, "max_len", max_len)
    _check_int("max_layers", max_layers, 1)
    _check_int("min_vocab", min_vocab, 1)
    _check_int("max_vocab", max_vocab, 1)
    _check_order("min_vocab", min_vocab, "max_vocab", max_vocab)
    if max_vocab > _ID_RANGE["int32"][1] + 1:
        raise InvalidArgument(f"max_vocab={max_vocab!r} is larger than int32 ids can index "
                              f"({_ID_RANGE['int32'][1] + 1})")
    _check_int("min_width", min_width, 1)
    _check_int("max_width", max_width, 1)
    _check_order("min_width", min_width, "max_width", max_width)
    _check_int("max_hidden", max_hidden, 1)
    dts = _check_dtypes("dtypes", dtypes, FLOAT_DTYPES)
    return _PipelineBounds(min_batch, max_batch, min_len, max_len, max_layers, min_vocab, max_vocab,
                           min_width, max_width, max_hidden, dts)


# ---- shared builders --------------------------------------------------------------------------
def _ignore_label(src: _Source, vocab: int, id_dtype: str) -> tuple[str, int | None]:
    """An ignore-label kind and its value, representable in ``id_dtype``."""
    lo, hi = _ID_RANGE[id_dtype]
    weights = dict(_IGNORE_WEIGHTS)
    if lo > -1:
        weights["minus_one"] = weights["neg_large"] = 0
    if vocab < 3:  # nothing lies strictly between 0 and V-1
        weights["middle"] = 0
    if vocab > hi:  # V + k does not fit (int8 with vocab 128)
        weights["oov"] = 0
    kind = src.weighted(weights)
    value = {
        "none": None,
        "minus_one": -1,
        "zero": 0,
        "last": vocab - 1,
        "neg_large": max(-(2**31), lo),
    }.get(kind)
    if kind == "oov":
        value = vocab + src.integer(0, min(hi - vocab, 1000))
    if kind == "middle":
        value = src.integer(1, vocab - 2)
    return kind, value


def _ids_shape(src: _Source, max_total: int, allow_empty: bool, hot: bool) -> list[int]:
    """An ids shape of 1 to 3 dims with at most ``max_total`` elements; maybe empty."""
    if hot:  # many ids, to pile them onto few rows
        n = src.integer(max(1, max_total // 2), max_total)
        if src.boolean():
            k = src.integer(1, min(8, n))
            return [n // k, k]
        return [n]
    ndim = src.integer(1, 3)
    dims: list[int] = []
    remaining = max_total
    for _ in range(ndim):
        d = src.sized(1, max(1, remaining))
        dims.append(d)
        remaining = max(1, remaining // d)
    if allow_empty and src.weighted(((False, 9), (True, 1))):
        dims[src.integer(0, ndim - 1)] = 0
    return dims


def _gy_kind(src: _Source) -> str:
    return src.weighted(_GY_WEIGHTS)


def _build_embed(src: _Source, b: _EmbedBounds) -> Case:
    hot = src.weighted((("mixed", 9), ("hot", 1))) == "hot"
    id_dtype = src.choice(b.eligible_id_dtypes())
    vmax = min(b.max_vocab, _ID_RANGE[id_dtype][1] + 1)  # the id dtype must hold vocab - 1
    vocab = src.integer(b.min_vocab, max(b.min_vocab, min(vmax, 16))) if hot else src.sized(b.min_vocab, vmax)
    width = src.sized(b.min_width, b.max_width)
    w_dtype = src.choice(b.w_dtypes)
    ignore_kind, ignore_label = _ignore_label(src, vocab, id_dtype)
    id_weights = dict(_ID_WEIGHTS)
    if not b.explicit:
        id_weights["explicit"] = 0
    id_kind = src.weighted(id_weights)
    tags = [f"ignore:{ignore_kind}", f"ids:{id_kind}"]
    if hot:
        tags.append("scale:hot")
    spec: dict[str, Any] = {"vocab": vocab, "width": width, "id_dtype": id_dtype, "w_dtype": w_dtype,
                            "ignore_label": ignore_label, "id_kind": id_kind}
    arrays: dict[str, Any] = {}
    if id_kind == "explicit":
        shape = tuple(_ids_shape(src, min(b.max_ids, _MAX_EXPLICIT_IDS), b.allow_empty, hot=False))
        x = src.ids(id_dtype, shape, vocab, ignore_label)
        arrays["x"] = encode_array(x)
        spec["ids_shape"] = list(shape)
    else:
        spec["ids_shape"] = _ids_shape(src, b.max_ids, b.allow_empty, hot)
        if id_kind == "collision":
            spec["distinct"] = src.integer(1, min(vocab, 8))
        if ignore_label is not None:
            frac_kind = src.weighted((("some", 5), ("all", 1), ("zero", 1)))
            fracs = {"all": 1.0, "zero": 0.0}
            spec["ignore_frac"] = fracs[frac_kind] if frac_kind in fracs else round(0.05 + 0.9 * src.unit(), 3)
            if frac_kind != "some":
                tags.append(f"ignore_frac:{frac_kind}")
    if 0 in spec["ids_shape"]:
        tags.append("ids:empty")
    spec["gy_kind"] = _gy_kind(src)
    w_scale = src.weighted(((None, 8), (0.01, 1), (100.0, 1)))
    if w_scale is not None:
        spec["w_scale"] = w_scale
    for name in ("ignore", "ids", "scale"):
        src.label(f"embed.{name}", next((t.split(":", 1)[1] for t in tags if t.startswith(name + ":")), "-"))
    src.label("embed.id_dtype", id_dtype)
    src.label("embed.gy_kind", spec["gy_kind"])
    return with_edge_tags(Case("embed", src.integer(0, _SEED_MAX), spec, arrays, tags=tuple(tags)))


def _lengths(src: _Source, min_batch: int, max_batch: int, min_len: int, max_len: int
             ) -> tuple[str, list[int]]:
    """A pattern of sequence lengths and the lengths themselves."""
    span = max_len - min_len + 1
    weights = dict(_LENGTH_WEIGHTS)
    if span < 2 or max(2, min_batch) > min(max_batch, span):
        weights["decreasing"] = weights["increasing"] = 0
    if span < 2 or max_batch < 3:
        weights["unsorted"] = 0
    if span < 2 or max_batch < 2:
        weights["one_long"] = 0
    if max_batch < 3:
        weights["ties"] = 0
    pattern = src.weighted(weights)
    if pattern == "ties":
        batch = src.sized(max(3, min_batch), max_batch)
        values = sorted((src.integer(min_len, max_len) for _ in range(batch)), reverse=True)
        j = src.integer(1, batch - 1)
        values[j] = values[j - 1]  # at least one tie
        return pattern, values
    if pattern == "equal":
        return pattern, [src.sized(min_len, max_len)] * src.sized(min_batch, max_batch)
    if pattern in ("decreasing", "increasing"):
        batch = src.sized(max(2, min_batch), min(max_batch, span))
        values = sorted(src.distinct(min_len, max_len, batch), reverse=pattern == "decreasing")
        return pattern, values
    if pattern == "unsorted":
        batch = src.sized(max(3, min_batch), max_batch)
        values = [src.integer(min_len, max_len) for _ in range(batch)]
        if values == sorted(values) or values == sorted(values, reverse=True):
            values[0], values[1], values[2] = min_len, src.integer(min_len + 1, max_len), min_len
        return pattern, values
    batch = src.sized(max(2, min_batch), max_batch)  # one_long
    long = src.integer(min_len + 1, max_len)
    short_hi = max(min_len, min(long - 1, long // 3))
    values = [src.integer(min_len, short_hi) for _ in range(batch)]
    values[src.integer(0, batch - 1)] = long
    return pattern, values


def _recurrent(src: _Source, spec: dict[str, Any], max_layers: int, max_hidden: int,
               dtypes: Sequence[str]) -> None:
    """The keys lstm and pipeline cases share (layers, hidden, direction, state, dtype, gy)."""
    spec["n_layers"] = src.integer(1, max_layers)
    spec["hidden"] = src.sized(1, max_hidden)
    spec["bidirectional"] = src.boolean()
    spec["initial_state"] = src.choice(("none", "given"))
    spec["dtype"] = src.choice(tuple(dtypes))
    spec["gy_kind"] = _gy_kind(src)
    # Which outputs the loss reaches: every one mostly; the final state, the sequence outputs, or some of the
    # sequences' outputs (the others receive None, as a user's loss leaves them) the rest of the time.
    go = src.weighted(_GRAD_OUTPUT_WEIGHTS)
    if go != "all":
        spec["grad_outputs"] = go


_GRAD_OUTPUT_WEIGHTS = (("all", 12), ("hy", 2), ("cy", 1), ("ys", 1), ("ys_some", 1), ("hy_ys_some", 1))


def _build_lstm(src: _Source, b: _LstmBounds) -> Case:
    pattern, lengths = _lengths(src, b.min_batch, b.max_batch, b.min_len, b.max_len)
    spec: dict[str, Any] = {"lengths": lengths, "in_size": src.sized(1, b.max_in)}
    _recurrent(src, spec, b.max_layers, b.max_hidden, b.dtypes)
    tags = [f"lengths:{pattern}", f"grad:{spec.get('grad_outputs', 'all')}"]
    if b.allow_dropout and src.weighted(((False, 4), (True, 1))):
        spec["dropout"] = round(0.05 + 0.85 * src.unit(), 2)
        spec["dropout_seed"] = src.integer(0, 2**31 - 1)
        tags.append("dropout")
    w_scale = src.weighted(((None, 6), (0.05, 1), (2.0, 1)))
    if w_scale is not None:
        spec["w_scale"] = w_scale
    src.label("lstm.lengths", pattern)
    src.label("lstm.layers", spec["n_layers"])
    src.label("lstm.gy_kind", spec["gy_kind"])
    return with_edge_tags(Case("lstm", src.integer(0, _SEED_MAX), spec, tags=tuple(tags)))


def _build_pipeline(src: _Source, b: _PipelineBounds) -> Case:
    pattern, lengths = _lengths(src, b.min_batch, b.max_batch, b.min_len, b.max_len)
    vocab = src.sized(b.min_vocab, b.max_vocab)
    pad_kind = src.choice(("minus_one", "zero", "last"))
    spec: dict[str, Any] = {
        "lengths": lengths, "vocab": vocab, "width": src.sized(b.min_width, b.max_width),
        "ignore_label": {"minus_one": -1, "zero": 0, "last": vocab - 1}[pad_kind],
        "id_kind": src.weighted((("uniform", 4), ("collision", 2), ("all_equal", 1))),
    }
    if spec["id_kind"] == "collision":
        spec["distinct"] = src.integer(1, min(vocab, 8))
    _recurrent(src, spec, b.max_layers, b.max_hidden, b.dtypes)
    src.label("pipeline.lengths", pattern)
    src.label("pipeline.padding", pad_kind)
    return with_edge_tags(Case("pipeline", src.integer(0, _SEED_MAX), spec,
                               tags=(f"lengths:{pattern}", f"ignore:{pad_kind}", f"ids:{spec['id_kind']}",
                                     f"grad:{spec.get('grad_outputs', 'all')}")))


def _strategy(builder: Callable[[_Source, Any], Case], bounds: Any) -> st.SearchStrategy[Case]:
    from hypothesis import currently_in_test_context, note
    from hypothesis import strategies as st

    @st.composite
    def draw_case(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Case:
        case = builder(_HypothesisSource(draw), bounds)
        if currently_in_test_context():
            note(f"{case!r}: {case.to_json()}")
        return case

    return draw_case()


# ---- public strategies --------------------------------------------------------------------------
def embed_cases(*, min_vocab: int = 1, max_vocab: int = 50_000, min_width: int = 1, max_width: int = 64,
                max_ids: int = 1024, id_dtypes: Sequence[str] = SIGNED_ID_DTYPES,
                w_dtypes: Sequence[str] = FLOAT_DTYPES, allow_empty: bool = True) -> st.SearchStrategy[Case]:
    """Valid ``embed`` cases.

    Vocab in ``[min_vocab, max_vocab]`` (clipped so that the drawn id dtype holds ``vocab - 1``),
    width in ``[min_width, max_width]``, ids of 1-3 dims with at most ``max_ids`` elements (an
    empty batch now and then when ``allow_empty``), ids uniform, collision-heavy, all equal,
    sorted or an explicit Hypothesis-chosen array (``Case.arrays["x"]``); ignore labels None, -1,
    0, ``V-1``, ``V+k`` and a large negative value within the id dtype, with ``ignore_frac``
    between 0 and 1 inclusive; upstream gradients mostly random, else ones/zeros/large/cancel.
    Also a "hot" scale: up to ``max_ids`` ids into at most 16 rows (GPU atomics contend).
    """
    return _strategy(_build_embed, _embed_bounds(
        min_vocab=min_vocab, max_vocab=max_vocab, min_width=min_width, max_width=max_width,
        max_ids=max_ids, id_dtypes=id_dtypes, w_dtypes=w_dtypes, allow_empty=allow_empty))


def lstm_cases(*, min_batch: int = 1, max_batch: int = 64, min_len: int = 1, max_len: int = 32,
               max_layers: int = 3, max_in: int = 32, max_hidden: int = 32,
               dtypes: Sequence[str] = ("float32",), allow_dropout: bool = True) -> st.SearchStrategy[Case]:
    """Valid ``lstm`` cases.

    Batch (number of sequences) in ``[min_batch, max_batch]``; lengths in ``[min_len, max_len]``
    in one of the patterns of :data:`LENGTH_PATTERNS` (all equal, strictly decreasing, strictly
    increasing, unsorted, one long among short ones; tagged ``lengths:<pattern>``); ``in_size``
    up to ``max_in``, ``hidden`` up to ``max_hidden``, 1 to ``max_layers`` layers, uni- or
    bidirectional, initial state none or given; dropout 0 mostly, else > 0 with a
    ``dropout_seed`` (tag ``dropout``) when ``allow_dropout``.
    """
    return _strategy(_build_lstm, _lstm_bounds(
        min_batch=min_batch, max_batch=max_batch, min_len=min_len, max_len=max_len,
        max_layers=max_layers, max_in=max_in, max_hidden=max_hidden, dtypes=dtypes,
        allow_dropout=allow_dropout))


def pipeline_cases(*, min_batch: int = 1, max_batch: int = 16, min_len: int = 1, max_len: int = 16,
                   max_layers: int = 3, min_vocab: int = 1, max_vocab: int = 10_000, min_width: int = 1,
                   max_width: int = 32, max_hidden: int = 32, dtypes: Sequence[str] = ("float32",)
                   ) -> st.SearchStrategy[Case]:
    """Valid ``pipeline`` cases (padded ids -> EmbedID -> NStepLSTM).

    Lengths as in :func:`lstm_cases`; vocab up to ``max_vocab``, embedding width up to
    ``max_width`` (the LSTM's input size); the padding id (``ignore_label``) is -1, 0 or ``V-1``
    (tag ``ignore:<kind>``); ids uniform, collision-heavy or all equal.
    """
    return _strategy(_build_pipeline, _pipeline_bounds(
        min_batch=min_batch, max_batch=max_batch, min_len=min_len, max_len=max_len,
        max_layers=max_layers, min_vocab=min_vocab, max_vocab=max_vocab, min_width=min_width,
        max_width=max_width, max_hidden=max_hidden, dtypes=dtypes))


_FAMILY_STRATEGIES: dict[str, Callable[..., st.SearchStrategy[Case]]] = {
    "embed": embed_cases, "lstm": lstm_cases, "pipeline": pipeline_cases,
}
_FAMILY_VALIDATORS: dict[str, Callable[..., Any]] = {
    "embed": _embed_bounds, "lstm": _lstm_bounds, "pipeline": _pipeline_bounds,
}
_FAMILY_BUILDERS: dict[str, Callable[[_Source, Any], Case]] = {
    "embed": _build_embed, "lstm": _build_lstm, "pipeline": _build_pipeline,
}


def _bound_names(family: str) -> tuple[str, ...]:
    return tuple(inspect.signature(_FAMILY_STRATEGIES[family]).parameters)


def _split_bounds(bounds: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Route flat bounds to every family that takes them; ``embed={...}`` etc. override per family."""
    per: dict[str, dict[str, Any]] = {f: {} for f in FAMILIES}
    for name, value in bounds.items():
        if name in FAMILIES:
            continue
        takers = [f for f in FAMILIES if name in _bound_names(f)]
        if not takers:
            raise InvalidArgument(f"{name}={value!r} is not a bound of any family's strategy")
        for f in takers:
            per[f][name] = value
    for f in FAMILIES:
        if f in bounds:
            sub = bounds[f]
            if not isinstance(sub, Mapping):
                raise InvalidArgument(f"{f}={sub!r} must be a mapping of {f}_cases bounds")
            for name, value in sub.items():
                if name not in _bound_names(f):
                    raise InvalidArgument(f"{name}={value!r} is not a bound of {f}_cases "
                                          f"(it takes {', '.join(_bound_names(f))})")
                per[f][name] = value
    return per


def cases(family: str, **bounds: Any) -> st.SearchStrategy[Case]:
    """Valid cases of ``family`` (``embed``, ``lstm``, ``pipeline``, or ``all`` for :func:`any_case`)."""
    _check_family("family", family, FAMILIES + ("all",))
    if family == "all":
        return any_case(**bounds)
    for name, value in bounds.items():
        if name not in _bound_names(family):
            raise InvalidArgument(f"{name}={value!r} is not a bound of {family}_cases "
                                  f"(it takes {', '.join(_bound_names(family))})")
    return _FAMILY_STRATEGIES[family](**bounds)


def any_case(**bounds: Any) -> st.SearchStrategy[Case]:
    """A valid case of any family.

    A flat bound goes to every family whose strategy takes it (``max_batch`` to lstm and
    pipeline); ``embed={...}``, ``lstm={...}``, ``pipeline={...}`` give one family's bounds and
    override flat ones, so ``any_case(**bounds_for(profile, "all"))`` works.
    """
    from hypothesis import strategies as st

    per = _split_bounds(bounds)
    return st.one_of(*(_FAMILY_STRATEGIES[f](**per[f]) for f in FAMILIES))


# ---- bad inputs ---------------------------------------------------------------------------------
_PROPAGATES = {"kind": "propagates", "behaviour": "NaN/Inf propagate to outputs that read them; no error"}
_ZERO_LENGTH = {
    "kind": "either",
    "of": [
        {"kind": "raises", "errors": ["ValueError", "InvalidType", "IndexError", "TypeError"]},
        {"kind": "documented",
         "behaviour": "a zero-length sequence gives an empty output sequence; its final state is its "
                      "initial state"},
    ],
    "behaviour": "not yet known whether Chainer raises on a zero-length sequence; either outcome is "
                 "acceptable, and the one observed is recorded",
}

#: Each bad-input kind and the families it exists for; a case's tag is ``bad:<kind>``.
BAD_KINDS: dict[str, tuple[str, ...]] = {
    "id_out_of_range_negative": ("embed",),
    "id_out_of_range_high": ("embed",),
    "float_ids": ("embed",),
    "unsigned_ids": ("embed",),
    "w_rank": ("embed",),
    "w_dtype_espnet": ("embed",),
    "xs_widths_mismatch": ("lstm",),
    "zero_length": ("lstm", "pipeline"),
    "nan_inf_w": ("embed", "lstm", "pipeline"),
    "nan_inf_input": ("embed", "lstm"),
}

_BAD_EMBED = _EmbedBounds(min_vocab=1, max_vocab=100, min_width=1, max_width=8, max_ids=16,
                          id_dtypes=SIGNED_ID_DTYPES, w_dtypes=("float32",), allow_empty=False,
                          explicit=False)
_BAD_LSTM = _LstmBounds(min_batch=1, max_batch=4, min_len=1, max_len=5, max_layers=2, max_in=6,
                        max_hidden=6, dtypes=("float32",), allow_dropout=False)
_BAD_PIPELINE = _PipelineBounds(min_batch=1, max_batch=4, min_len=1, max_len=5, max_layers=2, min_vocab=1,
                                max_vocab=100, min_width=1, max_width=6, max_hidden=6, dtypes=("float32",))


def _nonfinite(src: _Source) -> str:
    return src.choice(("nan", "inf", "-inf"))


def _without_ignore(spec: dict[str, Any], src: _Source, choices: Sequence[Any]) -> None:
    """Replace the ignore label by one of ``choices`` (so it cannot be the planted bad id)."""
    spec["ignore_label"] = src.choice(tuple(choices))
    if spec["ignore_label"] is None:
        spec.pop("ignore_frac", None)
    spec["_relabelled"] = True


def _build_bad(src: _Source, kind: str, family: str) -> Case:
    tags = [f"bad:{kind}"]
    inject: list[dict[str, Any]] = []
    if family == "embed":
        base = _build_embed(src, _BAD_EMBED if kind != "w_dtype_espnet" else
                            replace(_BAD_EMBED, w_dtypes=("float16", "float64")))
        spec = dict(base.spec)
        vocab, width = spec["vocab"], spec["width"]
        n = math.prod(spec["ids_shape"])
        if kind == "id_out_of_range_negative":
            _without_ignore(spec, src, (None, 0, vocab - 1))
            inject.append({"array": "x", "index": src.integer(0, n - 1), "value": -src.integer(1, vocab)})
            expect: dict[str, Any] = {
                "kind": "documented",
                "behaviour": "negative ids wrap around like NumPy indexing on CPU; ValueError only in "
                             "chainer debug mode",
                "errors_in_debug": ["ValueError"]}
        elif kind == "id_out_of_range_high":
            k = src.integer(0, 3)
            if _ID_RANGE[spec["id_dtype"]][1] < vocab + k:
                spec["id_dtype"] = src.choice(("int32", "int64"))
            _without_ignore(spec, src, (None, -1, 0))
            inject.append({"array": "x", "index": src.integer(0, n - 1), "value": vocab + k})
            expect = {"kind": "raises", "errors": ["IndexError", "ValueError"], "devices": ["cpu"],
                      "behaviour": "ids >= vocab fail NumPy indexing on CPU (IndexError; ValueError in "
                                   "chainer debug mode); CuPy wraps out-of-range indices on GPU"}
        elif kind == "float_ids":
            spec["id_dtype"] = "float32"
            _without_ignore(spec, src, (None, -1, 0))
            expect = {"kind": "raises", "errors": ["InvalidType", "TypeError", "ValueError"],
                      "behaviour": "Chainer's type check requires integer ids (x.dtype.kind == 'i')"}
        elif kind == "unsigned_ids":
            spec["id_dtype"] = src.choice(UNSIGNED_ID_DTYPES)
            _without_ignore(spec, src, (None, 0, vocab - 1))
            expect = {"kind": "raises", "errors": ["InvalidType"],
                      "behaviour": "Chainer's type check requires signed ids (x.dtype.kind == 'i')"}
        elif kind == "w_rank":
            ndim = src.choice((1, 3))
            spec["w_shape"] = [vocab * width] if ndim == 1 else [vocab, width, src.integer(1, 3)]
            tags.append(f"w_rank:{ndim}")
            expect = {"kind": "raises", "errors": ["InvalidType"],
                      "behaviour": "W must have 2 dimensions (vocab, width)"}
        elif kind == "w_dtype_espnet":
            expect = {"kind": "raises", "errors": ["InvalidType"],
                      "subjects": ["espnet.embed_id", "espnet.EmbedID"],
                      "behaviour": "ESPnet's deterministic EmbedID type check accepts only float32 W; "
                                   "Chainer's embed_id accepts every float dtype"}
        elif kind == "nan_inf_w":
            for _ in range(src.integer(1, 3)):
                inject.append({"array": "W", "index": src.integer(0, vocab * width - 1), "value": _nonfinite(src)})
            expect = dict(_PROPAGATES)
        elif kind == "nan_inf_input":
            for _ in range(src.integer(1, 3)):
                inject.append({"array": "gy", "index": src.integer(0, n * width - 1), "value": _nonfinite(src)})
            tags.append("inject:gy")
            expect = dict(_PROPAGATES)
        else:  # pragma: no cover - BAD_KINDS and this function disagree
            raise AssertionError(kind)
    else:
        base = _build_lstm(src, _BAD_LSTM) if family == "lstm" else _build_pipeline(src, _BAD_PIPELINE)
        spec = dict(base.spec)
        lengths = list(spec["lengths"])
        if kind == "zero_length":
            pos = src.integer(0, len(lengths))
            if src.boolean() and len(lengths) > 1:
                lengths[min(pos, len(lengths) - 1)] = 0
            else:
                lengths.insert(pos, 0)
            spec["lengths"] = lengths
            expect = dict(_ZERO_LENGTH)
        elif kind == "xs_widths_mismatch":
            widths = [spec["in_size"]] * len(lengths)
            widths[src.integer(0, len(widths) - 1)] = spec["in_size"] + src.integer(1, 3)
            spec["xs_widths"] = widths
            expect = {"kind": "raises", "errors": ["InvalidType", "ValueError", "TypeError"],
                      "behaviour": "every x in xs must have in_size columns; Chainer's type check or "
                                   "its concatenation fails"}
        elif kind == "nan_inf_w":
            if family == "pipeline":
                name, size = "W", spec["vocab"] * spec["width"]
            else:
                shapes = dict(lstm_weight_shapes(spec["n_layers"], spec["in_size"], spec["hidden"],
                                                 spec["bidirectional"]))
                name = src.choice(sorted(shapes))
                size = math.prod(shapes[name])
            inject.append({"array": name, "index": src.integer(0, size - 1), "value": _nonfinite(src)})
            tags.append(f"inject:{name}")
            expect = dict(_PROPAGATES)
        elif kind == "nan_inf_input":
            targets = [f"xs.{i}" for i in range(len(lengths))]
            if spec["initial_state"] == "given":
                targets += ["hx", "cx"]
            name = src.choice(targets)
            if name.startswith("xs."):
                size = lengths[int(name[3:])] * spec["in_size"]
            else:
                size = spec["n_layers"] * (2 if spec["bidirectional"] else 1) * len(lengths) * spec["hidden"]
            inject.append({"array": name, "index": src.integer(0, size - 1), "value": _nonfinite(src)})
            tags.append(f"inject:{name.split('.')[0]}")
            expect = dict(_PROPAGATES)
        else:  # pragma: no cover
            raise AssertionError(kind)
    if inject:
        spec["inject"] = inject
    base_tags = base.tags
    if spec.pop("_relabelled", False):  # the base's ignore tags no longer describe the case
        base_tags = tuple(t for t in base_tags if not t.startswith("ignore"))
    src.label("bad.kind", kind)
    return Case(family, base.seed, spec, base.arrays, expect=expect, tags=tuple(tags) + base_tags)


def _bad_pairs(family: str | None) -> list[tuple[str, str]]:
    return [(kind, f) for kind, fams in BAD_KINDS.items() for f in fams if family in (None, f)]


def bad_inputs(*, family: str | None = None) -> st.SearchStrategy[Case]:
    """Bad-input cases, each with ``expect`` (see the module docstring) and a ``bad:<kind>`` tag.

    ``family`` restricts them to one family; the kinds are those of :data:`BAD_KINDS`.
    """
    from hypothesis import currently_in_test_context, note
    from hypothesis import strategies as st

    if family is not None:
        _check_family("family", family, FAMILIES)
    pairs = _bad_pairs(family)

    @st.composite
    def draw_bad(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Case:
        src = _HypothesisSource(draw)
        kind, fam = src.choice(pairs)
        case = _build_bad(src, kind, fam)
        if currently_in_test_context():
            note(f"{case!r}: {case.to_json()}")
        return case

    return draw_bad()


# ---- sizes per profile ----------------------------------------------------------------------------
#: Bounds of each family's strategy per profile. ``ci`` fits a 2-core machine with no GPU;
#: ``audit`` reaches sizes where GPU atomics race (up to 100k ids piled onto <= 16 rows).
SIZE_BOUNDS: dict[str, dict[str, dict[str, Any]]] = {
    "ci": {
        "embed": {"min_vocab": 1, "max_vocab": 1000, "min_width": 1, "max_width": 16, "max_ids": 64,
                  "id_dtypes": SIGNED_ID_DTYPES, "w_dtypes": FLOAT_DTYPES, "allow_empty": True},
        "lstm": {"min_batch": 1, "max_batch": 8, "min_len": 1, "max_len": 6, "max_layers": 3,
                 "max_in": 8, "max_hidden": 8, "dtypes": ("float32",), "allow_dropout": True},
        "pipeline": {"min_batch": 1, "max_batch": 8, "min_len": 1, "max_len": 6, "max_layers": 2,
                     "min_vocab": 1, "max_vocab": 1000, "min_width": 1, "max_width": 8,
                     "max_hidden": 8, "dtypes": ("float32",)},
    },
    "dev": {
        "embed": {"min_vocab": 1, "max_vocab": 20_000, "min_width": 1, "max_width": 64, "max_ids": 4096,
                  "id_dtypes": SIGNED_ID_DTYPES, "w_dtypes": FLOAT_DTYPES, "allow_empty": True},
        "lstm": {"min_batch": 1, "max_batch": 32, "min_len": 1, "max_len": 24, "max_layers": 5,
                 "max_in": 32, "max_hidden": 32, "dtypes": ("float32", "float64"), "allow_dropout": True},
        "pipeline": {"min_batch": 1, "max_batch": 16, "min_len": 1, "max_len": 24, "max_layers": 3,
                     "min_vocab": 1, "max_vocab": 20_000, "min_width": 1, "max_width": 32,
                     "max_hidden": 32, "dtypes": ("float32", "float64")},
    },
    "audit": {
        "embed": {"min_vocab": 1, "max_vocab": 50_000, "min_width": 1, "max_width": 64, "max_ids": 100_000,
                  "id_dtypes": SIGNED_ID_DTYPES, "w_dtypes": FLOAT_DTYPES, "allow_empty": True},
        "lstm": {"min_batch": 1, "max_batch": 64, "min_len": 1, "max_len": 64, "max_layers": 5,
                 "max_in": 128, "max_hidden": 128, "dtypes": ("float16", "float32", "float64"),
                 "allow_dropout": True},
        "pipeline": {"min_batch": 1, "max_batch": 64, "min_len": 1, "max_len": 64, "max_layers": 3,
                     "min_vocab": 1, "max_vocab": 50_000, "min_width": 1, "max_width": 64,
                     "max_hidden": 64, "dtypes": ("float16", "float32", "float64")},
    },
    # The envelope of harness.generate.recipes.RECIPES at full scale; the realistic profile draws around the
    # table's rows (recipes.recipe_cases), not uniformly within these bounds.
    "realistic": {
        "embed": {"min_vocab": 1, "max_vocab": 65_000, "min_width": 1, "max_width": 1024, "max_ids": 160_000,
                  "id_dtypes": ("int32",), "w_dtypes": ("float32",), "allow_empty": False},
        "lstm": {"min_batch": 1, "max_batch": 30, "min_len": 1, "max_len": 800, "max_layers": 6,
                 "max_in": 320, "max_hidden": 1024, "dtypes": ("float32",), "allow_dropout": False},
        "pipeline": {"min_batch": 1, "max_batch": 1024, "min_len": 1, "max_len": 151, "max_layers": 2,
                     "min_vocab": 1, "max_vocab": 65_000, "min_width": 1, "max_width": 1024,
                     "max_hidden": 1024, "dtypes": ("float32",)},
    },
}


def bounds_for(profile: str, family: str) -> dict[str, Any]:
    """A copy of :data:`SIZE_BOUNDS` for one profile and family; ``family="all"`` gives
    ``{"embed": {...}, "lstm": {...}, "pipeline": {...}}`` for :func:`any_case`."""
    _check_family("profile", profile, tuple(SIZE_BOUNDS))
    _check_family("family", family, FAMILIES + ("all",))
    if family == "all":
        return {f: dict(SIZE_BOUNDS[profile][f]) for f in FAMILIES}
    return dict(SIZE_BOUNDS[profile][family])


# ---- deterministic corpora --------------------------------------------------------------------------
def _rng(kind: str, family: str, seed: int) -> random.Random:
    # A str seed goes through SHA-512 (random's version 2 seeding): stable across processes,
    # platforms and Python versions, and independent of PYTHONHASHSEED.
    return random.Random(f"harness.{kind}:{family}:{seed}")


def _sample(draw_one: Callable[[_Source], Case], src: _Source, examples: int) -> list[Case]:
    seen: set[str] = set()
    out: list[Case] = []
    attempts = 0
    while len(out) < examples and attempts < 20 * examples + 100:
        attempts += 1
        case = draw_one(src)
        if case.id not in seen:
            seen.add(case.id)
            out.append(case)
    return out


def _check_corpus_args(examples: Any, seed: Any) -> None:
    _check_int("examples", examples, 0)
    _check_int("seed", seed, 0)


def corpus(family: str, *, examples: int, seed: int, profile: str = "ci") -> list[Case]:
    """``examples`` distinct valid cases of ``family``, the same list for the same arguments anywhere.

    Drawn by the builders behind the strategies from ``random.Random`` seeded with the family and
    ``seed`` (not through Hypothesis: see the module docstring), within ``bounds_for(profile,
    family)``; deduplicated by case id, in draw order. ``family="all"`` mixes the three families
    in equal shares (the first families take the remainder), interleaved embed, lstm, pipeline.
    """
    _check_family("family", family, FAMILIES + ("all",))
    _check_corpus_args(examples, seed)
    _check_family("profile", profile, tuple(SIZE_BOUNDS))
    if family == "all":
        shares = [examples // 3 + (1 if i < examples % 3 else 0) for i in range(3)]
        parts = [corpus(f, examples=n, seed=seed, profile=profile) for f, n in zip(FAMILIES, shares)]
        mixed: list[Case] = []
        for i in range(max(map(len, parts), default=0)):
            mixed.extend(p[i] for p in parts if i < len(p))
        return mixed
    bounds = _FAMILY_VALIDATORS[family](**bounds_for(profile, family))
    builder = _FAMILY_BUILDERS[family]
    return _sample(lambda src: builder(src, bounds), _RandomSource(_rng("corpus", family, seed)), examples)


def bad_corpus(*, examples: int, seed: int, family: str | None = None) -> list[Case]:
    """``examples`` distinct bad-input cases, deterministic like :func:`corpus`.

    Kinds go round-robin over :data:`BAD_KINDS` (restricted to ``family``), so every kind appears
    once ``examples`` reaches the number of (kind, family) pairs.
    """
    if family is not None:
        _check_family("family", family, FAMILIES)
    _check_corpus_args(examples, seed)
    pairs = _bad_pairs(family)
    counter = iter(range(10**12))

    def draw_one(src: _Source) -> Case:
        kind, fam = pairs[next(counter) % len(pairs)]
        return _build_bad(src, kind, fam)

    return _sample(draw_one, _RandomSource(_rng("bad", family or "all", seed)), examples)


# ---- support ---------------------------------------------------------------------------------------
def _pattern_of(lengths: Sequence[int]) -> set[str]:
    """The length patterns a list of lengths belongs to."""
    n = len(lengths)
    out = set()
    if len(set(lengths)) == 1:
        out.add("equal")
    if n >= 2 and all(a > b for a, b in zip(lengths, lengths[1:])):
        out.add("decreasing")
    if n >= 2 and all(a < b for a, b in zip(lengths, lengths[1:])):
        out.add("increasing")
    if n >= 3 and list(lengths) not in (sorted(lengths), sorted(lengths, reverse=True)):
        out.add("unsorted")
    if n >= 3 and all(a >= b for a, b in zip(lengths, lengths[1:])) and len(set(lengths)) < n:
        out.add("ties")
    if n >= 2 and max(lengths) > min(lengths) and sorted(lengths)[-2] <= max(min(lengths), max(lengths) // 3):
        out.add("one_long")
    return out


def in_support(family: str, spec: Mapping[str, Any], profile: str = "audit") -> bool:
    """Whether the strategies of ``profile`` can draw a valid case with these parameters (only the keys given
    are checked): the bounds of :data:`SIZE_BOUNDS`, the dtypes, the ignore-label kinds and length patterns."""
    b = bounds_for(profile, family)
    s = dict(spec)
    if family == "embed":
        vocab, width = int(s.get("vocab", 1)), int(s.get("width", 1))
        shape = list(s.get("ids_shape", [1]))
        ok = (b["min_vocab"] <= vocab <= b["max_vocab"] and b["min_width"] <= width <= b["max_width"]
              and 1 <= len(shape) <= 3 and int(np.prod(shape)) <= b["max_ids"]
              and s.get("id_dtype", "int32") in b["id_dtypes"] and s.get("w_dtype", "float32") in b["w_dtypes"])
        il = s.get("ignore_label")
        if il is not None:
            lo = int(np.iinfo(np.dtype(s.get("id_dtype", "int32"))).min)
            ok = ok and (il in (0, vocab - 1) or (il == -1 and lo < 0) or (vocab >= 3 and 1 <= il <= vocab - 2)
                         or vocab <= il <= vocab + 1000 or il == max(-(2**31), lo))
        return bool(ok)
    lengths = [int(n) for n in s.get("lengths", [1])]
    ok = (b["min_batch"] <= len(lengths) <= b["max_batch"] and all(b["min_len"] <= n <= b["max_len"] for n in lengths)
          and 1 <= int(s.get("n_layers", 1)) <= b["max_layers"] and 1 <= int(s.get("hidden", 1)) <= b["max_hidden"]
          and s.get("dtype", "float32") in b["dtypes"] and bool(_pattern_of(lengths)))
    if family == "lstm":
        ok = ok and 1 <= int(s.get("in_size", 1)) <= b["max_in"]
    return bool(ok)
