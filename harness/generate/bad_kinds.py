"""Bad inputs: the kinds users hit, each built on a small valid case, and what a user should expect of each.

:data:`BAD_KINDS` names each kind and the families it exists for (a case's tag is ``bad:<kind>``);
:func:`build_bad` plants one kind into a small valid case drawn by the builders of
:mod:`harness.generate.case_builders` and writes what should happen into ``Case.expect``. The Hypothesis
strategy (:func:`harness.generate.strategies.bad_inputs`) and the seeded bad corpus
(:func:`harness.generate.sampler.bad_corpus`) both run it.

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
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

from harness.core.cases import Case, lstm_weight_shapes
from harness.generate.case_builders import build_embed, build_lstm, build_pipeline
from harness.generate.choices import Source
from harness.generate.strategy_bounds import (
    ID_RANGE,
    SIGNED_ID_DTYPES,
    UNSIGNED_ID_DTYPES,
    EmbedBounds,
    LstmBounds,
    PipelineBounds,
)

__all__ = ["BAD_KINDS", "build_bad", "bad_pairs"]


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

_BAD_EMBED = EmbedBounds(min_vocab=1, max_vocab=100, min_width=1, max_width=8, max_ids=16,
                         id_dtypes=SIGNED_ID_DTYPES, w_dtypes=("float32",), allow_empty=False,
                         explicit=False)
_BAD_LSTM = LstmBounds(min_batch=1, max_batch=4, min_len=1, max_len=5, max_layers=2, max_in=6,
                       max_hidden=6, dtypes=("float32",), allow_dropout=False)
_BAD_PIPELINE = PipelineBounds(min_batch=1, max_batch=4, min_len=1, max_len=5, max_layers=2, min_vocab=1,
                               max_vocab=100, min_width=1, max_width=6, max_hidden=6, dtypes=("float32",))


def _nonfinite(src: Source) -> str:
    return src.choice(("nan", "inf", "-inf"))


def _without_ignore(spec: dict[str, Any], src: Source, choices: Sequence[Any]) -> None:
    """Replace the ignore label by one of ``choices`` (so it cannot be the planted bad id)."""
    spec["ignore_label"] = src.choice(tuple(choices))
    if spec["ignore_label"] is None:
        spec.pop("ignore_frac", None)
    spec["_relabelled"] = True


def build_bad(src: Source, kind: str, family: str) -> Case:
    """One bad-input case of ``kind`` (a key of :data:`BAD_KINDS`) and ``family``, with its ``expect``."""
    tags = [f"bad:{kind}"]
    inject: list[dict[str, Any]] = []
    if family == "embed":
        base = build_embed(src, _BAD_EMBED if kind != "w_dtype_espnet" else
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
            if ID_RANGE[spec["id_dtype"]][1] < vocab + k:
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
        base = build_lstm(src, _BAD_LSTM) if family == "lstm" else build_pipeline(src, _BAD_PIPELINE)
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


def bad_pairs(family: str | None) -> list[tuple[str, str]]:
    """Every (kind, family) of :data:`BAD_KINDS`, of one family or (None) of all."""
    return [(kind, f) for kind, fams in BAD_KINDS.items() for f in fams if family in (None, f)]
