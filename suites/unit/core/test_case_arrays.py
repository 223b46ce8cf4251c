"""A case's explicit arrays and the fields that must agree with each other are checked when the case is read:
each problem one line naming the field's JSON path and its value; the arrays decode once and rebuild the same."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from harness.core.case_arrays import array_layout
from harness.core.cases import Case, build_arrays, encode_array
from harness.core.corpus_files import load_case_file
from harness.core.errors import CaseError

EMBED = {"family": "embed", "seed": 0, "spec": {"vocab": 5, "width": 3, "ids_shape": [4]}}
LSTM = {"family": "lstm", "seed": 0, "spec": {"in_size": 3, "hidden": 3, "n_layers": 1, "lengths": [2, 1]}}
RAISES = {"kind": "raises", "errors": ["ValueError"]}


def _with(base, arrays=None, expect=None, **spec):
    d = {**base, "spec": {**base["spec"], **spec}}
    if arrays is not None:
        d["arrays"] = arrays
    if expect is not None:
        d["expect"] = expect
    return d


@pytest.mark.parametrize("case, field, value", [
    (_with(EMBED, {"gy": {"dtype": "float32", "shape": [4, 3], "bits": "@@@"}}), "$.arrays.gy.bits", "'@@@'"),
    (_with(EMBED, {"gy": {"dtype": "float32", "shape": [4, 3], "bits": "AAAA"}}), "$.arrays.gy.bits", "'AAAA'"),
    (_with(EMBED, {"gy": {"dtype": "float32", "shape": [4, 3], "bits": base64.b64encode(bytes(52)).decode()}}),
     "$.arrays.gy.bits", "'AAAA"),
    (_with(EMBED, {"gy": {"dtype": "object", "shape": [1], "data": [1]}}), "$.arrays.gy.dtype", "'object'"),
    (_with(EMBED, {"gy": {"dtype": "V4", "shape": [1], "bits": "AAAAAA=="}}), "$.arrays.gy.dtype", "'V4'"),
    (_with(EMBED, {"gy": {"dtype": "complex64", "shape": [1], "data": [1]}}), "$.arrays.gy.dtype", "'complex64'"),
    (_with(EMBED, {"x": {"dtype": "int32", "shape": [4], "data": ["1", 2, 3, 4]}}), "$.arrays.x.data[0]", "'1'"),
    (_with(EMBED, {"x": {"dtype": "int8", "shape": [4], "data": [1, 2, 3, 300]}}), "$.arrays.x.data[3]", "300"),
    (_with(EMBED, {"x": {"dtype": "int32", "shape": [4], "data": [1, 2, 3]}}), "$.arrays.x.data", "[1, 2, 3]"),
    (_with(EMBED, {"x": {"dtype": "int32", "shape": [5], "data": [1, 2, 3, 4, 0]}}), "$.arrays.x.shape", "[5]"),
    (_with(EMBED, {"nope": {"dtype": "int32", "shape": [4], "data": [1, 2, 3, 4]}}), "$.arrays.nope", "nope"),
    (_with(EMBED, inject=[{"array": "nope", "index": 0, "value": 1}], expect=RAISES), "$.spec.inject[0].array",
     "'nope'"),
    (_with(EMBED, inject=[{"array": "x", "index": 0, "value": "nan"}], expect=RAISES), "$.spec.inject[0].value",
     "'nan'"),
    (_with(LSTM, xs_widths=[3]), "$.spec.xs_widths", "[3]"),
    (_with(LSTM, xs_widths=[3, 9]), "$.spec.xs_widths", "[3, 9]"),
    (_with(LSTM, xs_widths=[3, 9, 3], expect=RAISES), "$.spec.xs_widths", "[3, 9, 3]"),
])
def test_a_case_whose_arrays_or_fields_disagree_is_refused_in_one_line_naming_file_field_and_value(
        tmp_path, case, field, value):
    p = tmp_path / "case.json"
    p.write_text(json.dumps(case))
    with pytest.raises(CaseError) as info:
        load_case_file(str(p))
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{p}:1: {field}"), msg
    assert value in msg, msg


def test_explicit_arrays_decode_once_and_rebuild_bit_identically():
    gy = np.arange(12, dtype=np.float32).reshape(4, 3) - 5.5
    x = np.array([0, 4, 2, 1], dtype=np.int32)
    case = Case.from_dict(_with(EMBED, {"gy": encode_array(gy), "x": encode_array(x)}))
    a, b = build_arrays(case), build_arrays(Case.from_json(case.to_json()))
    assert a["gy"].tobytes() == gy.tobytes() and b["gy"].tobytes() == gy.tobytes()
    assert a["x"].dtype == np.int32 and a["x"].tolist() == x.tolist()
    a["gy"][0, 0] = 99  # a copy: the case's decoded array is not changed by a subject writing into its inputs
    assert build_arrays(case)["gy"][0, 0] == gy[0, 0]


@pytest.mark.parametrize("d", [EMBED, LSTM, _with(LSTM, bidirectional=True, initial_state="given", n_layers=2),
                               {"family": "pipeline", "seed": 3, "spec": {"vocab": 7, "width": 4, "hidden": 3,
                                                                          "n_layers": 1, "lengths": [3, 1]}}])
def test_the_layout_names_every_array_a_case_builds_with_its_shape_and_dtype(d):
    case = Case.from_dict(d)
    built = build_arrays(case)
    layout = array_layout(case.family, case.spec)
    assert sorted(layout) == sorted(built)
    for name, (shape, dtype) in layout.items():
        assert (built[name].shape, built[name].dtype.name) == (shape, dtype), name
