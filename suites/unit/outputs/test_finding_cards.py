"""harness/outputs/finding_cards.py: each finding's card says how large it is and links only files the run left;
one card per headline holds its lead finding and the rest beneath."""

from __future__ import annotations

from harness.outputs.finding_cards import finding_items, headline_items, size_lines
from suites.unit.outputs.test_render import _findings, _view


def test_a_value_finding_says_its_worst_element_and_difference() -> None:
    f = next(f for f in _findings() if f.worst.kind == "oracle")
    labels = dict(size_lines(f))
    assert labels["worst element"].startswith("1.6 against 1.5999997") and "absolute difference" in labels


def test_links_point_only_to_files_the_run_left() -> None:
    bare = finding_items(_view())
    assert all(i["links"] == [] for i in bare)
    with_files = finding_items(_view(files=("findings.csv", "divergence.png")))
    assert all(("findings.csv row 1", "findings.csv#row=2") == i["links"][0] for i in with_files[:1])
    assert any(("divergence.png", "divergence.png") in i["links"] for i in with_files)


def test_each_headline_card_holds_its_lead_and_the_rest() -> None:
    v = _view()
    items = finding_items(v)
    cards = headline_items(v, items)
    assert len(cards) == len(v.headlines())
    shown = [c["f"].id for c in cards] + [r["f"].id for c in cards for r in c["rest"]]
    assert sorted(shown) == sorted(i["f"].id for i in items)
