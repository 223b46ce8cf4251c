"""harness/verbs/cases.py: ``harness cases`` writes a profile's corpus (or prints it), the same for the same seed."""

from __future__ import annotations

import json

from harness.core.corpus_files import load_corpus
from harness.verbs.cases import CasesOptions, cases


def test_the_corpus_is_written_and_the_same_seed_prints_the_same_cases(tmp_path, capsys) -> None:
    out = tmp_path / "c.jsonl"
    assert cases(CasesOptions(family="embed", examples=3, seed=5, out=str(out))) == 0
    written = load_corpus(str(out))
    assert len(written) == 3 and {c.family for c in written} == {"embed"}
    capsys.readouterr()
    assert cases(CasesOptions(family="embed", examples=3, seed=5)) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [c.to_dict() for c in written] == printed


def test_coverage_prints_what_a_corpus_reaches(tmp_path, capsys) -> None:
    out = tmp_path / "c.jsonl"
    cases(CasesOptions(family="all", examples=6, seed=0, out=str(out)))
    capsys.readouterr()
    assert cases(CasesOptions(coverage=True, corpus=str(out))) == 0
    assert capsys.readouterr().out.strip()
