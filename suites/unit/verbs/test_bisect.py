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


def test_pins_and_conditions_are_parsed_once_where_the_command_line_is_read(tmp_path):
    from harness import cli

    case = tmp_path / "case.json"
    case.write_text(Case("embed", 5, {"vocab": 7, "width": 5, "ids_shape": [4]}).to_json())
    got = cli.options_of(["bisect", str(case), "--subject", "chainer.EmbedID", "--good", "NumPy==1.0 chainer==7.8.1",
                          "--good", "espnet==1", "--bad", "numpy==2.0", "--env", "B=2", "--env", "A=1"])
    assert got.good == (("numpy", "1.0"), ("chainer", "7.8.1"), ("espnet", "1")) and got.bad == (("numpy", "2.0"),)
    assert got.env == (("A", "1"), ("B", "2"))
    assert V.BisectCommandOptions(case=str(case), subject="chainer.EmbedID", good=("NumPy==1.0 chainer==7.8.1",
                                  "espnet==1"), bad=("numpy==2.0",), env=("B=2", "A=1")) == got
    asked = got.question()
    assert asked.good == {"numpy": "1.0", "chainer": "7.8.1", "espnet": "1"} and asked.env == got.env


def test_a_condition_pinned_twice_is_refused_alike_from_python_and_the_command_line(tmp_path, capsys):
    from harness import cli
    from harness.core.errors import InvalidArgument

    case = tmp_path / "case.json"
    case.write_text(Case("embed", 5, {"vocab": 7, "width": 5, "ids_shape": [4]}).to_json())
    with pytest.raises(InvalidArgument) as exc:
        V.BisectCommandOptions(case=str(case), env=("A=1", "A=2"))
    assert cli.main(["bisect", str(case), "--subject", "chainer.EmbedID", "--good", "numpy==1", "--bad", "numpy==2",
                     "--env", "A=1", "--env", "A=2"]) == 2
    assert capsys.readouterr().err == f"harness: error: InvalidArgument: {exc.value}\n"
    assert str(exc.value) == "env='A=2': A is pinned twice ('1' and '2')"
