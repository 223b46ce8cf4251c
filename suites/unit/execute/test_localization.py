"""Localization as a record and as a request: the record's JSON round trip and its one-line cause, and the
request a child answers with the same record the calling process would compute."""

from __future__ import annotations

import json

import pytest

from harness.core.cases import Case
from harness.core.errors import SetupError
from harness.execute.hooks import ArrayDigest, Event, Stream
from harness.execute.localization import Localization, align, localize_in_child, localize_reproducer, localize_request
from harness.judge.reproducer import Reproducer

CASE = Case("embed", 1, {"vocab": 6, "width": 5, "ids_shape": [4, 7], "id_kind": "collision", "distinct": 2})


def _d(tag: str, shape: tuple[int, ...] = (2,)) -> ArrayDigest:
    return ArrayDigest(tag * 8, shape, "float32")


def _ev(step: int, label: str, ins: str, outs: str, phase: str = "forward", parent: int | None = None) -> Event:
    return Event(step, phase, label, step, tuple(_d(c) for c in ins), tuple(f"x[{i}]" for i in range(len(ins))),
                 tuple(_d(c) for c in outs), tuple(f"y[{i}]" for i in range(len(outs))), parent)


def _diverging() -> Localization:
    """A localization with a root, an inner root, a node downstream and differing final outputs."""
    a = Stream("one", (_ev(0, "A", "a", "b"), _ev(1, "B", "b", "c", "backward"), _ev(2, "In", "b", "k", parent=1),
                       _ev(3, "C", "c", "d")), {"out": _d("z"), "grad": _d("g")}, "ok")
    b = Stream("two", (_ev(0, "A", "a", "b"), _ev(1, "B", "b", "X", "backward"), _ev(2, "In", "b", "K", parent=1),
                       _ev(3, "C", "X", "Y")), {"out": _d("w"), "grad": _d("g")}, "ok")
    return align(a, b)


def test_a_localization_survives_its_json_round_trip():
    loc = _diverging()
    assert loc.root is not None and loc.inside_root is not None and loc.downstream and loc.outputs_differ
    back = Localization.from_dict(json.loads(json.dumps(loc.to_dict())))
    assert back == loc
    assert back.message() == loc.message() and back.diverged
    missing = Event(0, "forward", "A", -1, (ArrayDigest(None, None, None),), ("x[0]",), (), (), None, False)
    assert Event.from_dict(json.loads(json.dumps(missing.to_dict()))) == missing


def test_the_cause_is_the_root_line_without_its_label():
    loc = _diverging()
    root_line = next(ln for ln in loc.message().splitlines() if ln.startswith("Root cause: "))
    assert loc.cause() == root_line.removeprefix("Root cause: ")
    same = align(Stream("one", (_ev(0, "A", "a", "b"),), {"out": _d("z")}, "ok"),
                 Stream("two", (_ev(0, "A", "a", "b"),), {"out": _d("z")}, "ok"))
    assert same.root is None and same.cause() == same.message().splitlines()[0]


@pytest.fixture()
def case_file(tmp_path):
    path = tmp_path / "case.json"
    path.write_text(CASE.to_json())
    return str(path)


def test_a_request_answered_in_a_child_is_the_record_computed_here(case_file):
    r = Reproducer(case=case_file, subject="chainer.embed_id", repeats=2)
    here = localize_reproducer(r)
    assert localize_in_child(r, timeout=240) == here
    assert Localization.from_dict(localize_request(r.to_dict())) == here
    assert here.compared > 0 and not here.diverged


def test_a_request_the_child_refuses_is_one_line_naming_why(case_file):
    with pytest.raises(SetupError, match=r"^localize: UnknownSubject: .*no\.such\.subject") as info:
        localize_in_child(Reproducer(case=case_file, subject="no.such.subject"), timeout=240)
    assert "\n" not in str(info.value)


def test_the_child_builds_the_case_under_the_users_case_limit(case_file):
    r = Reproducer(case=case_file, subject="chainer.embed_id", repeats=2)
    tight = localize_in_child(r, timeout=240, max_case_bytes=100)  # 100 bytes: under what the case needs
    assert tight.compared == 0 and "CaseError in setup" in tight.note and "limit of 100 bytes" in tight.note
    assert localize_in_child(r, timeout=240, max_case_bytes=1 << 20).compared > 0  # enough: it runs
