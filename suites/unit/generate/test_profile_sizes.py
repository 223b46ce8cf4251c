"""harness/generate/profile_sizes.py: each profile's bounds, copied out, and whether a spec lies inside what a
profile can draw."""

from __future__ import annotations

from harness.generate.profile_sizes import SIZE_BOUNDS, bounds_for, in_support
from harness.generate.sampler import corpus


def test_bounds_grow_from_ci_to_audit_and_come_out_as_copies() -> None:
    assert bounds_for("ci", "embed")["max_vocab"] <= bounds_for("audit", "embed")["max_vocab"]
    b = bounds_for("ci", "lstm")
    b["max_batch"] = -1
    assert bounds_for("ci", "lstm")["max_batch"] != -1
    assert {"ci", "dev", "audit"} <= set(SIZE_BOUNDS)


def test_every_drawn_case_is_in_the_support_of_its_profile() -> None:
    for family in ("embed", "lstm", "pipeline"):
        for case in corpus(family, examples=15, seed=4, profile="ci"):
            assert in_support(family, case.spec, "ci"), case.spec


def test_a_spec_past_a_bound_is_outside_the_support() -> None:
    big = bounds_for("ci", "embed")["max_vocab"] + 1
    assert in_support("embed", {"vocab": 3, "width": 2, "ids_shape": [4]}, "ci")
    assert not in_support("embed", {"vocab": big, "width": 2, "ids_shape": [4]}, "ci")
    assert not in_support("lstm", {"lengths": [1] * (bounds_for("ci", "lstm")["max_batch"] + 1)}, "ci")
