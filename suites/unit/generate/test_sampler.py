"""harness/generate/sampler.py: seeded corpora without Hypothesis, distinct by id, the same for the same
arguments, with every bad kind in round-robin."""

from __future__ import annotations

import pytest

from harness.core.errors import InvalidArgument
from harness.generate.bad_kinds import bad_pairs
from harness.generate.choices import RandomSource
from harness.generate.sampler import bad_corpus, corpus, sample_distinct, seeded_random


def test_a_corpus_is_distinct_and_the_same_for_the_same_seed() -> None:
    a = corpus("embed", examples=12, seed=1)
    assert len(a) == 12 == len({c.id for c in a})
    assert [c.id for c in corpus("embed", examples=12, seed=1)] == [c.id for c in a]
    assert [c.id for c in corpus("embed", examples=12, seed=2)] != [c.id for c in a]


def test_all_interleaves_the_families() -> None:
    mixed = corpus("all", examples=7, seed=0)
    assert [c.family for c in mixed[:3]] == ["embed", "lstm", "pipeline"] and len(mixed) == 7


def test_a_bad_corpus_reaches_every_pair_once_it_is_long_enough() -> None:
    pairs = bad_pairs("lstm")
    cases = bad_corpus(examples=len(pairs), seed=0, family="lstm")
    assert {t for c in cases for t in c.tags if t.startswith("bad:")} == {f"bad:{k}" for k, _ in pairs}


def test_sampling_gives_up_where_the_space_is_smaller_than_asked() -> None:
    one = corpus("embed", examples=1, seed=0)[0]
    assert sample_distinct(lambda src: one, RandomSource(seeded_random("corpus", "embed", 0)), 5) == [one]


@pytest.mark.parametrize("kwargs, name", [({"family": "nope", "examples": 1, "seed": 0}, "family"),
                                          ({"family": "embed", "examples": -1, "seed": 0}, "examples"),
                                          ({"family": "embed", "examples": 1, "seed": -2}, "seed")])
def test_bad_arguments_are_refused_naming_them(kwargs: dict, name: str) -> None:
    with pytest.raises(InvalidArgument, match=name):
        corpus(**kwargs)
