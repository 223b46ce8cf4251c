"""``harness report``'s options record: a profile's own campaign settings where the command line leaves them out;
and (slow) the report's trajectory section over the campaign's model cases; comma lists and the shard held
parsed, from the command line and from Python alike."""

from __future__ import annotations

import csv

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



@pytest.mark.slow  # a campaign of the model cases, their baseline and localization: seconds of process trees
def test_the_report_names_where_default_and_blas1_trainings_first_part_beside_the_one_ulp_baseline(harness,
                                                                                                  tmp_path):
    from harness.generate.model_cases import trajectory_cases

    corpus = tmp_path / "models.jsonl"
    corpus.write_text("".join(c.to_json().replace("\n", "") + "\n" for c in trajectory_cases("ci")))
    out = tmp_path / "run"
    r = harness("report", "--corpus", corpus, "--subjects", "model.espnet_rnnlm,model.chainer_lm", "--devices",
                "cpu", "--contexts", "default,blas1,blas2", "--no-shrink", "--quiet", "--out", out, timeout=1200)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = list(csv.DictReader((out / "findings.csv").open()))
    [row] = [x for x in rows if x["kind"] == "trajectory divergence"]
    # measured: the RNN LM at 300 units: one BLAS thread changes its first backward's bits
    assert (row["subject"], row["context"], row["other"]) == ("model.espnet_rnnlm", "blas1", "default")
    assert "first differs at step 0 (backward of " in row["detail"] and "one ULP in one weight gives" in row["detail"]
    assert row["replay"] and row["shrink"] and "--kind 'trajectory divergence'" in row["shrink"]
    # the pair's tensors are its trajectory's finding, not one more cross-context finding
    assert not [x for x in rows if x["kind"] == "cross-context difference" and x["subject"] == "model.espnet_rnnlm"]
    summary = (out / "summary.md").read_text()
    section = summary.split("## Trajectories", 1)[1].split("## Figures", 1)[0]
    assert row["detail"] in section and "bit-identical over 3 steps (model.chainer_lm" in section
    assert (out / "trajectory.png").read_bytes()[:4] == b"\x89PNG" and "trajectory.png" in summary
    steps = list(csv.DictReader((out / "trajectories.csv").open()))
    assert len([s for s in steps if s["comparison"].endswith("one ULP in one weight")]) == 3
    # a model case runs in the trajectory pair of contexts only
    from harness.execute.campaign import load_tasks

    assert {rec.context for rec in load_tasks(str(out)).values()} == {"default", "blas1"}


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
