"""harness/generate/bad_kinds.py: each bad kind is built for each of its families, tagged with its kind and
carrying what a user should expect of it."""

from __future__ import annotations

import pytest

from harness.generate.bad_kinds import BAD_KINDS, bad_pairs, build_bad
from harness.generate.choices import RandomSource
from harness.generate.sampler import seeded_random


def test_the_pairs_are_every_kind_of_every_family_and_filter_by_family() -> None:
    pairs = bad_pairs(None)
    assert len(pairs) == sum(len(f) for f in BAD_KINDS.values()) == len(set(pairs))
    assert bad_pairs("embed") == [p for p in pairs if p[1] == "embed"] and bad_pairs("embed")


@pytest.mark.parametrize("kind, family", bad_pairs(None), ids=lambda v: str(v))
def test_each_bad_case_is_its_family_tagged_with_its_kind_and_says_what_to_expect(kind: str, family: str) -> None:
    case = build_bad(RandomSource(seeded_random("bad", family, 1)), kind, family)
    assert case.family == family and f"bad:{kind}" in case.tags
    assert case.bad and case.expect and case.expect.get("kind")
