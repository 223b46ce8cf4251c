"""harness/upstream/claims.py: the pieces of a claim that come from the harness alone: a device as Chainer spells
it, a context as a fresh process's environment, a case's inputs as a script reads them."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.cases import Case, build_arrays
from harness.core.errors import InvalidArgument
from harness.judge.reproducer import Reproducer
from harness.upstream.claims import case_arrays, chainer_device, check_kind, context_env


def test_devices_are_spelled_as_chainer_does() -> None:
    assert chainer_device("cpu") == "@numpy" and chainer_device("gpu:1") == "@cupy:1"


def test_a_context_is_the_environment_of_a_fresh_process() -> None:
    env, threads = context_env("blas1")
    assert threads == 1 and env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "1"
    debug, _ = context_env("debug")
    assert debug["CHAINER_DEBUG"] == "1"
    default, n = context_env("default")
    assert n >= 1 and default["MKL_NUM_THREADS"] == str(n)


@pytest.mark.parametrize("name, needle", [("contention", "busy"), ("cudnn_deterministic", "no environment")])
def test_a_context_no_script_can_set_up_is_refused(name: str, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=needle):
        context_env(name)


def test_a_pipelines_inputs_carry_its_lengths() -> None:
    pipe = Case("pipeline", 5, {"vocab": 10, "width": 4, "hidden": 5, "n_layers": 1, "lengths": [3, 2]})
    arrays = case_arrays(pipe)
    assert np.array_equal(arrays.pop("lengths"), [3, 2])
    assert arrays.keys() == build_arrays(pipe).keys()


def test_a_reproducer_naming_nothing_checks_what_replay_checks() -> None:
    assert check_kind(Reproducer("c.json", "s")) == ""
    assert check_kind(Reproducer("c.json", "s", contexts=("default", "blas1"))) == "contexts"
