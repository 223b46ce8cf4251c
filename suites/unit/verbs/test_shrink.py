"""harness/verbs/shrink.py: ``shrink`` refuses a kind it cannot shrink before any run, and says exit 1 where the
finding does not reproduce on the case given."""

from __future__ import annotations

import pytest

from harness.core.cases import Case
from harness.core.errors import InvalidArgument
from harness.judge.reproducer import Reproducer
from harness.verbs.shrink import ShrinkOptions, shrink

CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [20]})


@pytest.fixture
def case_file(tmp_path):
    p = tmp_path / "case.json"
    p.write_text(CASE.to_json())
    return str(p)


@pytest.mark.parametrize("kind, needle", [("no such kind", "is not a finding kind"),
                                          ("baseline changed", "cannot shrink"), ("error", "needs --error")])
def test_a_kind_that_cannot_shrink_is_refused_before_any_run(case_file, kind: str, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=needle):
        shrink(ShrinkOptions(Reproducer(case_file, "chainer.embed_id", kind=kind), quiet=True))


def test_a_finding_that_does_not_reproduce_is_exit_1_and_writes_nothing(case_file, tmp_path, capsys) -> None:
    out = tmp_path / "min.json"
    r = Reproducer(case_file, "control.deterministic", kind="not reproducible run to run")
    assert shrink(ShrinkOptions(r, out=str(out), quiet=True)) == 1
    assert "does not reproduce" in capsys.readouterr().err and not out.exists()
