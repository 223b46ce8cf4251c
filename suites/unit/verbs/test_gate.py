"""``harness gate``'s options record: the devices held parsed, and the rules between options refused alike from
Python and from the command line."""

from __future__ import annotations

import pytest

from harness import cli
from harness.core.errors import InvalidArgument
from harness.verbs.gate import GateOptions


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
