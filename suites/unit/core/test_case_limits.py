"""harness/core/case_limits.py: a case's input bytes from its spec alone, the limit and its refusal in one line."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.core.case_limits import (
    MAX_CASE_BYTES_ENV,
    check_case_family,
    check_case_size,
    estimate_case_bytes,
    max_case_bytes_default,
)
from harness.core.cases import Case, build_arrays
from harness.core.errors import CaseError, InvalidArgument

EMBED = Case("embed", 1, {"vocab": 5, "width": 3, "ids_shape": [4, 2]})
LSTM = Case("lstm", 2, {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [3, 2]})


@pytest.mark.parametrize("case", [EMBED, LSTM], ids=["embed", "lstm"])
def test_the_estimate_is_at_least_the_bytes_the_built_arrays_hold(case: Case) -> None:
    built = sum(a.nbytes for a in build_arrays(case).values())
    assert estimate_case_bytes(case) >= built > 0


def test_the_estimate_grows_with_the_shape_and_costs_nothing_for_a_huge_one() -> None:
    small = estimate_case_bytes(EMBED)
    bigger = estimate_case_bytes(Case("embed", 1, {"vocab": 5, "width": 3, "ids_shape": [40, 2]}))
    assert bigger > small
    # a shape no machine holds: only the spec is read (a CaseShape, not a Case, so nothing validates its size)
    huge = SimpleNamespace(id="huge", family="embed", arrays={},
                           spec={"vocab": 30000, "width": 30000, "ids_shape": [30000, 30000]})
    assert estimate_case_bytes(huge) > 30000 * 30000 * 30000


def test_a_case_over_the_limit_is_one_line_naming_the_limit() -> None:
    est = check_case_size(EMBED, limit=10**9)
    assert est == estimate_case_bytes(EMBED)
    with pytest.raises(CaseError) as info:
        check_case_size(EMBED, limit=est - 1)
    msg = str(info.value)
    assert "\n" not in msg and MAX_CASE_BYTES_ENV in msg and f"{est - 1:,}" in msg


def test_the_limit_comes_from_the_environment_and_a_bad_value_is_refused(monkeypatch) -> None:
    monkeypatch.setenv(MAX_CASE_BYTES_ENV, "12345")
    assert max_case_bytes_default() == 12345
    for bad in ("0", "-3", "lots"):
        monkeypatch.setenv(MAX_CASE_BYTES_ENV, bad)
        with pytest.raises(InvalidArgument, match=MAX_CASE_BYTES_ENV):
            max_case_bytes_default()
    monkeypatch.delenv(MAX_CASE_BYTES_ENV)
    assert max_case_bytes_default() >= 1 << 20


def test_a_case_of_another_family_is_refused_naming_both() -> None:
    check_case_family(EMBED, "embed", "chainer.embed_id")
    with pytest.raises(CaseError, match="is a lstm case; subject='chainer.embed_id' takes embed cases"):
        check_case_family(LSTM, "embed", "chainer.embed_id")
