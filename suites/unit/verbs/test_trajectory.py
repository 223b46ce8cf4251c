"""``harness trajectory`` on a device: both runs train where the options say (a GPU where one is usable: CuPy's
code path), and a device that is not usable here, or a context that does not apply to it, is one line before any
worker starts."""

from __future__ import annotations

import pytest

from harness.core.errors import InvalidArgument
from harness.generate.model_cases import model_case
from harness.verbs.trajectory import TrajectoryOptions, run_trajectory


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
