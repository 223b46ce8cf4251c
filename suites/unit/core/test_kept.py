"""harness/core/kept.py: what a process keeps within a budget (an array cache: bytes), the newest entry always kept."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.kept import ArrayCache, Kept, entry_bytes

#: (operation, key, bytes): add an entry of that many bytes, or ask for a key again
OPS = st.lists(st.tuples(st.sampled_from(["add", "recent"]), st.integers(0, 5), st.integers(0, 64)), max_size=40)


class _Recording(ArrayCache[int]):
    def __init__(self) -> None:
        super().__init__()
        self.dropped: list[int] = []

    def _gone(self, key: int) -> None:
        self.dropped.append(key)


@settings(max_examples=200, deadline=None, database=None)
@given(OPS, st.integers(0, 128))
def test_the_held_bytes_are_the_entries_bytes_and_stay_within_the_limit_but_for_the_newest(ops, limit) -> None:
    cache = _Recording()
    model: dict[int, int] = {}  # what a plain dict keeps, to check that nothing comes back changed
    for op, key, nbytes in ops:
        if op == "add":
            arrays = {"a": np.zeros(nbytes, np.uint8)}
            before = set(cache)
            cache.dropped.clear()
            cache.add(key, arrays, limit)
            model[key] = nbytes
            assert next(reversed(cache)) == key and cache[key] is arrays  # the newest, always kept
            # what went is what is no longer there (a replaced key counts as gone once, then comes back)
            assert set(cache.dropped) - {key} == before - set(cache)
        else:
            got = cache.recent(key)
            if key in cache:
                assert got is cache[key] and next(reversed(cache)) == key
                assert entry_bytes(got) == model[key]
            else:
                assert got is None
        assert cache.held == sum(entry_bytes(v) for v in cache.values())
        assert cache.held <= limit or len(cache) == 1


def test_the_oldest_entries_go_first_and_a_recent_one_stays() -> None:
    cache: ArrayCache[str] = ArrayCache()
    for key in "abc":
        cache.add(key, {"x": np.zeros(10, np.uint8)}, 30)
    assert cache.recent("a") is not None  # now the newest
    cache.add("d", {"x": np.zeros(10, np.uint8)}, 30)
    assert list(cache) == ["c", "a", "d"] and cache.held == 30
    cache.add("e", {"x": np.zeros(100, np.uint8)}, 30)  # larger than the limit alone: kept, alone
    assert list(cache) == ["e"] and cache.held == 100


def test_an_entry_on_a_sparse_mapping_counts_its_whole_size() -> None:
    """A table mapped on pages of its own costs its whole size, written or not: the bound covers what is mapped."""
    from harness.core.sparse_zeros import SPARSE_BYTES, sparse_zeros

    table = sparse_zeros((SPARSE_BYTES // 8 + 512,), np.float64)
    cache: ArrayCache[str] = ArrayCache()
    cache.add("t", {"grad.W": table}, 1 << 40)
    assert cache.held == table.nbytes > SPARSE_BYTES


def test_the_built_inputs_names_of_mapped_draws_go_with_their_entries() -> None:
    """The built-inputs cache keeps, beside each entry, the names of the case's mapped draws: they come and go
    with it, and a lookup returns both together."""
    from harness.core.cases import _BuiltArrays

    cache = _BuiltArrays()
    for i in range(6):
        cache.add(f"c{i}", {"x": np.zeros(10, np.uint8)}, 30, frozenset({f"W{i}"}))
        assert set(cache.mapped) == set(cache)
    assert list(cache) == ["c3", "c4", "c5"]
    arrays, mapped = cache.entry("c3")
    assert mapped == {"W3"} and arrays is cache["c3"] and next(reversed(cache)) == "c3"
    assert cache.entry("c0") is None


def test_kept_values_of_any_cost_and_none_kept_as_a_value() -> None:
    """By count (each value costing 1), the limit is how many are kept; a kept None is told apart from a key
    not kept by the default a lookup gives."""
    kept: Kept[str, str | None] = Kept(lambda value: 1)
    for key in "abcd":
        kept.add(key, None if key == "c" else key.upper(), 2)
    assert list(kept) == ["c", "d"] and kept.held == 2
    missing = object()
    assert kept.recent("c", missing) is None and kept.recent("a", missing) is missing
    assert list(kept) == ["d", "c"]
