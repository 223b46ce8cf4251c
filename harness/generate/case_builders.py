"""The builders of valid cases, one per family: each parameter space written once, over a source of choices.

:func:`build_embed`, :func:`build_lstm` and :func:`build_pipeline` draw one valid case within a family's
bounds (:mod:`harness.generate.strategy_bounds`) from a :class:`~harness.generate.choices.Source`; the Hypothesis
strategies and the seeded corpora both run them. The kinds a builder chose are recorded in ``Case.tags``
(``lengths:unsorted``, ``ignore:oov``, ``ids:empty`` ...) and, inside a Hypothesis test, reported with
:func:`hypothesis.event`. The kinds and their weights are here, where they are drawn: :data:`IGNORE_KINDS`,
:data:`ID_DISTRIBUTIONS`, :data:`GY_KINDS`, :data:`LENGTH_PATTERNS`. Nothing here imports Chainer or CuPy: a
builder only writes a spec, and :func:`harness.core.cases.build_arrays` turns the spec into arrays.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from harness.core.cases import Case, encode_array
from harness.generate.choices import Source
from harness.generate.dimensions import boundaries
from harness.generate.edges import with_edge_tags
from harness.generate.strategy_bounds import ID_RANGE, EmbedBounds, LstmBounds, PipelineBounds

__all__ = ["IGNORE_KINDS", "ID_DISTRIBUTIONS", "GY_KINDS", "LENGTH_PATTERNS", "build_embed", "build_lstm",
           "build_pipeline", "FAMILY_BUILDERS"]

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


# ---- shared builders --------------------------------------------------------------------------
def _ignore_label(src: Source, vocab: int, id_dtype: str) -> tuple[str, int | None]:
    """An ignore-label kind and its value, representable in ``id_dtype``."""
    lo, hi = ID_RANGE[id_dtype]
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


def _ids_shape(src: Source, max_total: int, allow_empty: bool, hot: bool) -> list[int]:
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


def _gy_kind(src: Source) -> str:
    return src.weighted(_GY_WEIGHTS)


def build_embed(src: Source, b: EmbedBounds) -> Case:
    """One valid embed case within ``b`` (see :func:`harness.generate.strategies.embed_cases`)."""
    hot = src.weighted((("mixed", 9), ("hot", 1))) == "hot"
    id_dtype = src.choice(b.eligible_id_dtypes())
    vmax = min(b.max_vocab, ID_RANGE[id_dtype][1] + 1)  # the id dtype must hold vocab - 1
    vocab = (src.integer(b.min_vocab, max(b.min_vocab, min(vmax, 16))) if hot
             else src.sized(b.min_vocab, vmax, boundaries("embed", "vocab")))
    width = src.sized(b.min_width, b.max_width, boundaries("embed", "width"))
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


def _lengths(src: Source, min_batch: int, max_batch: int, min_len: int, max_len: int
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
        return pattern, [src.sized(min_len, max_len, boundaries("lstm", "steps"))] * src.sized(
            min_batch, max_batch, boundaries("lstm", "batch"))
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


def _recurrent(src: Source, spec: dict[str, Any], max_layers: int, max_hidden: int,
               dtypes: Sequence[str], family: str) -> None:
    """The keys lstm and pipeline cases share (layers, hidden, direction, state, dtype, gy)."""
    spec["n_layers"] = src.integer(1, max_layers)
    spec["hidden"] = src.sized(1, max_hidden, boundaries(family, "hidden"))
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


def build_lstm(src: Source, b: LstmBounds) -> Case:
    """One valid lstm case within ``b`` (see :func:`harness.generate.strategies.lstm_cases`)."""
    pattern, lengths = _lengths(src, b.min_batch, b.max_batch, b.min_len, b.max_len)
    spec: dict[str, Any] = {"lengths": lengths, "in_size": src.sized(1, b.max_in, boundaries("lstm", "in_size"))}
    _recurrent(src, spec, b.max_layers, b.max_hidden, b.dtypes, "lstm")
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


def build_pipeline(src: Source, b: PipelineBounds) -> Case:
    """One valid pipeline case within ``b`` (see :func:`harness.generate.strategies.pipeline_cases`)."""
    pattern, lengths = _lengths(src, b.min_batch, b.max_batch, b.min_len, b.max_len)
    vocab = src.sized(b.min_vocab, b.max_vocab, boundaries("pipeline", "vocab"))
    pad_kind = src.choice(("minus_one", "zero", "last"))
    spec: dict[str, Any] = {
        "lengths": lengths, "vocab": vocab,
        "width": src.sized(b.min_width, b.max_width, boundaries("pipeline", "width")),
        "ignore_label": {"minus_one": -1, "zero": 0, "last": vocab - 1}[pad_kind],
        "id_kind": src.weighted((("uniform", 4), ("collision", 2), ("all_equal", 1))),
    }
    if spec["id_kind"] == "collision":
        spec["distinct"] = src.integer(1, min(vocab, 8))
    _recurrent(src, spec, b.max_layers, b.max_hidden, b.dtypes, "pipeline")
    src.label("pipeline.lengths", pattern)
    src.label("pipeline.padding", pad_kind)
    return with_edge_tags(Case("pipeline", src.integer(0, _SEED_MAX), spec,
                               tags=(f"lengths:{pattern}", f"ignore:{pad_kind}", f"ids:{spec['id_kind']}",
                                     f"grad:{spec.get('grad_outputs', 'all')}")))


FAMILY_BUILDERS: dict[str, Callable[[Source, Any], Case]] = {
    "embed": build_embed, "lstm": build_lstm, "pipeline": build_pipeline,
}
