"""harness.core.cases.build_arrays(names=...): the arrays asked for are, bit for bit, those of a whole build (an
embedding case draws only them), injected values and a case's own arrays included; a case too big is refused
just the same."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness.core import cases
from harness.core.case_limits import check_case_size, estimate_case_bytes, max_case_bytes_default
from harness.core.cases import Case, build_arrays, decode_array, encode_array
from harness.core.corpus_files import load_case_file, load_corpus, write_corpus
from harness.core.errors import CaseError, HarnessError, InvalidArgument
from harness.generate.profile_sizes import bounds_for
from harness.generate.profiles import DB_ENV, PROFILE_ENV, PROFILES, database_path, default_profile, load_profile
from harness.generate.sampler import bad_corpus, corpus
from harness.generate.strategies import any_case, bad_inputs

RAISES = {"kind": "raises", "errors": ["ValueError"]}
CASES = [
    Case("embed", 0, {"vocab": 7, "width": 3, "ids_shape": [4, 5]}),
    Case("embed", 1, {"vocab": 50, "width": 2, "ids_shape": [3, 6], "row_lengths": [6, 2, 4], "pad_id": 0,
                      "gy_kind": "cancel", "w_dtype": "float16", "id_dtype": "int64"}),
    Case("embed", 2, {"vocab": 9, "width": 4, "ids_shape": [8], "ignore_label": -1, "ignore_frac": 0.25}),
    Case("embed", 3, {"vocab": 5, "width": 3, "ids_shape": [4], "inject": [
        {"array": "gy", "index": 5, "value": "nan"}, {"array": "W", "index": 1, "value": "inf"},
        {"array": "x", "index": 2, "value": 9}]}, expect=RAISES),
    Case.from_dict({"family": "embed", "seed": 4, "spec": {"vocab": 5, "width": 3, "ids_shape": [4]},
                    "arrays": {"x": {"dtype": "int32", "shape": [4], "data": [4, 4, 0, 1]}}}),
    Case("pipeline", 5, {"vocab": 11, "width": 3, "hidden": 2, "n_layers": 1, "lengths": [3, 1]}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("names", [("x",), ("x", "gy"), ("gy",), ("W", "ggW"), ()])
def test_the_named_arrays_are_those_of_a_whole_build(case, names, monkeypatch):
    monkeypatch.setattr(cases, "_BUILT", cases._BuiltArrays())  # nothing kept: each build draws its arrays
    part = build_arrays(case, names=names)
    assert case.id not in cases._BUILT  # a partial build is not kept
    whole = build_arrays(case)
    assert sorted(part) == sorted(n for n in names if n in whole)
    for name, a in part.items():
        assert a.dtype == whole[name].dtype and a.shape == whole[name].shape
        assert a.tobytes() == whole[name].tobytes(), name


def test_a_partial_build_is_refused_like_a_whole_one_and_is_a_fresh_copy():
    case = Case("embed", 6, {"vocab": 1000, "width": 1000, "ids_shape": [10]})
    with pytest.raises(CaseError, match="over the limit"):
        build_arrays(case, max_bytes=1 << 20, names=("x",))
    small = Case("embed", 7, {"vocab": 5, "width": 2, "ids_shape": [3]})
    first = build_arrays(small, names=("x",))
    first["x"][...] = 0
    assert np.array_equal(build_arrays(small, names=("x",))["x"], build_arrays(small)["x"])


def _shared_to(monkeypatch, folder):
    from harness.core import array_draws

    monkeypatch.setenv(array_draws.SHARED_ENV, str(folder))
    monkeypatch.setattr(cases, "_BUILT", cases._BuiltArrays())


@pytest.mark.parametrize("case", [
    Case("embed", 3, {"vocab": 700, "width": 400, "ids_shape": [30, 20],
                      "inject": [{"array": "W", "index": 5, "value": "nan"}]}, expect=RAISES),
    Case("lstm", 4, {"n_layers": 1, "hidden": 520, "in_size": 3, "lengths": [2, 1]}),
    Case("pipeline", 5, {"vocab": 1100, "width": 300, "hidden": 2, "n_layers": 1, "lengths": [3, 1]}),
], ids=lambda c: c.family)
def test_a_shared_draw_has_the_bits_of_a_draw_anew_in_every_process(case, tmp_path, monkeypatch):
    from harness.core.array_draws import draw_arrays

    monkeypatch.setattr(cases, "_BUILT", cases._BuiltArrays())
    monkeypatch.setenv("HARNESS_SHARED_ARRAYS", "")
    monkeypatch.setattr("harness.core.array_draws._own", [""])  # no folder: every array drawn here
    anew = build_arrays(case)
    _shared_to(monkeypatch, tmp_path)
    first = build_arrays(case)  # draws, and stores the big ones
    stored = sorted(p.name.split(".", 1)[1] for p in tmp_path.iterdir())
    assert stored and stored == sorted(cases._BUILT.mapped[case.id])
    for name in stored:  # the file holds the draw itself (before any injection)
        whole = draw_arrays(case.family, case.seed, case.spec, frozenset([name]))[name]
        assert (tmp_path / f"{case.id}.{name}").read_bytes() == whole.tobytes()
    again = build_arrays(case)  # this process again: mapped
    _shared_to(monkeypatch, tmp_path)
    other = build_arrays(case)  # another process (nothing kept): mapped
    part = build_arrays(case, names=stored[:1])
    for got in (first, again, other):
        assert got.keys() == anew.keys()
        for name in anew:
            assert got[name].dtype == anew[name].dtype and got[name].tobytes() == anew[name].tobytes(), name
    assert part[stored[0]].tobytes() == anew[stored[0]].tobytes()


def test_a_process_writing_into_a_shared_array_changes_nothing_for_the_others(tmp_path, monkeypatch):
    import os

    case = Case("embed", 8, {"vocab": 1000, "width": 300, "ids_shape": [4]})
    _shared_to(monkeypatch, tmp_path)
    want = build_arrays(case)["W"].tobytes()
    assert (tmp_path / f"{case.id}.W").exists()
    pid = os.fork()
    if pid == 0:  # another worker: writes into its input, then ends
        try:
            build_arrays(case)["W"][...] = 7.0
        finally:
            os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    mine = build_arrays(case)["W"]
    mine[...] = 5.0  # this process too
    assert (tmp_path / f"{case.id}.W").read_bytes() == want
    assert build_arrays(case)["W"].tobytes() == want
    _shared_to(monkeypatch, tmp_path)
    assert build_arrays(case)["W"].tobytes() == want


# Cases round-trip through JSON, rebuild identical bytes anywhere, and reject bad specs.

FAST = settings(max_examples=25, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _roundtrip(case: Case) -> None:
    again = Case.from_json(case.to_json())
    assert again.id == case.id and again.to_json() == case.to_json() and again == case
    assert Case.from_dict({**case.to_dict(), "id": case.id}).id == case.id


def _digests(case: Case) -> dict[str, str]:
    return {name: f"{a.dtype.str}{a.shape}:{hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()}"
            for name, a in sorted(build_arrays(case).items())}


@FAST
@given(any_case(**bounds_for("ci", "all")))
def test_drawn_cases_roundtrip_json(case):
    _roundtrip(case)


@FAST
@given(bad_inputs())
def test_drawn_bad_cases_roundtrip_json(case):
    _roundtrip(case)
    assert Case.from_json(case.to_json()).expect == case.expect


def test_corpus_cases_roundtrip_json():
    cs = corpus("all", examples=150, seed=21) + bad_corpus(examples=40, seed=21)
    for case in cs:
        _roundtrip(case)


def test_write_and_load_corpus_keep_bytes(tmp_path):
    cs = corpus("all", examples=30, seed=8)
    p1, p2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_corpus(cs, str(p1))
    write_corpus(load_corpus(str(p1)), str(p2))
    assert p1.read_bytes() == p2.read_bytes()
    write_corpus(corpus("all", examples=30, seed=9), str(p2))
    assert p1.read_bytes() != p2.read_bytes()


_BUILD_SCRIPT = """
import hashlib, json, sys
import numpy as np
from harness.core.cases import Case, build_arrays
out = []
for line in sys.stdin:
    c = Case.from_json(line)
    out.append({n: f"{a.dtype.str}{a.shape}:{hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()}"
                for n, a in sorted(build_arrays(c).items())})
print(json.dumps(out))
"""


def test_build_arrays_identical_in_a_fresh_process():
    cs = corpus("all", examples=45, seed=5) + bad_corpus(examples=20, seed=5)
    expected = [_digests(c) for c in cs]
    env = {**os.environ, "PYTHONHASHSEED": "7"}
    out = subprocess.run([sys.executable, "-c", _BUILD_SCRIPT], input="".join(c.to_json() + "\n" for c in cs),
                         env=env, capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout) == expected, out.stderr


def test_build_arrays_are_repeatable_and_independent_per_name():
    c = corpus("lstm", examples=1, seed=2)[0]
    assert _digests(c) == _digests(c)
    spec = dict(c.spec, initial_state="given" if c.spec["initial_state"] == "none" else "none")
    other = Case("lstm", c.seed, spec)
    same = {k for k in _digests(c) if k not in ("hx", "cx")}
    assert {k: _digests(c)[k] for k in same} == {k: _digests(other)[k] for k in same}


# ---- explicit arrays ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, bits", [("float16", 0x7E01), ("float32", 0x7FC00123), ("float32", 0x7F800001),
                                         ("float64", 0x7FF8DEADBEEF0001), ("float64", 0xFFF0000000000007)])
def test_nan_payloads_survive_encode_decode(dtype, bits):
    uint = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}[dtype]
    a = np.array([bits, 0, bits], dtype=uint).view(dtype)
    back = decode_array(json.loads(json.dumps(encode_array(a))))
    assert back.dtype == a.dtype and back.view(uint).tolist() == a.view(uint).tolist()


@FAST
@given(hnp.arrays(st.sampled_from(["float16", "float32", "float64"]),
                  hnp.array_shapes(min_dims=1, max_dims=3, min_side=0),
                  elements=st.floats(allow_nan=True, allow_infinity=True, width=16)))
def test_float_arrays_roundtrip_bit_exact(a):
    enc = encode_array(a)
    back = decode_array(json.loads(json.dumps(enc)))
    assert back.shape == a.shape and back.dtype == a.dtype and back.tobytes() == a.tobytes()


@FAST
@given(hnp.arrays(st.sampled_from(["int8", "int16", "int32", "int64", "uint8"]), hnp.array_shapes(min_side=0)))
def test_int_arrays_roundtrip(a):
    back = decode_array(json.loads(json.dumps(encode_array(a))))
    assert back.dtype == a.dtype and np.array_equal(back, a)


def test_explicit_ids_override_and_drive_shapes():
    x = np.array([[0, 3], [3, -1]], dtype="int16")
    c = Case("embed", 1, {"vocab": 4, "width": 2, "ids_shape": [2, 2], "id_dtype": "int16",
                          "ignore_label": -1, "id_kind": "explicit"}, {"x": encode_array(x)})
    arrays = build_arrays(c)
    assert np.array_equal(arrays["x"], x) and arrays["gy"].shape == (2, 2, 2)
    _roundtrip(c)


def test_inject_plants_nonfinite_values():
    c = Case("embed", 3, {"vocab": 5, "width": 2, "ids_shape": [4], "ignore_label": None,
                          "inject": [{"array": "W", "index": 1, "value": "nan"},
                                     {"array": "gy", "index": 2, "value": "-inf"}]},
             expect={"kind": "propagates", "behaviour": "x"}, tags=("bad:nan_inf_w",))
    a = build_arrays(c)
    assert np.isnan(a["W"].ravel()[1]) and a["gy"].ravel()[2] == -np.inf
    _roundtrip(c)


# ---- validation --------------------------------------------------------------------------------
_EMBED = {"vocab": 4, "width": 2, "ids_shape": [3]}
_LSTM = {"lengths": [2], "in_size": 2, "hidden": 2, "n_layers": 1}


@pytest.mark.parametrize("kwargs, message", [
    (dict(family="conv", seed=0, spec=_EMBED), "family='conv'"),
    (dict(family="embed", seed=-1, spec=_EMBED), "seed=-1"),
    (dict(family="embed", seed=True, spec=_EMBED), "seed=True"),
    (dict(family="embed", seed=0, spec={**_EMBED, "ids_shape": [1, 2, 3, 4]}), r"ids_shape=\[1, 2, 3, 4\]"),
    (dict(family="embed", seed=0, spec={**_EMBED, "vocab": 0}), "vocab=0"),
    (dict(family="embed", seed=0, spec={**_EMBED, "id_kind": "zipf"}), "id_kind='zipf'"),
    (dict(family="embed", seed=0, spec={**_EMBED, "ignore_frac": 1.5}), "ignore_frac=1.5"),
    (dict(family="embed", seed=0, spec={**_EMBED, "w_dtype": "int8"}), "w_dtype='int8'"),
    (dict(family="embed", seed=0, spec={**_EMBED, "gy_kind": "huge"}), "gy_kind='huge'"),
    (dict(family="lstm", seed=0, spec={**_LSTM, "lengths": []}), r"lengths=\[\]"),
    (dict(family="lstm", seed=0, spec={**_LSTM, "lengths": [2, 0]}), r"lengths=\[2, 0\]"),
    (dict(family="lstm", seed=0, spec={**_LSTM, "dropout": 1.0}), "dropout=1.0"),
    (dict(family="lstm", seed=0, spec={k: v for k, v in _LSTM.items() if k != "hidden"}), "'hidden'"),
])
def test_case_validation_names_the_field(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        Case(**kwargs)


def test_bad_cases_may_hold_zero_lengths():
    c = Case("lstm", 0, {**_LSTM, "lengths": [2, 0]}, expect={"kind": "either", "of": []}, tags=("bad:zero_length",))
    assert build_arrays(c)["xs.1"].shape == (0, 2)


# ---- profiles ------------------------------------------------------------------------------------
def test_profiles_register_and_load(monkeypatch):
    from hypothesis import settings as hsettings

    previous = hsettings.get_current_profile_name() if hasattr(hsettings, "get_current_profile_name") else None
    try:
        for name in PROFILES:
            assert load_profile(name) == name
        assert hsettings.get_profile("ci").derandomize and hsettings.get_profile("ci").deadline is None
        assert hsettings.get_profile("ci").max_examples <= 15
        assert hsettings.get_profile("dev").max_examples == 50
        assert hsettings.get_profile("audit").max_examples == 500
        monkeypatch.setenv(PROFILE_ENV, "audit")
        assert default_profile() == "audit" and load_profile() == "audit"
        monkeypatch.setenv(PROFILE_ENV, "bogus")
        with pytest.raises(InvalidArgument, match="HARNESS_PROFILE='bogus'"):
            load_profile()
        monkeypatch.delenv(PROFILE_ENV)
        monkeypatch.setenv("CI", "1")
        assert default_profile() == "ci"
        monkeypatch.delenv("CI")
        assert default_profile() == "dev"
    finally:
        hsettings.load_profile(previous or "default")


def test_database_path_honours_env(monkeypatch, tmp_path):
    monkeypatch.delenv(DB_ENV, raising=False)
    assert database_path().parts[-2:] == (".hypothesis", "examples")
    monkeypatch.setenv(DB_ENV, str(tmp_path / "db"))
    assert database_path() == tmp_path / "db"


def test_one_profile_definition():
    """Profiles are defined once: the strategies' size bounds and Hypothesis's profiles use the same names."""
    from hypothesis import settings as hsettings

    from harness.generate.profile_sizes import SIZE_BOUNDS

    assert set(SIZE_BOUNDS) == set(PROFILES)
    load_profile("ci")
    for p in PROFILES.values():
        registered = hsettings.get_profile(p.name)
        assert registered.max_examples == p.max_examples and registered.derandomize == p.derandomize
        assert (registered.database is None) == (not p.keep_examples)


# ---- every malformed case is one CaseError line naming the field and value --------------------

_E18 = {"family": "embed", "seed": 0, "spec": {"vocab": 5, "width": 3, "ids_shape": [4]}}
_L18 = {"family": "lstm", "seed": 0, "spec": {"n_layers": 1, "hidden": 2, "in_size": 2, "lengths": [2, 1]}}


def _variant(base, top=None, **spec):
    d = json.loads(json.dumps(base))
    d.update(top or {})
    if isinstance(d.get("spec"), dict):
        d["spec"].update(spec)
    return json.dumps(d)


@pytest.mark.parametrize("text,message", [
    (_variant(_E18, w_scale=float("nan")), "NaN"),
    (_variant(_E18, w_scale=float("inf")), "Infinity"),
    (b'{"family": "embed\xff"}', "not UTF-8"),
    (_variant(_L18, lengths=3), "lengths=3"),
    (_variant(_E18, ids_shape=5), "ids_shape=5"),
    (_variant(_E18, {"spec": None}), "spec=null"),
    (_variant(_E18, {"expect": "x"}), "expect='x'"),
    (_variant(_E18, {"tags": 5}), "tags=5"),
    (_variant(_E18, ignore_frac="half"), "ignore_frac='half'"),
    (_variant(_E18, w_scale="big"), "w_scale='big'"),
    (_variant(_E18, vocab=2.5), "vocab=2.5"),
    (_variant(_L18, bidirectional="yes"), "bidirectional='yes'"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("[]", "JSON object"),
])
def test_malformed_case_json_is_one_case_error(text, message):
    with pytest.raises(CaseError, match=message) as info:
        Case.from_json(text)
    assert "\n" not in str(info.value)


def test_inject_into_missing_array_is_refused_when_the_case_is_read():
    with pytest.raises(CaseError, match=r"\$\.spec\.inject\[0\]\.array='nope' names no array") as info:
        Case.from_json(_variant(_E18, inject=[{"array": "nope", "index": 0, "value": "nan"}]))
    assert "\n" not in str(info.value)


def test_corpus_bad_line_names_file_and_line(tmp_path):
    good = Case.from_json(_variant(_E18)).to_json()
    for bad in (b'{"family": 5}', b"\x00\xff\xfe binary", _variant(_L18, lengths=3).encode()):
        p = tmp_path / "c.jsonl"
        p.write_bytes(good.encode() + b"\n" + bad + b"\n")
        with pytest.raises(CaseError, match=rf"{p}:2: ") as info:
            load_corpus(str(p))
        assert "\n" not in str(info.value)


def test_case_file_that_is_a_directory_or_not_utf8(tmp_path):
    with pytest.raises(CaseError, match="is a directory"):
        load_corpus(str(tmp_path))
    with pytest.raises(CaseError, match="is a directory"):
        load_case_file(str(tmp_path))
    p = tmp_path / "c.json"
    p.write_bytes(b"\xff\xfe")
    with pytest.raises(CaseError, match=r"c.json:1: case text is not UTF-8"):
        load_case_file(str(p))


def test_case_of_another_family_is_refused_for_a_subject():
    from harness.subjects.registry import check_case_for_subject, get_subject

    lstm_case = Case.from_json(_variant(_L18))
    with pytest.raises(CaseError, match="is a lstm case; subject='chainer.embed_id' takes embed cases"):
        check_case_for_subject(lstm_case, get_subject("chainer.embed_id"))
    check_case_for_subject(Case.from_json(_variant(_E18)), get_subject("chainer.embed_id"))  # no error


def test_huge_case_refused_before_arrays_are_built():
    import tracemalloc

    c = Case.from_json(_variant(_E18, ids_shape=[30000, 30000]))
    tracemalloc.start()
    try:
        with pytest.raises(CaseError, match=r"case \w+ needs about [\d,]+ bytes of inputs, over the limit of [\d,]+"):
            build_arrays(c)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak  # refused before any array was made (NumPy reports its buffers to tracemalloc)
    assert estimate_case_bytes(c) >= 30000 * 30000 * 3 * 4  # ids, gy at least


def test_size_estimate_bounds_the_real_arrays():
    for text in (_variant(_E18), _variant(_L18), _variant(_L18, bidirectional=True, n_layers=2)):
        c = Case.from_json(text)
        real = sum(a.nbytes for a in build_arrays(c).values())
        assert estimate_case_bytes(c) >= real


def test_size_limit_default_and_env(monkeypatch):
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    monkeypatch.delenv("HARNESS_MAX_CASE_BYTES", raising=False)
    assert max_case_bytes_default() == ram // 2
    monkeypatch.setenv("HARNESS_MAX_CASE_BYTES", "100")
    assert max_case_bytes_default() == 100
    with pytest.raises(CaseError, match="over the limit of 100 bytes"):
        check_case_size(Case.from_json(_variant(_E18)))
    monkeypatch.setenv("HARNESS_MAX_CASE_BYTES", "lots")
    with pytest.raises(HarnessError, match="HARNESS_MAX_CASE_BYTES='lots'"):
        max_case_bytes_default()


def test_a_case_the_harness_wrote_reads_back_the_same_without_the_schema_check():
    """The worker reads the campaign's own ``to_json`` with ``from_own_json`` (no second schema check): the same
    case, id and bytes, for every case of the default corpus and the relations' members (explicit arrays)."""
    from harness.execute.relations import RELATIONS, members
    from harness.generate.corpora import default_corpus, relation_cases

    cases = default_corpus() + relation_cases()
    cases += [m.case for c in relation_cases() for m in members(c, list(RELATIONS.values()))]
    assert any(c.arrays for c in cases)
    for c in cases:
        back = Case.from_own_json(c.to_json())
        assert back == c and back.id == c.id and back.to_json() == c.to_json(), c.id


def test_a_case_of_its_own_json_skips_only_the_schema(monkeypatch):
    """``from_own_json`` checks no schema (a worker parses every case it runs: the schema was half of it), but
    the case's own rules still hold; text from anywhere else is checked whole."""
    from harness.core import schema_check

    asked = []
    real = schema_check.check
    monkeypatch.setattr(schema_check, "check", lambda data, schema: asked.append(schema) or real(data, schema))
    own = Case.from_json(_variant(_L18))
    assert len(asked) == 1  # from_json: checked once, on the text's own data
    asked.clear()
    assert Case.from_own_json(own.to_json()) == own
    assert asked == []
    with pytest.raises(CaseError, match=r"lengths=\[2, 0\] must hold ints >= 1"):
        Case.from_own_json(_variant(_L18, lengths=[2, 0]))
    assert asked == []
    with pytest.raises(CaseError):
        Case.from_json(_variant(_L18, lengths=[2, 0]))
    assert asked


def test_built_arrays_are_kept_for_a_whole_corpus_by_bytes_and_handed_out_as_copies(monkeypatch):
    """A worker meets each case once per subject, subject after subject: the default corpus's arrays are all
    kept (each built once over two passes), a subject writing into its inputs changes nothing, and the bound
    is bytes (the newest case always kept)."""
    from harness.core import cases as cases_mod
    from harness.generate.corpora import default_corpus

    corpus = default_corpus()  # (building a corpus builds some arrays itself)
    built = []
    real = cases_mod._build_arrays
    monkeypatch.setattr(cases_mod, "_build_arrays", lambda c: built.append(c.id) or real(c))
    monkeypatch.setattr(cases_mod, "_BUILT", cases_mod._BuiltArrays())
    first = [build_arrays(c) for c in corpus]
    again = [build_arrays(c) for c in corpus]
    assert sorted(built) == sorted(c.id for c in corpus)  # once each
    for a, b in zip(first, again):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
    x = build_arrays(corpus[0])
    name = next(iter(x))
    x[name][...] = 0
    assert np.array_equal(build_arrays(corpus[0])[name], first[0][name], equal_nan=True)

    # (the shared draws of a case are mapped, not held: the bound is over what is held)
    biggest = max(sum(a.nbytes for a in arrays.values()) for arrays in cases_mod._BUILT.values())
    monkeypatch.setattr(cases_mod, "BUILT_BYTES", biggest)
    monkeypatch.setattr(cases_mod, "_BUILT", cases_mod._BuiltArrays())
    built.clear()
    for c in corpus:
        build_arrays(c)
        held = sum(a.nbytes for arrays in cases_mod._BUILT.values() for a in arrays.values())
        assert held == cases_mod._BUILT.held  # the running sum is the sum
        assert held <= biggest or len(cases_mod._BUILT) == 1
        assert next(reversed(cases_mod._BUILT)) == c.id
    assert len(built) == len(corpus) and len(cases_mod._BUILT) < len(corpus)


def test_a_content_is_checked_against_the_schema_once_and_refused_alike_each_time(monkeypatch):
    calls: list[str] = []
    real = cases.schema_check.check
    monkeypatch.setattr(cases.schema_check, "check", lambda data, schema: calls.append(data["family"]) or
                        real(data, schema))
    monkeypatch.setattr(cases, "_SCHEMA_VERDICTS", cases.ContentMemo())
    spec = {"vocab": 7, "width": 3, "ids_shape": [5], "id_kind": "collision", "distinct": 2}
    a, b = Case("embed", 11, spec), Case("embed", 11, dict(spec))
    assert a == b and len(calls) == 1  # the second build of the same content was not walked again
    Case("embed", 12, spec)
    assert len(calls) == 2  # another content is
    refusals = []
    for _ in range(2):
        with pytest.raises(InvalidArgument) as info:
            Case("embed", 13, {**spec, "vocab": -1})
        refusals.append(str(info.value))
    assert refusals[0] == refusals[1] == "$.spec.vocab=-1 must be >= 1" and len(calls) == 3
    with pytest.raises(InvalidArgument, match=r"\$\.spec\.vocab=NaN must be an integer"):  # no JSON text: checked
        Case("embed", 14, {**spec, "vocab": float("nan")})
    assert len(calls) == 4
