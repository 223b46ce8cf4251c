"""harness/verbs/subjects.py: ``harness subjects`` lists every registered subject, as JSON when asked."""

from __future__ import annotations

import json

from harness.subjects.registry import SUBJECTS
from harness.verbs.subjects import SubjectsOptions, subjects


def test_every_registered_subject_is_listed(capsys) -> None:
    assert subjects(SubjectsOptions(json=True)) == 0
    listed = json.loads(capsys.readouterr().out)
    names = {s["name"] for s in listed} if isinstance(listed, list) else set(listed)
    assert {n for n, s in SUBJECTS.items() if not n.startswith(("misbehaving.", "secondrun."))} <= names
    assert subjects(SubjectsOptions()) == 0
    assert "chainer.embed_id" in capsys.readouterr().out
