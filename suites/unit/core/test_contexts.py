"""harness/core/contexts.py: the registry of execution contexts, their order, their parsing and what they apply."""

from __future__ import annotations

import pytest

from harness.core.contexts import (
    CONTEXTS,
    DEFAULT_CONTEXTS,
    Context,
    blas_info,
    context_order,
    get_context,
    parse_contexts,
)
from harness.core.errors import UnknownContext


def test_any_blas_count_is_made_on_demand_and_other_names_are_refused() -> None:
    c = get_context("blas7")
    assert (c.name, c.blas_threads, c.applies_to("cpu"), c.applies_to("gpu")) == ("blas7", 7, True, False)
    for bad in ("blas0", "blasx", "nope"):
        with pytest.raises(UnknownContext, match=repr(bad)):
            get_context(bad)


def test_parse_gives_the_defaults_for_nothing_and_the_named_ones_in_order_given() -> None:
    assert [c.name for c in parse_contexts(None)] == list(DEFAULT_CONTEXTS)
    assert [c.name for c in parse_contexts("")] == list(DEFAULT_CONTEXTS)
    assert [c.name for c in parse_contexts("debug, blas1")] == ["debug", "blas1"]


def test_order_is_the_registrys_once_each_and_unknown_names_last() -> None:
    assert context_order(["zz", "debug", "default", "debug", "", "blas1"]) == ("default", "blas1", "debug", "zz")


def test_an_environment_context_needs_a_fresh_process_and_round_trips_to_a_dict() -> None:
    assert CONTEXTS["hashseed"].needs_fresh_process and not CONTEXTS["debug"].needs_fresh_process
    d = CONTEXTS["omp1"].to_dict()
    assert d["env"] == {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"} and d["devices"] == ["cpu"]
    assert Context("x", env={"A": "1"}) == Context("x", env=(("A", "1"),))  # a mapping is frozen into pairs


def test_applied_sets_chainers_config_for_the_run_only() -> None:
    from harness.core.compat import import_chainer

    chainer = import_chainer()
    before = chainer.config.debug
    with get_context("debug").applied():
        assert chainer.config.debug is True
    assert chainer.config.debug == before


def test_blas_info_lists_only_blas_libraries() -> None:
    import numpy  # noqa: F401  (loads the BLAS threadpoolctl reads)

    info = blas_info()
    assert info and all(lib["user_api"] == "blas" for lib in info)
