"""harness/generate/case_builders.py: a builder draws a valid case of its family inside the bounds it is given,
the same case for the same choices."""

from __future__ import annotations

import random

from harness.generate.case_builders import FAMILY_BUILDERS, build_embed, build_lstm
from harness.generate.choices import RandomSource
from harness.generate.strategy_bounds import embed_bounds, lstm_bounds


def _src(seed: int) -> RandomSource:
    return RandomSource(random.Random(seed))


def test_an_embed_case_stays_inside_its_bounds() -> None:
    b = embed_bounds(min_vocab=2, max_vocab=9, min_width=1, max_width=4, max_ids=12)
    for seed in range(30):
        spec = build_embed(_src(seed), b).spec
        assert 2 <= spec["vocab"] <= 9 and 1 <= spec["width"] <= 4
        n = 1
        for d in spec["ids_shape"]:
            n *= d
        assert n <= 12


def test_an_lstm_case_stays_inside_its_bounds() -> None:
    b = lstm_bounds(min_batch=1, max_batch=3, min_len=1, max_len=4, max_layers=2, max_hidden=5, max_in=3)
    for seed in range(30):
        spec = build_lstm(_src(seed), b).spec
        assert 1 <= len(spec["lengths"]) <= 3 and all(1 <= n <= 4 for n in spec["lengths"])
        assert 1 <= spec["n_layers"] <= 2 and 1 <= spec["hidden"] <= 5 and 1 <= spec["in_size"] <= 3


def test_the_same_choices_build_the_same_case_and_other_choices_other_cases() -> None:
    b = embed_bounds(max_vocab=50, max_width=8, max_ids=20)
    assert build_embed(_src(5), b).to_json() == build_embed(_src(5), b).to_json()
    assert len({build_embed(_src(s), b).id for s in range(10)}) > 5
    assert set(FAMILY_BUILDERS) == {"embed", "lstm", "pipeline"}
