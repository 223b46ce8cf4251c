"""Gate: a change past any one recipe dimension's last boundary fails the default gate.

For each dimension of :data:`harness.generate.recipes.DIMENSIONS`, a planted subject
(``suites/plugins/planted_dims.py``: a shipped subject whose first output is scaled by 1.01 only where that one size
reaches the dimension's last boundary below the recipes' maximum) runs on the default gate corpus's cheapest case
that crosses the boundary, which must break its contract, and on its cheapest real-size case below it (a corner
of another dimension), which must not: the
failure comes from the size alone, and the default corpus reaches it.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest

from harness.core.devices import CPU
from harness.generate.dimensions import dimension_value
from harness.generate.recipes import DIMENSIONS
from harness.pytest_plugin import contract_violations

pytestmark = pytest.mark.gate


@functools.lru_cache(maxsize=1)
def _gate_corpus() -> tuple:
    from harness.core.cost import estimate
    from harness.generate.corpora import default_corpus

    return tuple(sorted((c for c in default_corpus() if not c.bad), key=lambda c: estimate(c).work))


@pytest.fixture
def plant(request, contracts, monkeypatch):
    """The planted subject of one dimension, registered for this test alone, under its shipped subject's
    contract lines; returns (subject name, contracts)."""
    import importlib

    from harness.subjects import registry

    planted_dims = importlib.import_module("suites.plugins.planted_dims")  # registers nothing on import
    d = request.param
    subject = planted_dims.planted(d)
    monkeypatch.setitem(registry.SUBJECTS, subject.name, None)  # undone after the test: the name leaves again
    registry.register(subject, replace=True)
    shipped = planted_dims.SHIPPED[d.family][0]
    lines = tuple(dataclasses.replace(c, subject=subject.name) for c in contracts.contracts if c.subject == shipped)
    assert lines, f"no contract line of {shipped} to plant under"
    return d, subject.name, dataclasses.replace(contracts, contracts=contracts.contracts + lines)


@pytest.mark.parametrize("plant", DIMENSIONS, ids=[f"{d.family}.{d.name}" for d in DIMENSIONS], indirect=True)
def test_a_change_past_a_dimensions_last_boundary_fails_the_default_gate(plant):
    from harness.subjects.registry import get_subject

    d, name, contracts = plant
    subject = get_subject(name)
    mine = [c for c in _gate_corpus() if c.family == d.family and subject.applies_to(c)]
    crossing = [c for c in mine if dimension_value(c, d.name) >= d.top]
    # below: a real-scale or corner case (the edge cases' own rules, an empty batch's among them, are not this test's)
    below = [c for c in mine if dimension_value(c, d.name) < d.top and {"corner", "real-scale"} & set(c.tags)]
    assert crossing, f"no case of the default gate corpus reaches {d.family}.{d.name} >= {d.top}"
    assert below, f"every {d.family} case of the default gate corpus crosses {d.name} >= {d.top}"
    broken = contract_violations(contracts, name, crossing[0], CPU, repeats=2)
    assert broken and all(v.subject == name for v in broken), \
        f"{name} on {crossing[0]!r} ({d.name} {dimension_value(crossing[0], d.name)}) kept its contract"
    assert contract_violations(contracts, name, below[0], CPU, repeats=2) == [], \
        f"{name} broke below {d.name} {d.top}: the plant is not gated on the size"
