"""harness.core.cases.build_arrays(names=...): the arrays asked for are, bit for bit, those of a whole build (an
embedding case draws only them), injected values and a case's own arrays included; a case too big is refused
just the same."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core import cases
from harness.core.cases import Case, build_arrays
from harness.core.errors import CaseError

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
