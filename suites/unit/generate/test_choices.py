"""harness/generate/choices.py: the choices a builder makes, from a seeded ``random.Random`` (repeatable) or from
Hypothesis (whose simplest choice is the first option)."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import find
from hypothesis import strategies as st

from harness.generate.choices import HypothesisSource, RandomSource


def test_a_random_source_is_repeatable_and_stays_in_range() -> None:
    a, b = RandomSource(random.Random(3)), RandomSource(random.Random(3))
    draws = [a.integer(2, 9) for _ in range(50)]
    assert draws == [b.integer(2, 9) for _ in range(50)] and set(draws) <= set(range(2, 10)) and len(set(draws)) > 3
    assert a.integer(4, 4) == 4 and 0.0 <= a.unit() <= 1.0


def test_choice_and_weighted_never_pick_a_zero_weight() -> None:
    src = RandomSource(random.Random(0))
    assert {src.weighted({"a": 1, "b": 0, "c": 2}) for _ in range(200)} == {"a", "c"}
    assert {src.choice(["x", "y"]) for _ in range(50)} == {"x", "y"}


def test_explicit_ids_lie_in_the_vocabulary_or_are_the_extra_label() -> None:
    ids = RandomSource(random.Random(1)).ids("int32", (5, 8), vocab=4, extra=-1)
    assert ids.shape == (5, 8) and ids.dtype == np.int32
    assert set(np.unique(ids)) <= {-1, 0, 1, 2, 3} and -1 in ids


def test_hypothesis_shrinks_a_choice_to_the_first_option() -> None:
    @st.composite
    def pick(draw):
        return HypothesisSource(draw).choice(["first", "second", "third"])

    assert find(pick(), lambda v: True) == "first"
