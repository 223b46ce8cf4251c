"""harness/generate/tags.py: a tag a contracts file may name is one a generator writes; anything else is one
phrase saying why not."""

from __future__ import annotations

from harness.generate.sampler import bad_corpus
from harness.generate.tags import OPEN_TAG_KINDS, tag_problem


def test_every_tag_every_corpus_writes_is_accepted() -> None:
    """The default, anchor, relation, real-scale, corner and model cases, a bad corpus and a realistic one, each
    with the edge kinds it reaches: a rule may name any tag they carry (each kind of tag among them)."""
    from harness.generate import corpora
    from harness.generate.edges import with_edge_tags
    from harness.generate.model_cases import trajectory_cases
    from harness.generate.recipes import corner_cases

    cases = [*corpora.default_corpus(), *corpora.anchor_cases(), *corpora.relation_cases(),
             *corpora.real_scale_cases(), *corner_cases(), *trajectory_cases("ci"),
             *bad_corpus(examples=60, seed=0), *corpora.profile_corpus("all", examples=20, seed=0, profile="realistic")]
    tags = {t for c in cases for t in with_edge_tags(c).tags}
    assert {t.partition(":")[0] for t in tags} >= {"bad", "ids", "lengths", "grad", "edge", "recipe", "corner",
                                                   "scale", "convention", "anchor", "dropout"}
    assert [t for t in sorted(tags) if tag_problem(t)] == []


def test_a_tag_no_generator_writes_says_why() -> None:
    assert "is not a case tag" in tag_problem("nocolon")
    assert "is no edge: tag" in tag_problem("edge:lstm.steps>=63")  # not a boundary of the steps
    assert "names no kind" in tag_problem("weird:thing")
    assert "is no bad: tag" in tag_problem("bad:not_a_kind")
    assert all(tag_problem(f"{k}:anything") is None for k in OPEN_TAG_KINDS)
