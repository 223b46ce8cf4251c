"""harness/verbs/replay.py: ``replay`` runs the reproducer's case in workers: exit 0 where nothing differs; a case
of another family is refused before any run; the defaults of repeats and fresh come from the verb."""

from __future__ import annotations

import pytest

from harness.core.cases import Case
from harness.core.errors import CaseError
from harness.judge.reproducer import Reproducer
from harness.verbs.replay import FRESH, REPEATS, ReplayOptions, replay

CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [20]})


@pytest.fixture
def case_file(tmp_path):
    p = tmp_path / "case.json"
    p.write_text(CASE.to_json())
    return str(p)


def test_a_deterministic_subject_replays_with_exit_0(case_file, capsys) -> None:
    assert replay(ReplayOptions(Reproducer(case_file, "chainer.embed_id", repeats=2))) == 0
    assert "bit-identical" in capsys.readouterr().out


def test_a_case_of_another_family_is_refused_before_any_run(case_file) -> None:
    with pytest.raises(CaseError, match="takes lstm cases"):
        replay(ReplayOptions(Reproducer(case_file, "chainer.NStepLSTM")))


def test_repeats_and_fresh_default_to_the_verbs() -> None:
    opts = ReplayOptions(Reproducer("c.json", "s"))
    assert (opts.repeats, opts.fresh) == (REPEATS, FRESH)
    assert ReplayOptions(Reproducer("c.json", "s", repeats=7, fresh=1)).repeats == 7
