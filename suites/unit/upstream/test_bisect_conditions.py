"""The conditions a bisection pins: the user's pins parsed, a context as variables, the machine's BLAS read,
and a probe that runs other kernels or threads caught."""

from __future__ import annotations

import pytest

from harness.core.errors import InvalidArgument
from harness.upstream import bisect_conditions as C


def test_env_pins_parse_and_bad_ones_are_refused_naming_the_item():
    assert C.parse_env(["OPENBLAS_CORETYPE=SkylakeX", "A_B=x=y", "A_B=x=y"]) == \
        (("A_B", "x=y"), ("OPENBLAS_CORETYPE", "SkylakeX"))
    for bad in ("OPENBLAS_CORETYPE", "=x", "1A=2", "A B=1"):
        with pytest.raises(InvalidArgument, match="env="):
            C.parse_env([bad])
    with pytest.raises(InvalidArgument, match="pinned twice"):
        C.parse_env(["A=1", "A=2"])


def test_a_context_becomes_the_variables_that_set_it_up():
    assert C.context_env("default") == {}
    assert C.context_env("blas1") == {v: "1" for v in C.THREAD_VARS}
    assert C.context_env("debug") == {"CHAINER_DEBUG": "1"}
    assert C.context_env("omp1")["OPENBLAS_NUM_THREADS"] == "1"
    with pytest.raises(InvalidArgument, match="context='cublas_ws': applies only to gpu"):
        C.context_env("cublas_ws")


def test_the_machines_blas_is_read_and_pinned_unless_the_user_pins_it():
    cond = C.measure("blas1", (("OPENBLAS_CORETYPE", "Haswell"), ("MY_FLAG", "on")))
    pins = dict(cond.env)
    assert {pins[v] for v in C.THREAD_VARS} == {"1"} and pins["MY_FLAG"] == "on"
    assert pins["OPENBLAS_THREAD_TIMEOUT"] == "16"  # the variable every worker of the harness starts with
    assert cond.cpu and len(cond.cpu_flags) == 16
    if cond.blas.startswith("OpenBLAS"):  # (NumPy's wheels bundle OpenBLAS; another BLAS pins no kernels)
        assert pins["OPENBLAS_CORETYPE"] == "Haswell" and cond.blas == "OpenBLAS Haswell kernels, 1 thread"
    assert cond.words() == f"on {cond.blas}, {cond.cpu}, with MY_FLAG=on"
    env = cond.probe_env()
    assert env["MY_FLAG"] == "on" and env["OPENBLAS_NUM_THREADS"] == "1"


def test_a_probe_that_runs_other_kernels_or_threads_breaks_the_conditions():
    cond = C.Conditions("cpu", "f", (("OPENBLAS_CORETYPE", "SkylakeX"), ("OPENBLAS_NUM_THREADS", "2")), "")
    lib = {"internal_api": "openblas", "version": "0.3.30", "architecture": "SkylakeX", "num_threads": 2}
    assert C.held({"blas": [lib]}, cond) is None
    assert C.held({"blas": [{**lib, "architecture": "skylakex"}]}, cond) is None
    assert C.held({"blas": [{**lib, "architecture": "Haswell"}]}, cond) == \
        "its OpenBLAS 0.3.30 picked Haswell kernels, not OPENBLAS_CORETYPE=SkylakeX"
    assert C.held({"blas": [{**lib, "num_threads": 1}]}, cond) == "its BLAS runs 1 threads, not the 2 pinned"
    assert C.blas_words([lib]) == "OpenBLAS SkylakeX kernels, 2 threads"
