"""``harness audit``'s options record: parsed values from the command line and from Python, and the rules between
options refused alike by both."""

from __future__ import annotations

import pytest

from harness import cli
from harness.core.argcheck import Shard
from harness.core.errors import InvalidArgument
from harness.verbs.audit import AuditOptions


def test_the_record_built_from_the_command_line_holds_parsed_values(tmp_path):
    out = str(tmp_path / "a.json")
    got = cli.options_of(["audit", "--out", out, "--devices", "cpu", "--contexts", "default,blas1", "--subjects",
                          "chainer.embed_id,espnet.embed_id", "--shard", "1/3"])
    assert (got.devices, got.contexts, got.subjects, got.shard) == (
        ("cpu",), ("default", "blas1"), ("chainer.embed_id", "espnet.embed_id"), Shard(1, 3))
    assert AuditOptions(out=out, devices="cpu", contexts="default,blas1",
                        subjects="chainer.embed_id,espnet.embed_id", shard="1/3") == got
    assert AuditOptions(out=out).devices == ("all",) and AuditOptions(out=out).contexts == ("default",)


def test_a_profile_with_a_corpus_is_refused_alike(tmp_path, capsys):
    corpus, out = tmp_path / "c.jsonl", str(tmp_path / "a.json")
    corpus.write_text("")
    with pytest.raises(InvalidArgument, match="profile='dev' sizes the generated cases") as exc:
        AuditOptions(out=out, profile="dev", corpus=str(corpus))
    code = cli.main(["audit", "--out", out, "--profile", "dev", "--corpus", str(corpus)])
    line = capsys.readouterr().err.strip()
    assert code == 2 and str(exc.value) in line and len(line.splitlines()) == 1


def test_one_repetition_is_refused_from_python_and_from_the_command_line(tmp_path, capsys):
    out = str(tmp_path / "a.json")
    with pytest.raises(InvalidArgument, match="repeats=1 must be >= 2"):
        AuditOptions(out=out, repeats=1)
    with pytest.raises(SystemExit) as ended:
        cli.main(["audit", "--out", out, "--repeats", "1"])
    assert ended.value.code == 2 and "repeats=1 must be >= 2" in capsys.readouterr().err
