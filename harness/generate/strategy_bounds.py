"""The bounds of each family's strategy, validated eagerly, and the id dtypes a valid case may use.

Every strategy takes keyword-only bounds that are validated *when it is called* (before anything is drawn); a
bad bound raises :class:`~harness.core.errors.InvalidArgument` naming the argument and its value, in
Hypothesis's style (``min_len=9 is larger than max_len=4``). :func:`embed_bounds`, :func:`lstm_bounds` and
:func:`pipeline_bounds` turn the keyword arguments into the frozen records (:class:`EmbedBounds` ...) the
builders read; the ``check_*`` helpers are the one way an argument of this package is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from harness.core.cases import FLOAT_DTYPES
from harness.core.errors import InvalidArgument

__all__ = ["SIGNED_ID_DTYPES", "UNSIGNED_ID_DTYPES", "ID_RANGE", "EmbedBounds", "LstmBounds", "PipelineBounds",
           "embed_bounds", "lstm_bounds", "pipeline_bounds", "FAMILY_VALIDATORS", "check_int", "check_order",
           "check_bool", "check_dtypes", "check_family"]

SIGNED_ID_DTYPES = ("int8", "int16", "int32", "int64")
UNSIGNED_ID_DTYPES = ("uint8", "uint16", "uint32", "uint64")
ID_RANGE = {name: (int(np.iinfo(name).min), int(np.iinfo(name).max))
            for name in SIGNED_ID_DTYPES + UNSIGNED_ID_DTYPES}


# ---- eager validation -------------------------------------------------------------------------
def check_int(name: str, value: Any, minimum: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be an int")
    if minimum is not None and value < minimum:
        raise InvalidArgument(f"{name}={value!r} must be at least {minimum}")
    return value


def check_order(lo_name: str, lo: int, hi_name: str, hi: int) -> None:
    if lo > hi:
        raise InvalidArgument(f"{lo_name}={lo!r} is larger than {hi_name}={hi!r}")


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be a bool")
    return value


def check_dtypes(name: str, value: Any, allowed: Sequence[str], hint: str = "") -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise InvalidArgument(f"{name}={value!r} must be a tuple of dtype names")
    if not value:
        raise InvalidArgument(f"{name}={value!r} must not be empty")
    for v in value:
        if v not in allowed:
            raise InvalidArgument(f"{name}={value!r} contains {v!r}, which is not one of "
                                  f"{', '.join(allowed)}{hint}")
    return tuple(dict.fromkeys(value))  # drop repeats, keep order


def check_family(name: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise InvalidArgument(f"{name}={value!r} is not one of {', '.join(map(str, allowed))}")
    return value


@dataclass(frozen=True)
class EmbedBounds:
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
        return tuple(d for d in self.id_dtypes if ID_RANGE[d][1] + 1 >= self.min_vocab)


@dataclass(frozen=True)
class LstmBounds:
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
class PipelineBounds:
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


def embed_bounds(*, min_vocab: int = 1, max_vocab: int = 50_000, min_width: int = 1, max_width: int = 64,
                 max_ids: int = 1024, id_dtypes: Sequence[str] = SIGNED_ID_DTYPES,
                 w_dtypes: Sequence[str] = FLOAT_DTYPES, allow_empty: bool = True) -> EmbedBounds:
    check_int("min_vocab", min_vocab, 1)
    check_int("max_vocab", max_vocab, 1)
    check_order("min_vocab", min_vocab, "max_vocab", max_vocab)
    check_int("min_width", min_width, 1)
    check_int("max_width", max_width, 1)
    check_order("min_width", min_width, "max_width", max_width)
    check_int("max_ids", max_ids, 1)
    ids = check_dtypes("id_dtypes", id_dtypes, SIGNED_ID_DTYPES,
                       " (unsigned and float ids are bad inputs: see bad_inputs)")
    ws = check_dtypes("w_dtypes", w_dtypes, FLOAT_DTYPES)
    check_bool("allow_empty", allow_empty)
    b = EmbedBounds(min_vocab, max_vocab, min_width, max_width, max_ids, ids, ws, allow_empty)
    if not b.eligible_id_dtypes():
        widest = max(ids, key=lambda d: ID_RANGE[d][1])
        raise InvalidArgument(f"min_vocab={min_vocab!r} is larger than any of id_dtypes={tuple(ids)!r} "
                              f"can index ({widest} holds ids up to {ID_RANGE[widest][1]})")
    return b


def lstm_bounds(*, min_batch: int = 1, max_batch: int = 64, min_len: int = 1, max_len: int = 32,
                max_layers: int = 3, max_in: int = 32, max_hidden: int = 32,
                dtypes: Sequence[str] = ("float32",), allow_dropout: bool = True) -> LstmBounds:
    check_int("min_batch", min_batch, 1)
    check_int("max_batch", max_batch, 1)
    check_order("min_batch", min_batch, "max_batch", max_batch)
    check_int("min_len", min_len, 1)
    check_int("max_len", max_len, 1)
    check_order("min_len", min_len, "max_len", max_len)
    check_int("max_layers", max_layers, 1)
    check_int("max_in", max_in, 1)
    check_int("max_hidden", max_hidden, 1)
    dts = check_dtypes("dtypes", dtypes, FLOAT_DTYPES)
    check_bool("allow_dropout", allow_dropout)
    return LstmBounds(min_batch, max_batch, min_len, max_len, max_layers, max_in, max_hidden, dts,
                      allow_dropout)


def pipeline_bounds(*, min_batch: int = 1, max_batch: int = 16, min_len: int = 1, max_len: int = 16,
                    max_layers: int = 3, min_vocab: int = 1, max_vocab: int = 10_000, min_width: int = 1,
                    max_width: int = 32, max_hidden: int = 32, dtypes: Sequence[str] = ("float32",)
                     ) -> PipelineBounds:
    check_int("min_batch", min_batch, 1)
    check_int("max_batch", max_batch, 1)
    check_order("min_batch", min_batch, "max_batch", max_batch)
    check_int("min_len", min_len, 1)
    check_int("max_len", max_len, 1)
    check_order("min_len", min_len, "max_len", max_len)
    check_int("max_layers", max_layers, 1)
    check_int("min_vocab", min_vocab, 1)
    check_int("max_vocab", max_vocab, 1)
    check_order("min_vocab", min_vocab, "max_vocab", max_vocab)
    if max_vocab > ID_RANGE["int32"][1] + 1:
        raise InvalidArgument(f"max_vocab={max_vocab!r} is larger than int32 ids can index "
                              f"({ID_RANGE['int32'][1] + 1})")
    check_int("min_width", min_width, 1)
    check_int("max_width", max_width, 1)
    check_order("min_width", min_width, "max_width", max_width)
    check_int("max_hidden", max_hidden, 1)
    dts = check_dtypes("dtypes", dtypes, FLOAT_DTYPES)
    return PipelineBounds(min_batch, max_batch, min_len, max_len, max_layers, min_vocab, max_vocab,
                          min_width, max_width, max_hidden, dts)


FAMILY_VALIDATORS: dict[str, Callable[..., Any]] = {
    "embed": embed_bounds, "lstm": lstm_bounds, "pipeline": pipeline_bounds,
}
