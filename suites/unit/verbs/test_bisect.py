"""The ``bisect`` verb: the case and subject checked before anything else, and an interrupt said without a
``--resume`` it does not have."""

from __future__ import annotations

import pytest

from harness.core.cases import Case
from harness.core.errors import CaseError, UnknownSubject
from harness.upstream import bisect as engine
from harness.verbs import bisect as V


def _opts(tmp_path, subject="chainer.EmbedID", family="embed"):
    spec = {"vocab": 7, "width": 5, "ids_shape": [4]} if family == "embed" else \
        {"n_layers": 1, "in_size": 3, "hidden": 3, "lengths": [2, 1], "dropout": 0.0}
    case = tmp_path / "case.json"
    case.write_text(Case(family, 5, spec).to_json())
    return V.BisectOptions(case=str(case), subject=subject, good={"numpy": "1.0"}, bad={"numpy": "2.0"},
                           cache=str(tmp_path / "cache"), quiet=True)


def _no_engine(monkeypatch):
    ran = []
    monkeypatch.setattr(V, "run_bisection", lambda *a: ran.append(a) or 0)
    return ran


def test_a_case_of_another_family_or_an_unknown_subject_is_refused_before_any_work(tmp_path, monkeypatch):
    ran = _no_engine(monkeypatch)
    with pytest.raises(CaseError, match="takes embed cases"):
        V.bisect(_opts(tmp_path, "chainer.EmbedID", "lstm"))
    with pytest.raises(UnknownSubject, match="nobody.here"):
        V.bisect(_opts(tmp_path, "nobody.here"))
    assert ran == [] and not (tmp_path / "cache").exists()
    assert V.bisect(_opts(tmp_path)) == 0 and len(ran) == 1


def test_an_interrupt_is_130_and_offers_no_resume(tmp_path, monkeypatch, capsys):
    def interrupted(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr(V, "run_bisection", interrupted)
    assert V.bisect(_opts(tmp_path)) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "--resume" not in err and "the same command goes on" in err
    assert engine.Bisection.__dataclass_fields__.keys() <= V.BisectOptions.__dataclass_fields__.keys()
