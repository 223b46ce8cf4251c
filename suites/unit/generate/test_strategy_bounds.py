"""harness/generate/strategy_bounds.py: bounds are validated when made, each problem naming the bound."""

from __future__ import annotations

import pytest

from harness.core.errors import InvalidArgument
from harness.generate.strategy_bounds import (
    ID_RANGE,
    SIGNED_ID_DTYPES,
    UNSIGNED_ID_DTYPES,
    check_dtypes,
    check_order,
    embed_bounds,
    lstm_bounds,
    pipeline_bounds,
)


def test_good_bounds_are_kept() -> None:
    b = embed_bounds(min_vocab=2, max_vocab=7)
    assert (b.min_vocab, b.max_vocab) == (2, 7)
    assert lstm_bounds(max_batch=3).max_batch == 3 and pipeline_bounds(max_len=4).max_len == 4


@pytest.mark.parametrize("make, kwargs, name", [
    (embed_bounds, {"min_vocab": 5, "max_vocab": 2}, "min_vocab"),
    (embed_bounds, {"max_width": 0}, "max_width"),
    (lstm_bounds, {"max_batch": "3"}, "max_batch"),
    (embed_bounds, {"id_dtypes": ("int32", "float32")}, "id_dtypes"),
])
def test_a_bad_bound_is_refused_naming_it(make, kwargs: dict, name: str) -> None:
    with pytest.raises(InvalidArgument, match=name):
        make(**kwargs)


def test_the_checks_and_the_id_ranges() -> None:
    check_order("lo", 1, "hi", 1)
    with pytest.raises(InvalidArgument, match="lo"):
        check_order("lo", 2, "hi", 1)
    assert check_dtypes("d", ["int8"], SIGNED_ID_DTYPES) == ("int8",)
    assert ID_RANGE["int8"] == (-128, 127) and ID_RANGE["uint8"] == (0, 255)
    assert set(ID_RANGE) == set(SIGNED_ID_DTYPES) | set(UNSIGNED_ID_DTYPES)
