"""The recipe dimensions (harness.generate.recipes.DIMENSIONS): each size a real model runs at is reached by one
cheap corner case of the default corpus, its boundaries are edge kinds, the builders draw on both sides of them,
and ``cases --coverage`` reports each dimension against its recipe maximum."""

from __future__ import annotations

import random

import pytest

from harness.core.cases import Case
from harness.core.cost import estimate
from harness.generate.choices import RandomSource
from harness.generate.corpora import default_corpus, real_scale_cases
from harness.generate.coverage import coverage_text
from harness.generate.dimensions import SIZE_CASE_RUNS, dimension_value, size_case_runs
from harness.generate.edges import edge_cases, edge_kinds
from harness.generate.recipes import DIMENSIONS, SLICE_PEAK, corner_cases, full_length_cases, recipes_for

_IDS = [f"{d.family}.{d.name}" for d in DIMENSIONS]


def _row(text: str, family: str, name: str) -> list[str]:
    """The cells of the dimension table's row of ``family``'s ``name``."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:2] == [family, name]:
            return cells
    raise AssertionError(f"no row {family} {name}")


@pytest.fixture(scope="module")
def corpus() -> list[Case]:
    return default_corpus()


@pytest.fixture(scope="module")
def coverage(corpus) -> str:
    return coverage_text(corpus, memory={"cpu": 1 << 40})


@pytest.mark.parametrize("d", DIMENSIONS, ids=_IDS)
def test_the_default_corpus_reaches_each_dimensions_recipe_maximum_and_coverage_says_so(d, corpus, coverage):
    assert d.maximum > 0 and d.top <= d.maximum
    largest = max(dimension_value(c, d.name) for c in corpus if c.family == d.family)
    assert largest >= d.maximum
    _, _, shown, maximum, crossed, _, status, _ = _row(coverage, d.family, d.name)
    # the table counts a pile-up from the built ids, at least the spec's bound read here
    assert int(shown.replace(",", "")) >= largest and (maximum, status) == (f"{d.maximum:,}", "reached")
    assert d.kind(d.top).split(">=")[1] in crossed.split(", ")


@pytest.mark.parametrize("d", DIMENSIONS, ids=_IDS)
def test_each_dimension_has_a_corner_case_at_its_maximum_with_the_others_small(d):
    [corner] = [c for c in corner_cases() if f"corner:{d.family}.{d.name}" in c.tags]
    assert dimension_value(corner, d.name) >= d.maximum
    assert estimate(corner).peak < 512 << 20  # a small case in every other way: a fraction of a GiB
    at_max = {o.name for o in DIMENSIONS if o.family == d.family and dimension_value(corner, o.name) >= o.maximum}
    made_for = {t.split(".", 1)[1] for t in corner.tags if t.startswith(f"corner:{d.family}.")}
    # only what one real batch ties together rises with it (ids, their padding, the batch and length that hold them)
    assert at_max == made_for and (made_for == {d.name} or made_for <= {"ids", "pileup", "batch", "steps"})


def test_the_maxima_are_the_recipe_tables_own():
    steps = next(d for d in DIMENSIONS if (d.family, d.name) == ("lstm", "steps"))
    assert steps.maximum == max(r.max_len[1] for r in recipes_for("lstm"))
    ids = next(d for d in DIMENSIONS if (d.family, d.name) == ("embed", "ids"))
    assert ids.maximum == max(r.batch[1] * r.max_len[1] for r in recipes_for("embed"))


@pytest.mark.parametrize("d", DIMENSIONS, ids=_IDS)
def test_every_boundary_is_an_edge_kind_crossed_at_its_value(d):
    [corner] = [c for c in corner_cases() if f"corner:{d.family}.{d.name}" in c.tags]
    kinds = edge_kinds(corner)
    for b in d.boundaries:
        assert (d.kind(b) in kinds) == (dimension_value(corner, d.name) >= b)
        assert f"edge:{d.kind(b)}" in corner.tags or b > d.maximum


def test_a_small_case_crosses_no_dimension_boundary():
    for c in edge_cases():
        assert not any(">=" in k and k.split(".")[0] in ("embed", "lstm", "pipeline") for k in edge_kinds(c))


def test_sized_draws_land_on_both_sides_of_a_boundary_inside_the_range():
    src = RandomSource(random.Random(3))
    drawn = {src.sized(1, 1000, near=(512,)) for _ in range(3000)}
    assert {511, 512} <= drawn


def test_a_boundary_outside_the_range_leaves_the_draws_as_they_were():
    plain, near = RandomSource(random.Random(5)), RandomSource(random.Random(5))
    assert [plain.sized(1, 8) for _ in range(200)] == [near.sized(1, 8, near=(64, 512)) for _ in range(200)]


def test_the_realistic_corpus_runs_encoders_at_their_longest_sequences_within_the_memory_slice():
    cases = default_corpus(profile="realistic")
    longest = max(max(c.spec["lengths"]) for c in cases if c.family == "lstm")
    assert longest >= 500
    for c in full_length_cases():
        assert estimate(c).peak <= SLICE_PEAK
        recipe = next(r for r in recipes_for("lstm") if f"recipe:{r.name}" in c.tags)
        assert max(c.spec["lengths"]) == recipe.max_len[1]  # the length is never cut


def test_a_corpus_below_a_maximum_says_what_its_corner_would_need():
    text = coverage_text(edge_cases(), memory={"cpu": 1 << 20})
    status = _row(text, "lstm", "steps")[6]
    assert "needs " in status and "(has 1 MiB)" in status
    roomy = _row(coverage_text(edge_cases(), memory={"cpu": 1 << 40}), "lstm", "steps")[6]
    assert "left out of this corpus: its corner case fits" in roomy


def _corner(name: str) -> Case:
    return next(c for c in corner_cases() if f"corner:{name}" in c.tags)


def test_a_corner_runs_fewer_times_and_not_where_only_blas_threads_change_and_no_product_splits():
    steps, hidden = _corner("lstm.steps"), _corner("lstm.hidden")
    # 800 steps at hidden 4: every product is far below OpenBLAS's threading sizes; the thread count cannot matter
    for ctx in ("blas1", "blas2"):
        r, f, why = size_case_runs(steps, ctx, "cpu", 5, 2)
        assert why is not None and f"{ctx} changes only BLAS's thread count" in why and "not judged" not in why
    assert size_case_runs(steps, "default", "cpu", 5, 2) == (*SIZE_CASE_RUNS, None)
    assert size_case_runs(steps, "debug", "cpu", 5, 2) == (*SIZE_CASE_RUNS, None)  # Chainer's config: not a BLAS matter
    # hidden 1,024: the hidden-to-hidden product is split across threads, so each BLAS context is asked
    assert size_case_runs(hidden, "blas2", "cpu", 5, 2) == (*SIZE_CASE_RUNS, None)
    assert size_case_runs(steps, "default", "cpu", 1, 0) == (1, 0, None)  # never more than the campaign asks
    # a GPU's runs, and every case that is not a corner, keep the campaign's
    assert size_case_runs(steps, "default", "gpu", 5, 2) == (5, 2, None)
    # a real model's shapes are size cases too: an encoder's products split, an embedding multiplies nothing
    encoder = next(c for c in real_scale_cases() if c.family == "lstm")
    decoder = next(c for c in real_scale_cases() if c.family == "embed")
    assert size_case_runs(encoder, "blas1", "cpu", 5, 2) == (*SIZE_CASE_RUNS, None)
    assert size_case_runs(decoder, "blas1", "cpu", 5, 2)[2] is not None
    anchor = next(c for c in default_corpus() if "blas-split" in c.tags)
    tiny = next(c for c in edge_cases() if c.family == "lstm")
    assert size_case_runs(anchor, "blas1", "cpu", 5, 2) == size_case_runs(tiny, "blas1", "cpu", 5, 2) == (5, 2, None)


def test_coverage_says_which_contexts_each_corner_runs_in_and_which_it_leaves_out(coverage):
    steps, hidden = _row(coverage, "lstm", "steps")[7], _row(coverage, "lstm", "hidden")[7]
    assert steps.startswith("default, debug: 2 + 1 fresh runs") and "not blas1, blas2" in steps
    assert hidden.startswith("default, blas1, blas2, debug: 2 + 1 fresh runs") and "not " not in hidden
