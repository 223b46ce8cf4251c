"""harness.core.argcheck: an output never overwrites an input (by device and inode, links included), for every
verb that writes one, refused in one line with exit 2 before any work."""

from __future__ import annotations

import os

import pytest

from harness.core import argcheck
from harness.core.cases import Case, write_corpus
from harness.core.errors import InvalidArgument

CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [40], "id_kind": "collision", "distinct": 2})


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    write_corpus([CASE], str(path))
    return path


def test_same_file_sees_through_hard_and_symbolic_links(corpus, tmp_path) -> None:
    os.link(corpus, tmp_path / "hard")
    os.symlink(corpus, tmp_path / "soft")
    (tmp_path / "copy").write_bytes(corpus.read_bytes())
    assert argcheck.same_file(str(tmp_path / "hard"), str(corpus))
    assert argcheck.same_file(str(tmp_path / "soft"), str(corpus))
    assert not argcheck.same_file(str(tmp_path / "copy"), str(corpus))
    assert not argcheck.same_file(str(tmp_path / "absent"), str(corpus))


def test_a_directory_output_is_refused_only_where_it_writes_an_input(tmp_path) -> None:
    (tmp_path / "compare.md").write_text("x")
    (tmp_path / "a.json").write_text("x")
    with pytest.raises(InvalidArgument, match=r"out='.*' would overwrite the input a=.*compare\.md"):
        argcheck.outputs_apart({"out": (str(tmp_path), ("compare.md",))}, {"a": str(tmp_path / "compare.md")})
    argcheck.outputs_apart({"out": (str(tmp_path), ("compare.md",))}, {"a": str(tmp_path / "a.json")})


def test_a_file_inside_an_input_directory_is_an_input(tmp_path) -> None:
    base = tmp_path / "baseline"
    (base / "arrays").mkdir(parents=True)
    (base / "arrays" / "t.npz").write_bytes(b"x")
    with pytest.raises(InvalidArgument, match="junit=.* would overwrite the input baseline="):
        argcheck.outputs_apart({"junit": (str(base / "arrays" / "t.npz"), None)}, {"baseline": str(base)})


def _verbs(corpus, tmp_path):
    """(verb argv, the input the output names) for every verb with an output option."""
    os.symlink(corpus, tmp_path / "link.jsonl")
    os.link(corpus, tmp_path / "hard.jsonl")
    link, hard = str(tmp_path / "link.jsonl"), str(tmp_path / "hard.jsonl")
    audit = tmp_path / "compare.md"
    audit.write_text("{}")
    c = str(corpus)
    return {
        "cases": ["cases", "--coverage", "--corpus", c, "--out", link],
        "gate-junit": ["gate", "--corpus", c, "--junit", hard],
        "gate-contracts": ["gate", "--contracts", c, "--junit", link],
        "shrink": ["shrink", c, "--case-id", CASE.id, "--subject", "chainer.embed_id", "--kind", "repeat",
                   "--out", hard],
        "audit": ["audit", "--corpus", c, "--out", link],
        "compare": ["compare", str(audit), c, "--out", str(tmp_path)],
        "merge": ["merge", c, str(tmp_path / "merge.md"), "--out", str(tmp_path)],
    }


@pytest.mark.parametrize("verb", ["cases", "gate-junit", "gate-contracts", "shrink", "audit", "compare", "merge"])
def test_every_verb_refuses_an_output_over_its_input(verb, corpus, tmp_path, capsys) -> None:
    from harness.cli import main

    argv = _verbs(corpus, tmp_path)[verb]
    if verb == "merge":
        os.link(corpus, tmp_path / "merge.md")
    before = corpus.read_bytes()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "would overwrite the input" in err[0], err
    assert corpus.read_bytes() == before
