"""Every field of every input format the harness reads from a user, made invalid, is refused by the verb that
reads it: exit 2 and one ``harness: error:`` line naming the file, the field and the value (docs/inputs.md).

Hypothesis draws, for each field path of a valid document (a case file, a corpus line, the contracts file, an
audit file), a value that breaks it (another JSON type, a value out of range, a string that names nothing),
removes a field or adds an unknown one; a draw the harness's own checks accept is discarded (``assume``), so
each example is an invalid input. The verbs run in this process through :func:`harness.cli.main`: each refuses
before any worker starts, so no subject runs here.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.core import schemas
from harness.core.cases import Case, encode_array
from harness.core.errors import HarnessError
from harness.core.schema_check import brief
from tools.attacks_inputs import NPZ_DAMAGE, damage_npz

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = settings(max_examples=int(__import__("os").environ.get("INPUT_CHECK_EXAMPLES", "6")), deadline=None,
                    derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.filter_too_much])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
                    st.floats(allow_nan=False, allow_infinity=False, width=32),
                    st.text(max_size=12), st.sampled_from(["", "*", "nope", "x.y", "$\\foo{$", "-1", "1.0"]))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=2), max_leaves=4)


def paths(obj: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every path to a value inside ``obj`` (dict keys and list indices)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield prefix + (k,)
            yield from paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield prefix + (i,)
            yield from paths(v, prefix + (i,))


def effective(doc: Any, path: tuple, how: str) -> str:
    """What :func:`mutate` does: ``remove`` a dict's key, add an ``extra`` key to a dict, else ``replace``."""
    node = doc
    for k in path[:-1]:
        node = node[k]
    if how == "remove" and isinstance(node, dict) or how == "extra" and isinstance(node[path[-1]], dict):
        return how
    return "replace"


def mutate(doc: Any, path: tuple, how: str, value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for k in path[:-1]:
        node = node[k]
    last = path[-1]
    if how == "remove" and isinstance(node, dict):
        node.pop(last)
    elif how == "extra" and isinstance(node[last], dict):
        node[last]["colour_of_field"] = value
    else:
        node[last] = value
    return out


def special_values(path: tuple) -> st.SearchStrategy:
    """Values aimed at one field: bits that are not base64 or of the wrong length, dtypes that name nothing."""
    last = path[-1]
    if last == "bits":
        return st.one_of(st.text(min_size=1, max_size=8),
                         st.binary(min_size=1, max_size=20).map(lambda b: base64.b64encode(b).decode()))
    if last == "dtype":
        return st.sampled_from(["object", "V8", "str", "complex64", "float8", "<f4", "datetime64", ""])
    if last in ("digest",):
        return st.sampled_from(["", "md5:00", "sha256:" + "ab" * 32, "xxh3_128:zz", "blake3:" + "0" * 64])
    return json_values


def mutations(doc: Any, skip: Callable[[tuple], bool] = lambda p: False) -> st.SearchStrategy:
    ps = [p for p in paths(doc) if not skip(p)]

    @st.composite
    def draw(d):
        path = d(st.sampled_from(ps))
        how = d(st.sampled_from(["replace", "replace", "remove", "extra"]))
        value = d(special_values(path)) if how == "replace" else d(scalars)
        return path, effective(doc, path, how), value

    return draw()


def refused_in_one_line(argv: list[str], capsys, file: Path, path: tuple, how: str, value: Any) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("harness: error: "), (rc, path, how, value, err)
    line = lines[0]
    assert file.name in line, (file.name, line)
    key = next((k for k in reversed(path) if isinstance(k, str)), None)
    named = {"extra": "colour_of_field"}.get(how, key)
    # the field: its key (an item of a list is named through its list), or the first field its absence broke
    assert named is None or named in line or re.search(r"\$[.\[]", line), (named, line)
    if how == "replace" and re.search(re.escape(f"{_json_path(path)}="), line):
        assert brief(value) in line, (brief(value), line)  # the value, as the message vocabulary writes it
    return line


def _json_path(path: tuple) -> str:
    from harness.core.schema_check import json_path

    return json_path(path)


# ---- a case file, and a line of a corpus ----------------------------------------------------------------------
EMBED = Case("embed", 5, {"vocab": 6, "width": 3, "ids_shape": [4], "id_kind": "explicit", "ignore_label": -1,
                          "inject": [{"array": "W", "index": 2, "value": "nan"}]},
             arrays={"x": encode_array(np.array([0, 5, -1, 2], np.int32)),
                     "gy": encode_array(np.arange(12, dtype=np.float32).reshape(4, 3))},
             expect={"kind": "documented", "behaviour": "NaN propagates"}, tags=("bad:nan_inf_w",)).to_dict()
LSTM = Case("lstm", 7, {"n_layers": 1, "hidden": 2, "in_size": 3, "lengths": [2, 1], "xs_widths": [3, 4],
                        "bidirectional": False, "dtype": "float32"},
            expect={"kind": "raises", "errors": ["InvalidType"]}, tags=("bad:xs_widths_mismatch",)).to_dict()


def _case_invalid(doc: Any, subject: str) -> bool:
    from harness.subjects.registry import check_case_for_subject, get_subject

    try:
        check_case_for_subject(Case.from_json(json.dumps(doc)), get_subject(subject))
    except HarnessError:
        return True
    return False


@pytest.mark.parametrize("doc, subject", [(EMBED, "chainer.embed_id"), (LSTM, "chainer.NStepLSTM")],
                         ids=["embed", "lstm"])
@EXAMPLES
@given(data=st.data())
def test_every_field_of_a_case_file_made_invalid_is_one_line_exit_2(tmp_path, capsys, doc, subject, data):
    path, how, value = data.draw(mutations(doc, skip=lambda p: p == ("version",) and False))
    bad = mutate(doc, path, how, value)
    assume(_case_invalid(bad, subject))
    f = tmp_path / "case.json"
    f.write_text(json.dumps(bad))
    refused_in_one_line(["replay", str(f), "--subject", subject], capsys, f, path, how, value)


@EXAMPLES
@given(data=st.data())
def test_every_field_of_a_corpus_line_made_invalid_names_the_file_and_line(tmp_path, capsys, data):
    path, how, value = data.draw(mutations(EMBED))
    bad = mutate(EMBED, path, how, value)
    assume(_case_invalid(bad, "chainer.embed_id"))
    f = tmp_path / "corpus.jsonl"
    good = Case.from_dict(LSTM)
    f.write_text(good.to_json() + "\n" + json.dumps(bad) + "\n")
    line = refused_in_one_line(["replay", str(f), "--subject", "chainer.NStepLSTM", "--case-id", good.id], capsys, f,
                               path, how, value)
    assert f"{f.name}:2:" in line, line


# ---- the contracts file ---------------------------------------------------------------------------------------
def _toml_string(v: str) -> str:
    if any(0xD800 <= ord(c) <= 0xDFFF for c in v):
        raise TypeError("a lone surrogate: no TOML text holds one")
    return '"' + "".join("\\" + c if c in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c
                         for c in v) + '"'


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return _toml_string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_string(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def to_toml(data: dict) -> str:
    out = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, list) or
           not all(isinstance(x, dict) for x in v) or not v]
    for k, v in data.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for row in v:
                out += ["", f"[[{k}]]"] + [f"{key} = {_toml_value(x)}" for key, x in row.items()]
    return "\n".join(out) + "\n"


def _shipped_contracts() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "contracts.toml").read_text())


CONTRACTS = _shipped_contracts()
# one table of each kind stands for its kind (every key of each kind is in one of them)
_FIRST = {("contract", 0), ("contract", 1), ("bad_input", 0), ("bad_input", 3), ("known_defect", 0),
          ("known_defect", 7)}


def _contracts_invalid(text: str, where: Path) -> bool:
    from harness.core.contexts import CONTEXTS
    from harness.judge.contracts import load_contracts
    from harness.outputs.contract_checks import problems
    from harness.subjects.registry import SUBJECTS

    where.write_text(text)
    try:
        return bool(problems(load_contracts(where), SUBJECTS, CONTEXTS))
    except HarnessError:
        return True


@EXAMPLES
@given(data=st.data())
def test_every_field_of_the_contracts_file_made_invalid_is_one_line_exit_2(tmp_path, capsys, data):
    path, how, value = data.draw(mutations(CONTRACTS, skip=lambda p: len(p) > 1 and (p[0], p[1]) not in _FIRST))
    assume(not any(v is None for v in [value]) and how != "extra" or isinstance(value, (str, int, bool)))
    bad = mutate(CONTRACTS, path, how, value)
    try:
        text = to_toml(bad)
    except TypeError:  # TOML has no null nor lone surrogates: not a file anyone can write
        assume(False)
    import tomllib

    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:  # the writer above made no TOML (a table where a value goes): not a field
        assume(False)
    f = tmp_path / "c.toml"
    assume(_contracts_invalid(text, f))
    out = tmp_path / f"run-{uuid.uuid4().hex[:8]}"
    refused_in_one_line(["gate", "--contracts", str(f), "--devices", "cpu", "--out", str(out), "--quiet"], capsys, f,
                        path, how, value)
    assert not (out / "tasks.jsonl").exists() and not (out / "corpus.jsonl").exists()  # refused before any work


# ---- an audit file --------------------------------------------------------------------------------------------
def _audit_doc() -> dict:
    from harness.judge.comparator import DIGEST_ALGORITHM, digest
    from harness.judge.sketch import tensor_sketch

    y = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    t = {"digest": digest(y), "dtype": "float32", "shape": [2, 3], "repeats_agreed": True, "sketch": tensor_sketch(y)}
    e = {"case_id": "c0", "family": "embed", "subject": "chainer.embed_id", "role": "subject", "device": "cpu",
         "context": "default", "bad_input": False, "status": "ok", "error": None, "skip_reason": None,
         "repeats_agreed": True, "array_file": None, "tensors": {"y": t}}
    return {"format": "harness-audit", "version": 1, "id": "0123456789ab", "digest": DIGEST_ALGORITHM,
            "created": "2026-01-01T00:00:00+00:00", "environment": {"python": "3.11", "gpu": {"available": False}},
            "corpus": {"path": "x", "digest": "d", "cases": 1, "shard": None, "full_digest": "d", "full_cases": 1},
            "settings": {"repeats": 2, "fresh": 0, "timeout": 60.0, "devices": ["cpu"], "contexts": ["default"],
                         "subjects": ["chainer.embed_id"], "plugins": [], "keep_arrays": False},
            "arrays_dir": None, "seconds": 1.0, "entries": [e]}


AUDIT = _audit_doc()


def _audit_invalid(doc: Any, where: Path) -> bool:
    from harness.outputs.audit import load_audit

    where.write_text(json.dumps(doc))
    try:
        load_audit(where)
    except HarnessError:
        return True
    return False


@EXAMPLES
@given(data=st.data())
def test_every_field_of_an_audit_entry_made_invalid_is_one_line_exit_2(tmp_path, capsys, data):
    # the environment fingerprint is open (a newer harness records more): its fields are typed, not closed
    path, how, value = data.draw(mutations(AUDIT, skip=lambda p: p[0] == "environment" and len(p) > 2))
    bad = mutate(AUDIT, path, how, value)
    f = tmp_path / "a.json"
    assume(_audit_invalid(bad, f))
    good = tmp_path / "b.json"
    good.write_text(json.dumps(AUDIT))
    refused_in_one_line(["compare", str(f), str(good)], capsys, f, path, how, value)


@pytest.mark.parametrize("kind", list(NPZ_DAMAGE))
def test_the_arrays_an_audit_points_to_are_checked_as_they_are_read(tmp_path, capsys, kind):
    keep = tmp_path / "arrays"
    keep.mkdir()
    doc = copy.deepcopy(AUDIT)
    doc["arrays_dir"] = str(keep)
    doc["entries"][0]["array_file"] = "0.npz"
    damage_npz(kind, keep / "0.npz")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(doc))
    b.write_text(json.dumps(doc))
    rc = main(["compare", str(a), str(b)])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("harness: error: "), lines
    assert "a.json" in lines[0] and "0.npz" in lines[0], lines[0]


# The input schemas (harness/core/schemas.py) are valid Draft 2020-12 schemas: checked here, once, so that no
# process of the harness pays for the meta-schema check at start-up.

SCHEMAS = {"CASE": schemas.CASE, "CONTRACTS": schemas.CONTRACTS, "AUDIT": schemas.AUDIT,
           "ENVIRONMENT": schemas.ENVIRONMENT, "CAMPAIGN": schemas.CAMPAIGN,
           **{f"spec_schema({f!r})": schemas.spec_schema(f) for f in schemas.FAMILIES}}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_schema_is_a_valid_draft_2020_12_schema(name):
    jsonschema.Draft202012Validator.check_schema(SCHEMAS[name])


def test_the_check_can_fail():
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.Draft202012Validator.check_schema({"type": "integr"})
