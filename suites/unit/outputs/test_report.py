"""``harness report``: a profile's own campaign settings where the command line leaves them out."""

from __future__ import annotations

import argparse

from harness.generate.corpora import PROFILE_CAMPAIGN
from harness.outputs.report import _profile_or


def test_a_profile_sets_the_campaign_settings_the_command_line_leaves_out():
    args = argparse.Namespace(profile="realistic", repeats=5, fresh=2, _given={"profile"})
    assert _profile_or(args, "repeats") == PROFILE_CAMPAIGN["realistic"]["repeats"] != 5
    assert _profile_or(args, "fresh") == PROFILE_CAMPAIGN["realistic"]["fresh"]
    args._given.add("repeats")  # given on the command line: it wins, even at the default's value
    assert _profile_or(args, "repeats") == 5
    assert _profile_or(argparse.Namespace(profile="ci", repeats=5, _given={"profile"}), "repeats") == 5
