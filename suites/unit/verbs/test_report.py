"""``harness report``'s options record: a profile's own campaign settings where the command line leaves them out."""

from __future__ import annotations

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
