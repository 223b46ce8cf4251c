"""``cases --coverage`` (harness.generate.coverage): the configurations reached, and every size boundary either
reached or priced against each device's memory, never left blank."""

from __future__ import annotations

import re

import pytest

from harness.generate.corpora import default_corpus
from harness.generate.coverage import coverage_text, peak_bytes
from harness.generate.edges import SIZE_EDGES, size_edge_cases, size_edge_kinds
from harness.generate.recipes import RECIPES


def _row(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {name} "))


def test_every_boundary_is_reached_or_says_what_it_needs():
    cases = default_corpus(profile="realistic")
    reached = set().union(*(size_edge_kinds(c) for c in cases))
    text = coverage_text(cases, memory={"cpu": 4 << 30})
    for kind in SIZE_EDGES:
        row = _row(text, kind)
        if kind in reached:
            assert "reached" in row
        else:  # priced by its smallest case against the device
            need = peak_bytes(size_edge_cases()[kind], "cpu")
            assert re.search(r"needs [\d.]+ [GM]iB \(has 4\.0 GiB\)", row) if need > 4 << 30 else "fits (" in row
    for r in RECIPES:
        assert f"| {r.name} " in text
    assert re.search(rf"{len(RECIPES)} of {len(RECIPES)} configurations reached", text)


def test_a_corpus_that_reaches_nothing_lists_every_boundary_with_its_need():
    text = coverage_text([], memory={"cpu": 0, "gpu:0": 1 << 50})
    for kind in SIZE_EDGES:
        row = _row(text, kind)
        assert "needs " in row and "(has 0 MiB)" in row  # nothing fits no memory
        assert "fits (" in row  # everything fits a petabyte, and the row says why it was still left out
    assert "0 of 8 size boundaries reached" in text and "0 of" in text.splitlines()[-1]


@pytest.mark.parametrize("kind", sorted(SIZE_EDGES))
def test_each_boundarys_smallest_case_reaches_it(kind):
    assert kind in size_edge_kinds(size_edge_cases()[kind])


def test_the_default_corpus_coverage_shows_its_real_scale_configurations():
    text = coverage_text(default_corpus(), memory={"cpu": 1 << 40})
    assert "espnet1.lm.word" in text
    word = [line for line in text.splitlines() if line.startswith("| espnet1.lm.word ") and "| embed " in line]
    assert word and "vocab 65,000" in word[0]
    assert "reached" in _row(text, "lengths:hundreds") and "reached" in _row(text, "pileup:row>=1000")


@pytest.mark.slow  # seconds of a harness process (pandas, the corpus): CI runs it, `make test` leaves it out
def test_cases_coverage_of_the_realistic_profile_names_configurations_and_boundaries(harness):
    r = harness("cases", "--profile", "realistic", "--coverage", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    for name in [*SIZE_EDGES, *(rec.name for rec in RECIPES)]:
        assert f"| {name} " in r.stdout
    assert "reached" in r.stdout and re.search(r"needs [\d.]+ GiB \(has [\d.]+ GiB\)", r.stdout)
