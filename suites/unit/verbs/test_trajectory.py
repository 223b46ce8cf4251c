"""Trajectories end to end: model subjects trained K steps in worker processes are bit-identical run to run and
across fresh processes; ``harness trajectory`` says so (exit 0), names the first differing step of a planted
nondeterministic plug-in (step 0, exit 1) beside the one-ULP baseline, and catches a planted regression of the
optimizer's update that the run-to-run and across-process checks do not see; bad options are one line, exit 2.

``harness trajectory`` on a device: both runs train where the options say (a GPU where one is usable: CuPy's
code path), and a device that is not usable here, or a context that does not apply to it, is one line before any
worker starts."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from harness import cli
from harness.core.devices import CPU
from harness.core.errors import InvalidArgument
from harness.core.schemas import MODEL_RECIPES
from harness.execute.isolated import Runner
from harness.generate.model_cases import model_case
from harness.judge.trajectory import read_run
from harness.subjects.registry import load_plugin
from harness.verbs.trajectory import TrajectoryOptions, run_trajectory

PLUGIN = "suites.plugins.planted_model:SUBJECTS"


@pytest.fixture(autouse=True)
def _registry_restored():
    """The planted plug-in is registered by some tests here: leave the registry as it was for the rest of the
    session (the contracts checks and the export tests read every registered subject)."""
    from harness.subjects.registry import SUBJECTS as REGISTRY

    before = dict(REGISTRY)
    yield
    REGISTRY.clear()
    REGISTRY.update(before)


def _outcomes(subjects_cases, fresh: int = 1):
    """Per (subject, case): two runs in one worker and one in a fresh worker (one Runner: its workers serve every
    task), the outcome judged as a campaign judges a task, and the tensors whose repetitions differ."""
    plugins = (PLUGIN,) if any(s.startswith("planted.") for s, _ in subjects_cases) else ()
    for spec in plugins:
        load_plugin(spec)  # its manifest, taken in a child: the plug-in runs only in the workers
    out = []
    with Runner(fresh=fresh, plugins=plugins) as r:
        for subject, case in subjects_cases:
            o = r.run(case, subject, CPU, "default", repeats=2, fresh=fresh)
            assert o.record.status == "ok", o.record.errors
            assert len(o.record.rep_processes) == 2 + fresh and ("fresh:0" in o.record.rep_processes) == bool(fresh)
            out.append((o, [n for n, t in o.record.tensors.items() if not t.bitwise_identical]))
    return out


def test_small_models_train_bit_identically_run_to_run_and_across_fresh_processes():
    outcomes = _outcomes([(f"model.{r}", model_case(r, "ci", seed=3)) for r in MODEL_RECIPES])
    assert len(outcomes) == len(MODEL_RECIPES) == 3
    for o, differing in outcomes:
        assert differing == [], o.record.subject
        run = read_run(o.arrays)
        assert run.steps == 4 and sorted(run.params) == [0, 1, 2, 3]
        assert all(np.isfinite(run.loss)) and len(set(run.digests)) == 4  # every step moved the parameters
        first, last = run.params[0], run.params[3]
        assert any(not np.array_equal(first[n], last[n]) for n in first)


@pytest.mark.slow
def test_the_verb_says_bit_identical_across_processes_and_writes_its_table(harness, tmp_path):
    case = tmp_path / "case.json"
    case.write_text(model_case("chainer_lm", "ci", seed=1).to_json())
    r = harness("trajectory", case, "--subject", "model.chainer_lm", "--fresh", "1", "--steps", "3",
                "--out", tmp_path / "out")
    assert r.rc == 0, r.stderr
    assert r.stdout.splitlines()[0] == "bit-identical over 3 steps (model.chainer_lm, across fresh processes)"
    rows = list(csv.DictReader((tmp_path / "out" / "trajectory.csv").open()))
    assert [(row["step"], row["identical"]) for row in rows] == [("0", "True"), ("1", "True"), ("2", "True")]
    assert (tmp_path / "out" / "trajectory.png").stat().st_size > 1000


def test_a_nondeterministic_plugin_first_differs_at_step_0_beside_the_baseline(tmp_path):
    path = tmp_path / "case.json"
    path.write_text(model_case("espnet_rnnlm", "ci", seed=2).to_json())
    out = run_trajectory(TrajectoryOptions(str(path), "planted.model_noisy_loss", plugins=(PLUGIN,)))
    assert not out.identical and out.pair.first_differing.step == 0
    assert out.pair.first_differing.differs[0] == "loss" and out.pair.distances[0].loss_diff > 0
    # localized at that step: the planted node's forward, whose inputs matched in both runs
    assert out.node.startswith("forward of NoisyScale #")
    assert f"first differs at step 0 ({out.node}; the loss: the forward differs)" in out.line
    assert out.baseline is not None and out.baseline.steps == 4 and "one ULP in one weight gives" in out.line


@pytest.mark.slow
def test_the_verb_writes_the_pair_and_the_baseline_beside_it(harness, tmp_path):
    case = tmp_path / "case.json"
    case.write_text(model_case("espnet_rnnlm", "ci", seed=2).to_json())
    r = harness("trajectory", case, "--subject", "planted.model_noisy_loss", "--subject-plugin", PLUGIN,
                "--out", tmp_path / "out")
    assert r.rc == 1, r.stderr
    line = r.stdout.splitlines()[0]
    rows = list(csv.DictReader((tmp_path / "out" / "trajectory.csv").open()))
    pair = [row for row in rows if row["comparison"] == "run 1 vs run 2"]
    baseline = [row for row in rows if row["comparison"] == "one ULP in one weight"]
    assert len(pair) == len(baseline) == 4 and pair[0]["identical"] == "False"
    assert (tmp_path / "out" / "verdict.txt").read_text().strip() == line
    assert (tmp_path / "out" / "trajectory.png").stat().st_size > 1000


def test_a_regression_of_the_update_alone_is_caught_by_the_trajectory_and_not_by_the_repeat_checks(tmp_path):
    case = model_case("espnet_rnnlm", "ci", seed=4)
    path = tmp_path / "case.json"
    path.write_text(case.to_json())
    # the regressed subject is reproducible: the campaign's run-to-run judge finds nothing
    [(_, differing)] = _outcomes([("planted.model_adadelta_eps", case)], fresh=0)
    assert differing == []
    out = run_trajectory(TrajectoryOptions(str(path), "model.espnet_rnnlm", against="planted.model_adadelta_eps",
                                           plugins=(PLUGIN,)))
    assert not out.identical
    first = out.pair.first_differing
    # step 0's forward (loss) and backward (gradient norm) are the shipped subject's bits; its update is not
    assert first.step == 0 and first.differs == ("params",)
    assert first.loss_a == first.loss_b and first.max_ulp > 0
    assert "the loss and gradient norm agree" in out.line and out.baseline is not None


@pytest.mark.parametrize("args, message", [
    (("--subject", "chainer.EmbedID"), "subject='chainer.EmbedID' is a subject of family embed"),
    (("--subject", "model.espnet_rnnlm", "--contexts", "default"), "must name two contexts"),
    (("--subject", "model.espnet_rnnlm", "--contexts", "default,blas1", "--fresh", "1"), "one thing at a time"),
    (("--subject", "model.chainer_lm"), "does not take it"),
    ((), "trajectory needs --subject"),
    (("--subject", "model.espnet_rnnlm", "--device", "tpu"), "device='tpu' is not 'cpu', 'gpu' or 'gpu:N'"),
])
def test_a_bad_trajectory_command_is_one_line_and_exit_2(capsys, tmp_path, args, message):
    case = tmp_path / "case.json"
    case.write_text(model_case("espnet_rnnlm", "ci").to_json())
    try:
        code = cli.main(["trajectory", str(case), *args])
    except SystemExit as exc:  # argparse's own refusal of a value its check rejects
        code = exc.code
    assert code == 2  # refused before any worker starts
    out, err = capsys.readouterr()
    assert out == "" and message in err and len(err.splitlines()) == 1, err


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["espnet_rnnlm", "espnet_blstmp_ctc"])
def test_a_realistic_slice_trains_100_steps_bit_identically_run_to_run_and_across_processes(recipe):
    case = model_case(recipe, "slice", seed=7)
    assert case.spec["steps"] == 100
    [(o, differing)] = _outcomes([(f"model.{recipe}", case)])
    assert differing == []
    run = read_run(o.arrays)
    assert run.steps == 100 and 99 in run.params and np.isfinite(run.loss).all()


@pytest.mark.slow
def test_between_blas_contexts_the_verb_names_the_first_step_and_draws_the_curve_beside_the_baseline(harness,
                                                                                                    tmp_path):
    case = tmp_path / "case.json"
    case.write_text(model_case("espnet_rnnlm", "slice", seed=7, steps=12).to_json())
    r = harness("trajectory", case, "--subject", "model.espnet_rnnlm", "--contexts", "default,blas1",
                "--out", tmp_path / "out", timeout=1800)
    assert r.rc in (0, 1), r.stderr
    line = r.stdout.splitlines()[0]
    rows = list(csv.DictReader((tmp_path / "out" / "trajectory.csv").open()))
    pair = [row for row in rows if row["comparison"] == "default vs blas1"]
    assert len(pair) == 12
    if r.rc == 0:  # one BLAS thread and the default give the same bits here: said, with no baseline run
        assert line.startswith("bit-identical over 12 steps") and all(row["identical"] == "True" for row in pair)
    else:
        first = next(row for row in pair if row["identical"] == "False")
        assert f"first differs at step {first['step']}" in line and "one ULP in one weight gives" in line
        assert len([row for row in rows if row["comparison"] == "one ULP in one weight"]) == 12


def _case(tmp_path, **kw):
    path = tmp_path / "case.json"
    path.write_text(model_case("chainer_lm", "ci", seed=7, steps=2, **kw).to_json())
    return str(path)


def test_a_trajectory_trains_on_the_device_asked_for(device, tmp_path):
    out = run_trajectory(TrajectoryOptions(_case(tmp_path), "model.chainer_lm", device=device.id, localize=False))
    assert out.pair.steps == 2 and out.labels == ("run 1", "run 2")
    if device.kind == "cpu":  # measured: bit-identical run to run on the CPU (suites/test_trajectory.py)
        assert out.identical and out.line == "bit-identical over 2 steps (model.chainer_lm, run to run in one process)"
    else:  # L.EmbedID's GPU backward adds with atomics: where the runs differ, the line names the first step
        first = out.pair.first_differing
        assert out.identical or f"first differs at step {first.step}" in out.line


def test_a_device_that_is_not_usable_here_is_one_line(tmp_path):
    from harness.core.devices import Device

    ok, reason = Device("gpu", 0).availability()
    if ok:
        pytest.skip("a GPU is usable here: the refusal needs a machine without one")
    with pytest.raises(InvalidArgument, match=r"^device='gpu': gpu:0 is not usable: ") as e:
        run_trajectory(TrajectoryOptions(_case(tmp_path), "model.chainer_lm", device="gpu"))
    assert reason in str(e.value) and "\n" not in str(e.value)


def test_a_context_that_does_not_apply_to_the_device_is_refused(tmp_path):
    from harness.core.devices import Device

    if not Device("gpu", 0).availability()[0]:
        pytest.skip("no usable GPU here: the device is refused before its contexts are checked")
    with pytest.raises(InvalidArgument, match="context blas1 does not apply to device gpu:0"):
        run_trajectory(TrajectoryOptions(_case(tmp_path), "model.chainer_lm", device="gpu",
                                         contexts=("default", "blas1")))
