"""harness/core/corpus_files.py: a corpus is canonical JSON lines; one case is found in a file or a corpus, and
every problem of a file is one line naming it."""

from __future__ import annotations

import pytest

from harness.core.cases import Case
from harness.core.corpus_files import corpus_digest, load_case_file, load_corpus, write_corpus
from harness.core.errors import CaseError

A = Case("embed", 1, {"vocab": 5, "width": 3, "ids_shape": [4]})
B = Case("lstm", 2, {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [3, 2]})


def test_a_written_corpus_loads_as_the_same_cases_and_the_same_digest(tmp_path) -> None:
    path = tmp_path / "c.jsonl"
    assert write_corpus([A, B], str(path)) == 2
    back = load_corpus(str(path))
    assert [c.to_json() for c in back] == [A.to_json(), B.to_json()]
    assert corpus_digest(back) == corpus_digest([A, B]) != corpus_digest([B, A])


def test_one_case_comes_from_a_single_case_file_or_by_id_from_a_corpus(tmp_path) -> None:
    one, many = tmp_path / "one.json", tmp_path / "many.jsonl"
    one.write_text(A.to_json())
    write_corpus([A, B], str(many))
    assert load_case_file(str(one)).id == A.id
    assert load_case_file(str(many), B.id).id == B.id
    with pytest.raises(CaseError, match="holds 2 cases"):
        load_case_file(str(many))
    with pytest.raises(CaseError, match="is not in"):
        load_case_file(str(one), B.id)


def test_bad_files_are_one_line_naming_file_and_line(tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(A.to_json() + "\n{not json\n")
    with pytest.raises(CaseError) as info:
        load_corpus(str(bad))
    assert f"{bad}:2:" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(CaseError, match="is a directory"):
        load_corpus(str(tmp_path))
    with pytest.raises(CaseError, match="does not exist"):
        load_case_file(str(tmp_path / "missing.json"))
