"""``harness gate``'s options record: the devices held parsed, and the rules between options refused alike from
Python and from the command line.

harness/verbs/gate.py: the gate refuses bad input before any work, and on a tiny corpus runs its campaign and
says 0 when every contract holds."""

from __future__ import annotations

import os

import pytest

from harness import cli
from harness.core.cases import Case
from harness.core.corpus_files import write_corpus
from harness.core.errors import HarnessError, InvalidArgument
from harness.verbs.gate import GateOptions, gate


def test_the_devices_are_held_as_names_from_the_command_line_and_from_python():
    assert cli.options_of(["gate", "--devices", "cpu,all"]).devices == ("cpu", "all")
    assert GateOptions(devices="cpu,all") == cli.options_of(["gate", "--devices", "cpu,all"])
    assert GateOptions().devices == ("all",)


def test_a_profile_with_a_corpus_is_refused_alike(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("")
    with pytest.raises(InvalidArgument) as exc:
        GateOptions(profile="dev", corpus=str(corpus))
    code = cli.main(["gate", "--profile", "dev", "--corpus", str(corpus)])
    line = capsys.readouterr().err.strip()
    assert code == 2 and str(exc.value) in line and len(line.splitlines()) == 1


def test_a_device_that_is_no_device_is_refused_alike(capsys):
    with pytest.raises(InvalidArgument) as exc:
        GateOptions(devices="cpu,tpu")
    with pytest.raises(SystemExit) as ended:
        cli.main(["gate", "--devices", "cpu,tpu"])
    line = capsys.readouterr().err.strip()
    assert ended.value.code == 2 and str(exc.value) in line and len(line.splitlines()) == 1


def test_bad_devices_or_an_empty_corpus_are_refused_before_any_work(tmp_path) -> None:
    out = tmp_path / "run"
    with pytest.raises(HarnessError, match="devices|device"):
        gate(GateOptions(devices="tpu", out=str(out), quiet=True))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(HarnessError, match="holds no cases"):
        gate(GateOptions(devices="cpu", corpus=str(empty), out=str(out), quiet=True))
    assert not out.exists()


@pytest.mark.slow  # a gate campaign over every subject, in workers: seconds
def test_a_tiny_gate_holds_and_writes_its_junit(tmp_path) -> None:
    corpus = tmp_path / "c.jsonl"  # ids that collide: the positive control diverges, so the gate can fail
    write_corpus([Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [400], "id_kind": "collision",
                                     "distinct": 2})], str(corpus))
    junit = tmp_path / "gate.xml"
    rc = gate(GateOptions(devices="cpu", corpus=str(corpus), out=str(tmp_path / "run"), junit=str(junit),
                          repeats=2, fresh=0, shrink=False, quiet=True))
    assert rc == 0 and os.path.getsize(junit) > 0
