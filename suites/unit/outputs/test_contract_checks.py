"""A contracts file that contradicts itself, or names what nothing produces, is refused with its line and the
reason: by the schema when it is read (ContractError), or by contract_checks.problems (``contracts check``,
``gate``)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from harness.core.contexts import CONTEXTS
from harness.core.errors import ContractError
from harness.judge.contracts import load_contracts
from harness.outputs.contract_checks import problems, refusal
from harness.subjects.registry import SUBJECTS

ROOT = Path(__file__).resolve().parents[3]
BASE = (ROOT / "contracts.toml").read_text()
LINE = '\n[[contract]]\nsubject = "chainer.embed_id"\ndevice = "cpu"\ncontext = "blas1"\nreason = "r"\n'
DEFECT = '\n[[known_defect]]\nsubjects = ["chainer.embed_id"]\nreason = "r"\nreference = "x"\n'


def _problems(tmp_path, text, subjects=SUBJECTS):
    p = tmp_path / "c.toml"
    p.write_text(text)
    try:
        return problems(load_contracts(p), subjects, CONTEXTS)
    except ContractError as exc:
        return [str(exc)]


def _line_of(text: str, needle: str) -> int:
    return text[:text.rindex(needle)].count("\n") + 1


@pytest.mark.parametrize("text, needle, reason", [
    (BASE.replace("version = 1\n", "version = 1.0\n", 1), "version = 1.0", r"\$\.version=1\.0 is not supported"),
    (BASE + LINE + 'reproducible = false\ninvariant_under = ["order"]\n', "[[contract]]",
     r"invariant_under=\[\"order\"\] must be \[\] where reproducible is false"),
    (BASE + LINE.replace('"cpu"', '"gpu"') + 'reproducible = true\ninvariant_under = ["order"]\n', "[[contract]]",
     r"declares itself not reproducible there"),
    (BASE + LINE + 'reproducible = true\nidentical_across = ["blas1"]\n', "[[contract]]",
     r"names the line's own context='blas1'"),
    (BASE + LINE + 'reproducible = true\nidentical_across = ["*"]\n', "[[contract]]",
     r"identical_across\[0\]='\*' must name a context"),
    (BASE + '\n[[bad_input]]\ntag = "bad:w_rank"\noutcome = "no_error"\nerrors = []\nreason = "r"\n', "[[bad_input]]",
     r"errors=\[\] applies to outcome = 'raises' only"),
    (BASE + DEFECT + 'tags = ["ids:empty"]\nwrong = ["grad.Q"]\n', "[[known_defect]]", r"'grad\.Q' is no tensor"),
    (BASE + DEFECT + 'tags = ["bad:nope"]\nerror = "ValueError"\nphase = "forward"\n', "[[known_defect]]",
     r"'bad:nope' is no bad: tag a generator writes"),
    (BASE + '\n[[bad_input]]\ntag = "colour:red"\noutcome = "no_error"\nreason = "r"\n', "[[bad_input]]",
     r"tag='colour:red' names no kind of tag"),
    (BASE + DEFECT + 'tags = ["ids:empty"]\nerror = "it broke!"\nphase = "forward"\n', "[[known_defect]]",
     r"error='it broke!' must be an exception's name"),
])
def test_a_self_contradicting_or_never_applying_contract_is_refused_with_its_line_and_reason(tmp_path, text,
                                                                                                needle, reason):
    problems = _problems(tmp_path, text)
    assert len(problems) == 1, problems
    line = _line_of(text, needle)
    got = problems[0]
    assert re.search(reason, got), got
    at = int(re.search(r"c\.toml:(\d+)", got).group(1))
    assert line <= at <= line + 8, (line, got)  # the table's header or the key's own line
    assert "\n" not in refusal(problems)


EMBED = '\n[[contract]]\nsubject = "chainer.embed_id"\ndevice = "cpu"\ncontext = "blas1"\nreason = "r"\n'
CPU_ONLY = '\n[[contract]]\nsubject = "plugin.cpu_only"\ndevice = "cpu"\ncontext = "*"\nreason = "r"\n'
ESPNET_DEFECT = ('\n[[known_defect]]\nsubjects = ["espnet.embed_id"]\nreason = "r"\nreference = "x"\n'
                 'tags = ["ids:empty"]\nerror = "ValueError"\nphase = "backward"\n')


@pytest.mark.parametrize("text, needle, reason", [
    (BASE + EMBED + 'reproducible = true\ninvariant_under = ["padding"]\n', "[[contract]]",
     r"relation 'padding' makes no related case of a embed subject"),
    (BASE + EMBED.replace('"blas1"', '"debug"') + 'reproducible = true\nidentical_across = ["cudnn_deterministic"]\n',
     "[[contract]]", r"context 'cudnn_deterministic' never runs on device='cpu'"),
    (BASE.replace('subject = "control.nondeterministic"\ndevice = "cpu"\ncontext = "*"',
                  'subject = "control.nondeterministic"\ndevice = "cpu"\ncontext = "debug"', 1)
     + '\n[[contract]]\nsubject = "control.nondeterministic"\ndevice = "cpu"\ncontext = "*"\nreproducible = true\n'
       'identical_across = ["debug"]\nreason = "r"\n', 'identical_across = ["debug"]',
     r"context 'debug' is not reproducible for control\.nondeterministic on cpu"),
    (BASE + DEFECT.replace('["chainer.embed_id"]', "[]") + 'tags = ["ids:empty"]\nerror = "ValueError"\n'
     'phase = "backward"\n', "[[known_defect]]", r"subjects=\[\] names no subject"),
    (BASE + DEFECT.replace('"chainer.embed_id"', '"oracle.embed"') + 'tags = ["ids:empty"]\nerror = "ValueError"\n'
     'phase = "backward"\n', "[[known_defect]]", r"oracle\.embed is an oracle"),
    (BASE + CPU_ONLY + DEFECT.replace('"chainer.embed_id"', '"plugin.cpu_only"') + 'device = "gpu"\n'
     'tags = ["ids:empty"]\nerror = "ValueError"\nphase = "backward"\n', "[[known_defect]]",
     r"device='gpu': none of .* runs there \(they run on cpu\)"),
    (BASE + ESPNET_DEFECT + ESPNET_DEFECT, "[[known_defect]]", r"declares the same defect as .*c\.toml:\d+"),
], ids=["padding-on-embed", "context-never-on-device", "context-not-reproducible", "defect-no-subjects",
        "defect-on-oracle", "defect-device-none-runs", "defect-twice"])
def test_a_rule_the_judge_can_never_satisfy_is_refused_with_its_line_and_reason(tmp_path, text, needle, reason):
    cpu_only = dataclasses.replace(SUBJECTS["chainer.embed_id"], name="plugin.cpu_only", devices=("cpu",))
    problems = _problems(tmp_path, text, {**SUBJECTS, cpu_only.name: cpu_only} if CPU_ONLY in text else SUBJECTS)
    assert len(problems) == 1, problems
    got = problems[0]
    assert re.search(reason, got), got
    line = _line_of(text, needle)
    at = int(re.search(r"c\.toml:(\d+)", got).group(1))
    assert line - 8 <= at <= line + 8, (line, got)


def test_the_shipped_contracts_have_no_contradiction():
    assert problems(load_contracts(ROOT / "contracts.toml"), SUBJECTS, CONTEXTS) == []


def test_several_problems_are_one_line_for_a_verb_that_refuses():
    line = refusal(["a.toml:3: first", "a.toml:9: second", "a.toml:12: third"])
    assert line.startswith("a.toml:3: first") and "2 more problem(s)" in line and "\n" not in line
