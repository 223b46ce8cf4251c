"""tools/mutants: each mutant is a plug-in that replaces one real subject and undoes its patch (the kill table
itself is ``make mutants``, not part of ``make test``)."""

from __future__ import annotations

import pytest

from harness.core.compat import import_chainer
from harness.subjects.registry import get_subject, load_plugin, register
from tools.mutants.plugin import MUTANTS


def test_at_least_twelve_documented_mutants():
    assert len(MUTANTS) >= 12
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    assert all(len(m.bug) > 30 for m in MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_a_mutant_replaces_its_subject_and_restores_what_it_patches(mutant):
    real = get_subject(mutant.subject)
    try:
        (sub,) = load_plugin(f"tools.mutants.plugin:{mutant.name}")
        assert sub.name == real.name and sub.family == real.family and sub.run is not real.run
        assert get_subject(mutant.subject).description.startswith("MUTANT")
    finally:
        register(real, replace=True)
    chainer = import_chainer()
    before = (chainer.backward, chainer.functions.permutate, chainer.functions.n_step_lstm, chainer.Link.cleargrads)
    with mutant.patch():
        pass
    after = (chainer.backward, chainer.functions.permutate, chainer.functions.n_step_lstm, chainer.Link.cleargrads)
    assert before == after
