"""The strategies draw every kind they promise, validate bounds eagerly, and corpora are deterministic."""

from __future__ import annotations

import collections
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from harness.core.cases import FAMILIES, Case, build_arrays
from harness.core.corpus_files import corpus_digest
from harness.core.errors import InvalidArgument
from harness.generate.bad_kinds import BAD_KINDS
from harness.generate.case_builders import GY_KINDS, ID_DISTRIBUTIONS, IGNORE_KINDS, LENGTH_PATTERNS
from harness.generate.profile_sizes import SIZE_BOUNDS, bounds_for
from harness.generate.sampler import bad_corpus, corpus
from harness.generate.strategies import any_case, bad_inputs, cases, embed_cases, lstm_cases, pipeline_cases
from harness.generate.strategy_bounds import SIGNED_ID_DTYPES

FAST = settings(max_examples=25, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def embed_corpus() -> list[Case]:
    return corpus("embed", examples=400, seed=11)


@pytest.fixture(scope="module")
def lstm_corpus() -> list[Case]:
    return corpus("lstm", examples=300, seed=12)


@pytest.fixture(scope="module")
def pipeline_corpus() -> list[Case]:
    return corpus("pipeline", examples=300, seed=13)


def _tags(cs: list[Case], prefix: str) -> set[str]:
    return {t.split(":", 1)[1] for c in cs for t in c.tags if t.startswith(prefix + ":")}


# ---- every kind appears -------------------------------------------------------------------------
def test_every_ignore_label_kind_appears(embed_corpus):
    assert _tags(embed_corpus, "ignore") == set(IGNORE_KINDS)


def test_ignore_label_values_match_their_kind(embed_corpus):
    for c in embed_corpus:
        kind = _tags([c], "ignore").pop()
        v, il, lo = c.spec["vocab"], c.spec["ignore_label"], int(np.iinfo(c.spec["id_dtype"]).min)
        expected = {"none": il is None, "minus_one": il == -1, "zero": il == 0, "last": il == v - 1,
                    "middle": il is not None and 0 < il < v - 1,
                    "oov": il is not None and il >= v, "neg_large": il == max(-(2**31), lo)}
        assert expected[kind], c.to_json()


def test_large_negative_label_is_clipped_to_each_id_dtype(embed_corpus):
    seen = {c.spec["id_dtype"]: c.spec["ignore_label"] for c in embed_corpus if "ignore:neg_large" in c.tags}
    assert seen == {"int8": -128, "int16": -(2**15), "int32": -(2**31), "int64": -(2**31)}


def test_every_id_distribution_appears(embed_corpus):
    assert {c.spec["id_kind"] for c in embed_corpus} == set(ID_DISTRIBUTIONS)
    explicit = [c for c in embed_corpus if c.spec["id_kind"] == "explicit"]
    assert explicit and all("x" in c.arrays and c.arrays["x"]["dtype"] == c.spec["id_dtype"] for c in explicit)


def test_collision_heavy_ids_have_few_distinct_values(embed_corpus):
    hits = 0
    for c in embed_corpus:
        if c.spec["id_kind"] == "collision" and math.prod(c.spec["ids_shape"]) >= 16 and c.spec["ignore_label"] is None:
            x = build_arrays(c)["x"]
            assert len(np.unique(x)) <= c.spec["distinct"] <= 8
            hits += 1
    assert hits >= 3


def test_every_id_and_w_dtype_appears(embed_corpus):
    assert {c.spec["id_dtype"] for c in embed_corpus} == set(SIGNED_ID_DTYPES)
    assert {c.spec["w_dtype"] for c in embed_corpus} == {"float16", "float32", "float64"}


def test_every_gy_kind_appears_and_random_dominates(embed_corpus, lstm_corpus, pipeline_corpus):
    for cs in (embed_corpus, lstm_corpus, pipeline_corpus):
        counts = collections.Counter(c.spec["gy_kind"] for c in cs)
        assert set(counts) == set(GY_KINDS)
        assert counts["random"] > len(cs) / 2


def test_empty_batch_and_all_positions_ignored_appear(embed_corpus):
    empty = [c for c in embed_corpus if "ids:empty" in c.tags]
    assert empty and all(0 in c.spec["ids_shape"] for c in empty)
    assert all(build_arrays(c)["x"].size == 0 for c in empty[:5])
    full = [c for c in embed_corpus if c.spec.get("ignore_frac") == 1.0 and math.prod(c.spec["ids_shape"])]
    assert full
    for c in full[:5]:
        assert (build_arrays(c)["x"] == c.spec["ignore_label"]).all()


def test_id_dims_one_to_three(embed_corpus):
    assert {len(c.spec["ids_shape"]) for c in embed_corpus} == {1, 2, 3}


def test_embed_ids_are_valid_for_vocab_and_dtype(embed_corpus):
    for c in embed_corpus[:200]:
        s = c.spec
        info = np.iinfo(s["id_dtype"])
        assert s["vocab"] - 1 <= info.max
        il = s["ignore_label"]
        assert il is None or info.min <= il <= info.max
        x = build_arrays(c)["x"]
        assert x.dtype == np.dtype(s["id_dtype"]) and list(x.shape) == list(s["ids_shape"])
        valid = (x >= 0) & (x < s["vocab"])
        if il is not None:
            valid |= x == il
        assert valid.all(), c.to_json()


def test_every_length_pattern_appears_and_matches(lstm_corpus, pipeline_corpus):
    for cs in (lstm_corpus, pipeline_corpus):
        assert _tags(cs, "lengths") == set(LENGTH_PATTERNS)
        for c in cs:
            n = list(c.spec["lengths"])
            pattern = _tags([c], "lengths").pop()
            if pattern == "equal":
                assert len(set(n)) == 1
            elif pattern == "decreasing":
                assert len(n) >= 2 and all(a > b for a, b in zip(n, n[1:]))
            elif pattern == "increasing":
                assert len(n) >= 2 and all(a < b for a, b in zip(n, n[1:]))
            elif pattern == "unsorted":
                assert n != sorted(n) and n != sorted(n, reverse=True)
            elif pattern == "ties":
                assert len(n) >= 3 and n == sorted(n, reverse=True) and len(set(n)) < len(n)
            else:
                longest = max(n)
                assert n.count(longest) == 1 and len(n) >= 2


def test_lstm_structure_kinds_appear(lstm_corpus):
    specs = [c.spec for c in lstm_corpus]
    assert {s["n_layers"] for s in specs} == {1, 2, 3}
    assert {s["bidirectional"] for s in specs} == {False, True}
    assert {s["initial_state"] for s in specs} == {"none", "given"}
    dropped = [s for s in specs if s.get("dropout", 0) > 0]
    assert dropped and all(isinstance(s["dropout_seed"], int) for s in dropped)
    assert sum(1 for s in specs if s.get("dropout", 0) == 0) > len(specs) / 2
    assert all("dropout" in c.tags for c in lstm_corpus if c.spec.get("dropout", 0) > 0)


def test_pipeline_padding_and_collisions_appear(pipeline_corpus):
    assert _tags(pipeline_corpus, "ignore") == {"minus_one", "zero", "last"}
    for c in pipeline_corpus:
        assert c.spec["ignore_label"] in (-1, 0, c.spec["vocab"] - 1)
    assert "collision" in {c.spec["id_kind"] for c in pipeline_corpus}
    assert {c.spec["bidirectional"] for c in pipeline_corpus} == {False, True}


def test_ci_bounds_stay_small():
    for c in corpus("all", examples=300, seed=5, profile="ci"):
        s = c.spec
        if c.family == "embed":
            assert math.prod(s["ids_shape"]) <= 64 and s["vocab"] <= 1000 and s["width"] <= 16
        else:
            assert len(s["lengths"]) <= 8 and max(s["lengths"]) <= 6 and s["hidden"] <= 8


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_audit_reaches_many_ids_into_few_rows():
    hot = [c for c in corpus("embed", examples=200, seed=1, profile="audit")
           if math.prod(c.spec["ids_shape"]) >= 50_000 and c.spec["vocab"] <= 16]
    assert any("scale:hot" in c.tags for c in hot)


# ---- the Hypothesis strategies reach the kinds too ---------------------------------------------------
FIND = settings(database=None, derandomize=True, max_examples=2000, phases=[Phase.generate], deadline=None,
                suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("strategy, predicate", [
    (lambda: embed_cases(max_ids=64, max_vocab=1000), lambda c: "ids:empty" in c.tags),
    (lambda: embed_cases(max_ids=64, max_vocab=1000), lambda c: "ignore:oov" in c.tags),
    (lambda: embed_cases(max_ids=64, max_vocab=1000), lambda c: "ignore_frac:all" in c.tags),
    (lambda: embed_cases(max_ids=64, max_vocab=1000), lambda c: c.spec["id_kind"] == "explicit"),
    (lambda: lstm_cases(max_batch=8, max_len=6), lambda c: "lengths:unsorted" in c.tags),
    (lambda: lstm_cases(max_batch=8, max_len=6), lambda c: "dropout" in c.tags and c.spec["n_layers"] == 3),
    (lambda: pipeline_cases(max_batch=8, max_len=6), lambda c: "ignore:last" in c.tags),
    (lambda: bad_inputs(), lambda c: "bad:zero_length" in c.tags),
])
def test_hypothesis_strategies_reach_kinds(strategy, predicate):
    assert predicate(find(strategy(), predicate, settings=FIND))


@FAST
@given(embed_cases(max_vocab=1000, max_ids=64, max_width=8))
def test_drawn_embed_cases_build_valid_ids(case):
    x = build_arrays(case)["x"]
    il = case.spec["ignore_label"]
    valid = (x >= 0) & (x < case.spec["vocab"])
    assert (valid | (x == il) if il is not None else valid).all()


@FAST
@given(lstm_cases(max_batch=8, max_len=6, max_in=4, max_hidden=4))
def test_drawn_lstm_cases_build_their_shapes(case):
    arrays = build_arrays(case)
    for i, n in enumerate(case.spec["lengths"]):
        assert arrays[f"xs.{i}"].shape == (n, case.spec["in_size"])
    assert (("hx" in arrays) == (case.spec["initial_state"] == "given"))


@FAST
@given(bad_inputs())
def test_bad_inputs_carry_expect_and_tag(case):
    assert case.bad and case.expect["kind"] in ("raises", "documented", "propagates", "either")
    assert any(t.startswith("bad:") for t in case.tags)
    json.dumps(case.to_dict(), allow_nan=False)
    build_arrays(case)


@FAST
@given(st.data())
def test_any_case_and_cases_dispatch(data):
    case = data.draw(any_case(**bounds_for("ci", "all")))
    assert case.family in FAMILIES and not case.bad
    fam = data.draw(st.sampled_from(FAMILIES))
    assert data.draw(cases(fam, **bounds_for("ci", fam))).family == fam


# ---- bad inputs ---------------------------------------------------------------------------------
def test_every_bad_kind_appears_with_its_expectation():
    bad = bad_corpus(examples=80, seed=3)
    assert _tags(bad, "bad") == set(BAD_KINDS)
    by_kind = {t.split(":", 1)[1]: c for c in bad for t in c.tags if t.startswith("bad:")}
    assert by_kind["id_out_of_range_negative"].expect["kind"] == "documented"
    assert by_kind["id_out_of_range_negative"].expect["errors_in_debug"] == ("ValueError",)
    assert set(by_kind["id_out_of_range_high"].expect["errors"]) == {"IndexError", "ValueError"}
    assert set(by_kind["float_ids"].expect["errors"]) == {"InvalidType", "TypeError", "ValueError"}
    assert by_kind["float_ids"].spec["id_dtype"] == "float32"
    assert by_kind["unsigned_ids"].spec["id_dtype"].startswith("uint")
    assert by_kind["unsigned_ids"].expect["errors"] == ("InvalidType",)
    assert len(by_kind["w_rank"].spec["w_shape"]) in (1, 3)
    esp = by_kind["w_dtype_espnet"]
    assert esp.spec["w_dtype"] in ("float16", "float64")
    assert set(esp.expect["subjects"]) == {"espnet.embed_id", "espnet.EmbedID"}
    assert by_kind["zero_length"].expect["kind"] == "either" and 0 in by_kind["zero_length"].spec["lengths"]
    assert len(set(by_kind["xs_widths_mismatch"].spec["xs_widths"])
               | {by_kind["xs_widths_mismatch"].spec["in_size"]}) > 1
    for kind in ("nan_inf_w", "nan_inf_input"):
        assert by_kind[kind].expect["kind"] == "propagates"


def test_bad_cases_plant_what_they_say():
    for c in bad_corpus(examples=120, seed=4):
        json.dumps(c.to_dict(), allow_nan=False)
        arrays = build_arrays(c)
        if "bad:id_out_of_range_negative" in c.tags:
            x = arrays["x"]
            assert (x < 0).any() and c.spec["ignore_label"] not in x[x < 0]
            assert (x >= -c.spec["vocab"]).all()
        if "bad:id_out_of_range_high" in c.tags:
            assert (arrays["x"] >= c.spec["vocab"]).any() and c.spec["ignore_label"] in (None, -1, 0)
        if c.expect["kind"] == "propagates":
            assert any(not np.isfinite(arrays[i["array"]]).all() for i in c.spec["inject"])
        if "bad:xs_widths_mismatch" in c.tags:
            assert len({arrays[f"xs.{i}"].shape[1] for i in range(len(c.spec["lengths"]))}
                       | {c.spec["in_size"]}) > 1


def test_bad_inputs_respect_family():
    for fam in FAMILIES:
        cs = bad_corpus(examples=30, seed=1, family=fam)
        assert cs and {c.family for c in cs} == {fam}
        assert _tags(cs, "bad") == {k for k, fams in BAD_KINDS.items() if fam in fams}


# ---- eager validation --------------------------------------------------------------------------
@pytest.mark.parametrize("call, message", [
    (lambda: lstm_cases(min_len=9, max_len=4), "min_len=9 is larger than max_len=4"),
    (lambda: lstm_cases(min_batch=5, max_batch=2), "min_batch=5 is larger than max_batch=2"),
    (lambda: lstm_cases(max_layers=0), "max_layers=0 must be at least 1"),
    (lambda: lstm_cases(dtypes=("int32",)), r"dtypes=\('int32',\) contains 'int32'"),
    (lambda: lstm_cases(dtypes=()), r"dtypes=\(\) must not be empty"),
    (lambda: lstm_cases(allow_dropout=1), "allow_dropout=1 must be a bool"),
    (lambda: embed_cases(min_vocab=10, max_vocab=3), "min_vocab=10 is larger than max_vocab=3"),
    (lambda: embed_cases(min_width=0), "min_width=0 must be at least 1"),
    (lambda: embed_cases(max_ids=2.5), "max_ids=2.5 must be an int"),
    (lambda: embed_cases(id_dtypes=("uint8",)), r"id_dtypes=\('uint8',\) contains 'uint8', which is not one of int8"),
    (lambda: embed_cases(w_dtypes=("int8",)), r"w_dtypes=\('int8',\) contains 'int8'"),
    (lambda: embed_cases(min_vocab=300, id_dtypes=("int8",)), "min_vocab=300 is larger than any of id_dtypes"),
    (lambda: pipeline_cases(min_vocab=7, max_vocab=6), "min_vocab=7 is larger than max_vocab=6"),
    (lambda: pipeline_cases(max_hidden=-1), "max_hidden=-1 must be at least 1"),
    (lambda: cases("conv"), "family='conv' is not one of"),
    (lambda: cases("lstm", max_vocab=3), "max_vocab=3 is not a bound of lstm_cases"),
    (lambda: any_case(max_bogus=3), "max_bogus=3 is not a bound of any family"),
    (lambda: any_case(embed={"max_len": 3}), "max_len=3 is not a bound of embed_cases"),
    (lambda: bad_inputs(family="conv"), "family='conv' is not one of"),
    (lambda: bounds_for("nightly", "embed"), "profile='nightly' is not one of"),
    (lambda: corpus("embed", examples=-1, seed=0), "examples=-1 must be at least 0"),
    (lambda: corpus("embed", examples=3, seed=-2), "seed=-2 must be at least 0"),
    (lambda: corpus("embed", examples=3, seed=0, profile="x"), "profile='x' is not one of"),
])
def test_bounds_are_validated_eagerly(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()  # no draw happens: the strategy is never used


def test_bounds_narrow_what_is_drawn():
    for c in corpus("embed", examples=50, seed=2):
        assert c.spec["vocab"] <= SIZE_BOUNDS["ci"]["embed"]["max_vocab"]
    c = find(embed_cases(min_vocab=200, max_vocab=300, id_dtypes=("int8", "int16"), allow_empty=False),
             lambda c: True, settings=FIND)
    assert c.spec["id_dtype"] == "int16" and 200 <= c.spec["vocab"] <= 300
    c = find(lstm_cases(min_batch=3, max_batch=3, min_len=2, max_len=2), lambda c: True, settings=FIND)
    assert c.spec["lengths"] == (2, 2, 2)


def test_bounds_for_returns_copies_for_each_profile():
    for profile in SIZE_BOUNDS:
        for fam in FAMILIES:
            b = bounds_for(profile, fam)
            b["max_batch"] = -1
            assert SIZE_BOUNDS[profile][fam].get("max_batch") != -1
            cases(fam, **bounds_for(profile, fam))  # every profile's bounds pass validation
        assert set(bounds_for(profile, "all")) == set(FAMILIES)
    assert SIZE_BOUNDS["audit"]["embed"]["max_ids"] >= 100_000


# ---- deterministic corpora ------------------------------------------------------------------------
def test_corpus_same_seed_same_lines_other_seed_different():
    a = [c.to_json() for c in corpus("embed", examples=40, seed=9)]
    b = [c.to_json() for c in corpus("embed", examples=40, seed=9)]
    c = [c.to_json() for c in corpus("embed", examples=40, seed=10)]
    assert a == b and len(a) == 40 and len(set(a)) == 40
    assert a != c


def test_corpus_all_mixes_families_in_equal_shares():
    mixed = corpus("all", examples=31, seed=1)
    counts = collections.Counter(c.family for c in mixed)
    assert counts == {"embed": 11, "lstm": 10, "pipeline": 10}
    assert [c.family for c in mixed[:3]] == list(FAMILIES)
    assert corpus("all", examples=0, seed=1) == []


_DIGEST_SCRIPT = """
import sys
from harness.generate.sampler import bad_corpus, corpus
from harness.core.corpus_files import corpus_digest
print(corpus_digest(corpus(sys.argv[1], examples=int(sys.argv[2]), seed=int(sys.argv[3]))))
print(corpus_digest(bad_corpus(examples=20, seed=int(sys.argv[3]))))
print("hypothesis" in sys.modules)
"""


def test_corpus_is_identical_in_fresh_processes():
    """The seeded corpora give the same bytes under any hash seed, and without importing Hypothesis (a report
    builds its corpus this way: the import would be a sixth of a second at its start)."""
    expected = [corpus_digest(corpus("all", examples=60, seed=77)), corpus_digest(bad_corpus(examples=20, seed=77)),
                "False"]
    for hashseed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        out = subprocess.run([sys.executable, "-c", _DIGEST_SCRIPT, "all", "60", "77"], env=env,
                             capture_output=True, text=True, check=True, timeout=60)
        assert out.stdout.split() == expected, out.stderr


def test_corpus_stays_within_its_examples_count():
    assert len(corpus("lstm", examples=7, seed=3)) == 7
    assert len(bad_corpus(examples=5, seed=3)) == 5


# ---- the parameter combinations of Chainer v7.8.1's own tests are inside the strategies' support -------
# tests/chainer_tests/functions_tests/connection_tests/test_embed_id.py and links_tests/.../test_embed_id.py:
# W (3, 2), ids [0, 1, 0] and [[0, 1, 0], [1, 0, 1]], ignore_label None or 1, W float16/32/64, int32 ids;
# tests/chainer_tests/functions_tests/connection_tests/test_n_step_lstm.py and links_tests/.../test_n_step_rnn.py:
# batches [3, 2, 1] (lengths, longest first), in 3, out 2, n_layers up to 5, uni- and bidirectional, and
# sorted lengths with ties such as [3, 2, 2, 1, 1].
CHAINER_EMBED = [dict(vocab=3, width=2, ids_shape=shape, ignore_label=il, w_dtype=wd, id_dtype="int32")
                 for shape in ([3], [2, 3]) for il in (None, 1) for wd in ("float16", "float32", "float64")]
CHAINER_LSTM = [dict(lengths=lengths, in_size=3, hidden=2, n_layers=n, bidirectional=bi)
                for lengths in ([3, 2, 1], [3, 2, 2, 1, 1]) for n in (1, 2, 3, 4, 5) for bi in (False, True)]


@pytest.mark.parametrize("profile", ["dev", "audit"])
def test_chainers_own_test_parameters_are_in_the_support(profile):
    from harness.generate.profile_sizes import in_support

    assert all(in_support("embed", c, profile) for c in CHAINER_EMBED), [c for c in CHAINER_EMBED
                                                                         if not in_support("embed", c, profile)]
    assert all(in_support("lstm", c, profile) for c in CHAINER_LSTM), [c for c in CHAINER_LSTM
                                                                       if not in_support("lstm", c, profile)]
    # and the check can say no
    assert not in_support("lstm", dict(lengths=[3, 2, 1], n_layers=99), profile)
    assert not in_support("embed", dict(vocab=3, width=2, ignore_label=-5, id_dtype="uint8"), profile)


def test_ties_middle_ignore_labels_and_deep_stacks_are_really_drawn():
    from harness.generate.sampler import corpus

    lstm = corpus("lstm", examples=200, seed=5, profile="dev")
    ties = [c for c in lstm if "lengths:ties" in c.tags]
    assert ties and all(list(c.spec["lengths"]) == sorted(c.spec["lengths"], reverse=True)
                        and len(set(c.spec["lengths"])) < len(c.spec["lengths"]) for c in ties)
    assert {4, 5} <= {c.spec["n_layers"] for c in lstm}
    embed = corpus("embed", examples=300, seed=5, profile="dev")
    middle = [c for c in embed if c.spec.get("ignore_label") is not None
              and 0 < c.spec["ignore_label"] < c.spec["vocab"] - 1]
    assert len(middle) >= 3, len(middle)
