"""harness/generate/tags.py: a tag a contracts file may name is one a generator writes; anything else is one
phrase saying why not."""

from __future__ import annotations

from harness.generate.sampler import bad_corpus, corpus
from harness.generate.tags import OPEN_TAG_KINDS, tag_problem


def test_the_bad_ids_lengths_and_grad_tags_the_generators_write_are_accepted() -> None:
    cases = [*corpus("all", examples=30, seed=0), *bad_corpus(examples=30, seed=0)]
    tags = {t for c in cases for t in c.tags if t.partition(":")[0] in ("bad", "ids", "lengths", "grad")}
    assert {t.partition(":")[0] for t in tags} == {"bad", "ids", "lengths", "grad"}
    assert all(tag_problem(t) is None for t in tags), [t for t in tags if tag_problem(t)]


def test_a_tag_no_generator_writes_says_why() -> None:
    assert "is not a case tag" in tag_problem("nocolon")
    assert "names no kind" in tag_problem("weird:thing")
    assert "is no bad: tag" in tag_problem("bad:not_a_kind")
    assert all(tag_problem(f"{k}:anything") is None for k in OPEN_TAG_KINDS)
