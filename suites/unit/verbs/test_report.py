"""``harness report``'s options record: a profile's own campaign settings where the command line leaves them out;
comma lists and the shard held parsed, from the command line and from Python alike."""

from __future__ import annotations

import pytest

from harness import cli
from harness.core.argcheck import Shard
from harness.core.errors import InvalidArgument
from harness.execute.settings import CampaignOptions
from harness.generate.corpora import PROFILE_CAMPAIGN
from harness.verbs.report import ReportOptions


def test_a_profile_sets_the_campaign_settings_the_command_line_leaves_out():
    own = PROFILE_CAMPAIGN["realistic"]
    settings = ReportOptions(profile="realistic").settings()
    assert (settings.repeats, settings.fresh) == (own["repeats"], own["fresh"])
    assert own["repeats"] != CampaignOptions.repeats  # (else this test could not tell the two apart)


def test_a_setting_the_command_line_gives_wins_over_the_profiles():
    assert ReportOptions(profile="realistic", repeats=5).settings().repeats == 5
    assert ReportOptions(profile="realistic", repeats=5).settings().fresh == PROFILE_CAMPAIGN["realistic"]["fresh"]


def test_a_profile_without_settings_of_its_own_keeps_the_defaults():
    settings = ReportOptions(profile="ci").settings()
    assert (settings.repeats, settings.fresh) == (CampaignOptions.repeats, CampaignOptions.fresh)


def test_the_record_built_from_the_command_line_holds_parsed_values():
    got = cli.options_of(["report", "--devices", "cpu", "--contexts", "default,blas1", "--subjects",
                          "chainer.embed_id", "--relations", "order,alone", "--shard", "1/2"])
    assert (got.devices, got.contexts, got.subjects, got.relations) == (
        ("cpu",), ("default", "blas1"), ("chainer.embed_id",), ("order", "alone"))
    assert got.shard == Shard(1, 2)


def test_a_python_caller_may_give_the_text_and_gets_the_same_record():
    argv = ["--devices", "cpu", "--contexts", "default,blas1", "--relations", "none", "--shard", "2/2"]
    assert ReportOptions(devices="cpu", contexts="default,blas1", relations="none", shard="2/2") == \
        cli.options_of(["report", *argv])


@pytest.mark.parametrize("field, text", [("relations", "all,order"), ("shard", "3/2"), ("contexts", "nosuch"),
                                         ("devices", "tpu")])
def test_bad_text_is_refused_alike_from_python_and_from_the_command_line(field, text, capsys):
    with pytest.raises(InvalidArgument) as exc:
        ReportOptions(**{field: text})
    with pytest.raises(SystemExit) as ended:
        cli.main(["report", f"--{field}", text])
    line = capsys.readouterr().err.strip()
    assert ended.value.code == 2 and str(exc.value) in line and len(line.splitlines()) == 1
