"""``--profile ci|dev|audit`` on report, gate and audit: the same names as pytest's, sizing the generated cases."""

from __future__ import annotations

import json

import pytest

from harness.core.corpus_files import load_corpus
from harness.generate.corpora import campaign_corpus, default_corpus


def test_dev_profile_corpus_is_larger_and_drawn_at_dev_sizes():
    ci, dev = default_corpus(profile="ci"), default_corpus(profile="dev")
    assert len(dev) > len(ci)
    assert {c.id for c in default_corpus(2, profile="dev")} != {c.id for c in default_corpus(2, profile="ci")}


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_report_profile_dev_runs_the_dev_corpus_and_records_it(harness, tmp_path):
    out = tmp_path / "run"
    r = harness("report", "--profile", "dev", "--examples", "1", "--subjects", "control.deterministic",
                "--devices", "cpu", "--contexts", "default", "--fresh", "0", "--repeats", "1", "--relations",
                "none", "--no-shrink", "--no-localize", "--quiet", "--out", str(out), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((out / "campaign.json").read_text())["profile"] == "dev"
    ran = {c.id for c in load_corpus(str(out / "corpus.jsonl"))}
    assert ran == {c.id for c in campaign_corpus(1, profile="dev")}  # the one-call corpus and the model cases


def test_a_profile_with_a_corpus_is_one_line(harness, tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(default_corpus(1)[0].to_json() + "\n")
    r = harness("gate", "--profile", "dev", "--corpus", str(corpus), "--devices", "cpu")
    assert r.returncode == 2 and "profile='dev'" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_audit_profile_dev_audits_the_dev_corpus_and_records_it(harness, tmp_path):
    out = tmp_path / "a.json"
    r = harness("audit", "--profile", "dev", "--subjects", "control.deterministic", "--devices", "cpu", "--quiet",
                "--out", str(out), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    corpus = json.loads(out.read_text())["corpus"]
    dev = default_corpus(profile="dev")
    assert corpus["path"] == "profile:dev" and corpus["cases"] == len(dev)
    from harness.core.corpus_files import corpus_digest

    assert corpus["digest"] == corpus_digest(dev)
    r = harness("audit", "--profile", "dev", "--corpus", str(out), "--out", str(tmp_path / "b.json"))
    assert r.returncode == 2 and "profile='dev'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
