"""Every default corpus reaches past the toy sizes (the real-scale cases), and the realistic profile's corpus
is drawn around the recipes with the size boundaries a CPU reaches cheaply."""

from __future__ import annotations

import math

from harness.generate.corpora import PROFILE_CAMPAIGN, default_corpus, gate_corpus, profile_corpus, real_scale_cases
from harness.generate.edges import CHEAP_SIZE_EDGES, edge_kinds
from harness.generate.recipes import recipe_of


def _ids(case) -> int:
    s = case.spec
    return math.prod(s["ids_shape"]) if case.family == "embed" else len(s["lengths"]) * max(s["lengths"])


def test_the_default_gate_corpus_holds_real_scale_cases_of_every_family():
    cases = gate_corpus()
    lstm = [c for c in cases if c.family == "lstm" and max(c.spec["lengths"]) >= 100 and c.spec["hidden"] >= 256]
    decoder = [c for c in cases if c.family == "embed" and _ids(c) * c.spec["vocab"] >= 10_000_000
               and c.spec.get("pad_id") == c.spec["vocab"] - 1 and c.spec.get("ignore_label") is None]
    word_lm = [c for c in cases if c.family == "embed" and c.spec["vocab"] == 65_000]
    pipeline = [c for c in cases if c.family == "pipeline" and c.spec["hidden"] >= 256 and c.spec["vocab"] >= 5000]
    assert lstm and decoder and word_lm and pipeline
    assert any(c.spec.get("bidirectional") and c.spec["hidden"] >= 256 for c in cases if c.family == "lstm")
    # tagged with their configuration and the edges they reach, as a generated case is
    assert all(recipe_of(c) and "edge:lengths:hundreds" in c.tags for c in lstm)
    assert any("edge:pileup:row>=1000" in c.tags for c in decoder)


def test_real_scale_cases_are_sorted_longest_first_and_in_espnets_convention():
    for c in real_scale_cases():
        lengths = c.spec.get("row_lengths", c.spec.get("lengths"))
        assert list(lengths) == sorted(lengths, reverse=True)
        if c.family != "lstm":
            assert c.spec["pad_id"] == c.spec["sos_id"] == c.spec["vocab"] - 1 and "ignore_label" not in c.spec


def test_the_realistic_corpus_draws_around_the_recipes_and_runs_the_cheap_size_boundaries():
    cases = default_corpus(profile="realistic")
    real = {c.id for c in default_corpus() if "real-scale" in c.tags}
    assert real and real <= {c.id for c in cases}  # the default corpus's real-scale cases, and more
    reached = set().union(*(edge_kinds(c) for c in cases))
    assert set(CHEAP_SIZE_EDGES) <= reached
    drawn = [c for c in cases if "scale:slice" in c.tags]
    assert {c.family for c in drawn} == {"embed", "lstm", "pipeline"}
    assert len({recipe_of(c) for c in drawn}) >= 6
    assert PROFILE_CAMPAIGN["realistic"]["repeats"] < 5  # its runs take seconds: fewer repeats than the default


def test_profile_corpus_mixes_the_families_for_all():
    mixed = profile_corpus("all", examples=6, seed=1, profile="realistic")
    assert {c.family for c in mixed} == {"embed", "lstm", "pipeline"} and len(mixed) == 6
    assert [c.id for c in profile_corpus("lstm", examples=2, seed=1, profile="ci")] != \
        [c.id for c in profile_corpus("lstm", examples=2, seed=1, profile="realistic")]


def test_the_campaign_corpora_train_each_model_recipe_a_few_steps_and_the_realistic_its_slice_100():
    from harness.core.schemas import MODEL_RECIPES
    from harness.generate.corpora import campaign_corpus
    from harness.generate.model_cases import TRAJECTORY_STEPS

    assert not [c for c in default_corpus() if c.family == "model"]  # the one-call corpus: its edges, coverage
    for profile, steps in (("ci", TRAJECTORY_STEPS), ("realistic", 100)):
        models = [c for c in campaign_corpus(profile=profile) if c.family == "model"]
        assert sorted(c.spec["recipe"] for c in models) == sorted(MODEL_RECIPES)
        assert {c.spec["steps"] for c in models} == {steps}
        assert all(f"scale:{'slice' if profile == 'realistic' else 'ci'}" in c.tags for c in models)
    assert {c.id for c in campaign_corpus() if c.family == "model"} <= {c.id for c in gate_corpus()}
