"""The realistic profile's table (harness.generate.recipes): its rows cite their sources, and the cases drawn
around them keep each configuration's conventions (ESPnet: no ignore label, sos first and eos padding, both
V - 1; Chainer: padding and ignore label -1), sorted longest first, at the recipe's widths."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from harness.core.cases import FAMILIES, build_arrays
from harness.generate.recipes import (
    RECIPES,
    SLICE_STEP_WEIGHTS,
    SLICE_TABLE,
    draw_recipe_case,
    full_case,
    recipe_cases,
    recipe_corpus,
    recipe_of,
    recipes_for,
    step_weights,
)

_BY_NAME = {r.name: r for r in RECIPES}


def _check_conventions(case) -> None:
    """The conventions of the configuration ``case`` was drawn around, checked on its built arrays."""
    recipe = _BY_NAME[recipe_of(case)]
    s = case.spec
    if case.family == "lstm":
        assert s["in_size"] in recipe.in_size  # the recipe's feature widths (83: filterbanks + pitch)
        assert recipe.hidden[0] <= s["hidden"] <= recipe.hidden[1]
        assert bool(s.get("bidirectional")) == recipe.bidirectional
        assert list(s["lengths"]) == sorted(s["lengths"], reverse=True)  # longest first
        return
    vocab = s["vocab"]
    assert recipe.vocab[0] <= vocab <= recipe.vocab[1]
    lengths = list(s["row_lengths"] if case.family == "embed" else s["lengths"])
    assert lengths == sorted(lengths, reverse=True)
    x = _ids(case)
    if case.family == "pipeline":
        assert recipe.hidden[0] <= s["hidden"] <= recipe.hidden[1]
    for i, n in enumerate(lengths):
        row = x[i]
        if recipe.convention == "espnet":
            assert s.get("ignore_label") is None and s["pad_id"] == s["sos_id"] == vocab - 1
            assert row[0] == vocab - 1  # sos
            assert (row[n:] == vocab - 1).all()  # eos padding: ids the embedding really adds, no ignore label
            assert ((row[1:n] >= 0) & (row[1:n] < vocab)).all()
        else:
            assert s["ignore_label"] == -1 and (row[n:] == -1).all()
            assert ((row[:n] >= 0) & (row[:n] < vocab)).all()


def _ids(case) -> np.ndarray:
    """The case's ids as a run builds them (from a narrow copy where the case is large: the last test checks
    that they are the same)."""
    from harness.generate.edges import built_ids

    shape = case.spec["ids_shape"] if case.family == "embed" else [len(case.spec["lengths"]), max(case.spec["lengths"])]
    return built_ids(case)[1].reshape(shape)


def test_every_row_cites_its_source_and_has_ordered_ranges():
    for r in RECIPES:
        assert "/" in r.source and len(r.source) > 40, r.name  # names a file of the recipe or the code
        assert set(r.families) <= set(FAMILIES) and r.convention in ("espnet", "chainer")
        for lo, hi in (r.hidden, r.layers, r.vocab, r.batch, r.max_len):
            assert lo <= hi, r.name


def test_the_table_holds_the_recipes_published_sizes():
    """The numbers the profile exists for: an encoder at 320-1,024 units over 83 features, a 5,000-unit BPE
    decoder, the word LM's 65,000 words at 1,000 units."""
    enc = _BY_NAME["espnet1.asr.encoder.blstm"]
    assert enc.hidden == (320, 1024) and 83 in enc.in_size and enc.layers == (4, 6) and enc.bidirectional
    assert _BY_NAME["espnet1.asr.decoder.bpe"].vocab[0] <= 5000 <= _BY_NAME["espnet1.asr.decoder.bpe"].vocab[1]
    word = _BY_NAME["espnet1.lm.word"]
    assert word.vocab == (65000, 65000) and word.hidden == (1000, 1000) and word.batch == (300, 600)


@pytest.mark.parametrize("family", ["embed", "lstm", "pipeline"])
def test_a_seeded_corpus_keeps_every_configurations_conventions(family):
    cases = recipe_corpus(family, examples=2 * len(recipes_for(family)), seed=3)
    assert {recipe_of(c) for c in cases} == {r.name for r in recipes_for(family)}  # every row in turn
    for c in cases:
        _check_conventions(c)
    again = recipe_corpus(family, examples=2 * len(recipes_for(family)), seed=3)
    assert [c.id for c in again] == [c.id for c in cases]


@pytest.mark.parametrize("family", ["lstm", "pipeline"])
def test_slices_stay_within_the_cpu_budget_and_reach_real_sizes(family):
    cases = recipe_corpus(family, examples=12, seed=5)
    for c in cases:
        s = c.spec
        width = s["in_size"] if family == "lstm" else s["width"]
        fits = step_weights(s["lengths"], width, s["hidden"], s["n_layers"], bool(s.get("bidirectional")))
        assert fits <= SLICE_STEP_WEIGHTS or s["hidden"] == _BY_NAME[recipe_of(c)].hidden[0]
        assert len(s["lengths"]) >= 2  # a ragged batch, not one sequence
    assert max(c.spec["hidden"] for c in cases) >= 320
    if family == "lstm":
        assert max(max(c.spec["lengths"]) for c in cases) >= 100


def test_embedding_tables_are_capped_but_the_vocabulary_is_not():
    cases = recipe_corpus("embed", examples=15, seed=7)
    assert any(c.spec["vocab"] == 65000 for c in cases)
    for c in cases:
        assert c.spec["vocab"] * c.spec["width"] <= SLICE_TABLE


def test_cases_are_drawn_around_the_rows_not_only_at_their_corners():
    cases = recipe_corpus("lstm", examples=10, seed=11)
    corners = {v for r in recipes_for("lstm") for v in r.hidden}
    assert len({c.spec["hidden"] for c in cases}) >= 4
    assert any(c.spec["hidden"] not in corners for c in cases)


@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large))
@given(case=recipe_cases("embed"))
def test_the_hypothesis_strategy_keeps_the_conventions_too(case):
    _check_conventions(case)


def test_full_scale_cases_take_the_whole_batch_and_layers():
    r = _BY_NAME["espnet1.asr.encoder.blstm"]
    full = full_case(r, "lstm")
    assert len(full.spec["lengths"]) == r.batch[1] and full.spec["n_layers"] == r.layers[1]
    import random

    from harness.generate.choices import RandomSource

    drawn = draw_recipe_case(RandomSource(random.Random(1)), r, "lstm", scale="full")
    assert r.batch[0] <= len(drawn.spec["lengths"]) <= r.batch[1] and drawn.spec["n_layers"] >= r.layers[0]


def test_a_padded_batch_without_pad_or_ignore_label_is_refused_in_one_line():
    from harness.core.cases import Case
    from harness.core.errors import CaseError

    case = Case("embed", 1, {"vocab": 5, "width": 2, "ids_shape": [2, 3], "row_lengths": [3, 1]})
    with pytest.raises(CaseError, match="row_lengths"):
        build_arrays(case)
    padded = build_arrays(Case("embed", 1, {**case.spec, "pad_id": 4}))["x"]
    assert (padded[1, 1:] == 4).all() and not np.array_equal(padded, build_arrays(case.__class__(
        "embed", 1, {**case.spec, "pad_id": 4, "sos_id": 0}))["x"])


def test_a_large_cases_edges_are_found_from_the_same_ids_a_run_builds():
    """edges.built_ids builds a large case one wide: its ids must be the very ids of the case itself."""
    from harness.core.case_limits import estimate_case_bytes
    from harness.generate.edges import _NARROW_BYTES, built_ids

    for family in ("embed", "pipeline"):
        case = next(c for c in recipe_corpus(family, examples=6, seed=2) if estimate_case_bytes(c) > _NARROW_BYTES)
        assert np.array_equal(built_ids(case)[1], build_arrays(case)["x"].astype(np.float64).ravel())
