"""harness/verbs/replay.py: ``replay`` runs the reproducer's case in workers: exit 0 where nothing differs, 1 where
a run differs; a case of another family is refused before any run; repeats and fresh default to the verb's."""

from __future__ import annotations

import pytest

from harness.core.cases import Case
from harness.core.errors import CaseError
from harness.judge.reproducer import Reproducer
from harness.verbs.replay import FRESH, REPEATS, ReplayOptions, replay

#: ids that collide in two rows: the nondeterministic control's shuffled sums differ run to run
CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [400], "id_kind": "collision", "distinct": 2})


@pytest.fixture
def case_file(tmp_path):
    p = tmp_path / "case.json"
    p.write_text(CASE.to_json())
    return str(p)


def test_nothing_differs_is_exit_0_and_a_difference_exit_1(case_file) -> None:
    assert replay(ReplayOptions(Reproducer(case_file, "chainer.embed_id", repeats=2))) == 0
    assert replay(ReplayOptions(Reproducer(case_file, "control.nondeterministic", repeats=3))) == 1


def test_a_case_of_another_family_is_refused_before_any_run(case_file) -> None:
    with pytest.raises(CaseError, match="takes lstm cases"):
        replay(ReplayOptions(Reproducer(case_file, "chainer.NStepLSTM")))


def test_repeats_and_fresh_default_to_the_verbs() -> None:
    opts = ReplayOptions(Reproducer("c.json", "s"))
    assert (opts.repeats, opts.fresh) == (REPEATS, FRESH)
    assert ReplayOptions(Reproducer("c.json", "s", repeats=7, fresh=1)).repeats == 7
