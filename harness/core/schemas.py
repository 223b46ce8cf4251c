"""Every input file's schema, as data.

Four file kinds come from outside the harness: a case (one JSON object, or a line of a corpus), the contracts
file (TOML), an audit file (JSON) and a run directory's ``campaign.json``. Each is read with the limits of
:mod:`harness.core.input_parsing` and then validated *whole* against one JSON Schema here (:data:`CASE`,
:data:`CONTRACTS`, :data:`AUDIT`, :data:`CAMPAIGN`) by :func:`harness.core.schema_check.check`, whose one-line
messages name the JSON path of the first bad field, its value and what it must be. The schemas are kept apart
from the parser and the check engine because they are the part that changes: a new field is data, not code.

Adding a field is one dict entry: a case spec key in :data:`SPEC_FIELDS` (with the families it belongs to),
a contracts key in :data:`CONTRACT_FIELDS` / :data:`BAD_INPUT_FIELDS` / :data:`KNOWN_DEFECT_FIELDS`, an audit
entry field in :data:`AUDIT_ENTRY_FIELDS`, a campaign.json key in :data:`CAMPAIGN_FIELDS`. ``required`` lists
and cross-field rules (``allOf`` of ``if``/``then`` with a ``message``) sit beside each table.

>>> from harness.core.schema_check import check
>>> check({"family": "embed", "seed": 1, "spec": {"vocab": 3, "width": 2, "ids_shape": [4]}}, CASE) is None
True
>>> check({"family": "lstm", "seed": 1, "spec": {"n_layers": 1, "hidden": 2, "in_size": 2, "lengths": [1],
...        "xs_widths": [-3]}}, CASE)
'$.spec.xs_widths[0]=-3 must be >= 0'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from harness.core.vocabulary import (
    CASE_FAMILIES,
    COMPUTE_PHASES,
    FAMILIES,
    MODEL_FAMILIES,
    PHASE_SPELLINGS,
    RELATIONS,
    ROLES,
)

__all__ = ["FAMILIES", "FLOAT_DTYPES", "ID_DTYPES", "ID_KINDS", "GRAD_KINDS", "GRAD_OUTPUTS", "WEIGHT_KINDS",
           "MODEL_RECIPES", "OPTIMIZERS", "CASE", "spec_schema", "SPEC_FIELDS", "CONTRACTS", "CONTRACT_FIELDS",
           "BAD_INPUT_FIELDS",
           "KNOWN_DEFECT_FIELDS", "ORACLE_RULES", "NUMBER_DTYPES", "TENSOR_DTYPES", "AUDIT", "AUDIT_ENTRY_FIELDS",
           "AUDIT_TENSOR_FIELDS", "ENVIRONMENT", "CAMPAIGN", "CAMPAIGN_FIELDS", "MAX_TIMEOUT"]

#: The largest number of seconds a timeout may be (a week: beyond it ``time.monotonic() + t`` and the
#: poll loops stop making sense, and ``1e308`` overflows them).
MAX_TIMEOUT = 7 * 24 * 3600.0


# ==== building blocks =========================================================================
INT = {"type": "integer"}
NAT = {"type": "integer", "minimum": 0}
POS = {"type": "integer", "minimum": 1}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
STR = {"type": "string"}
NAME = {"type": "string", "minLength": 1}


def _null(s: Mapping[str, Any]) -> dict[str, Any]:
    return {"anyOf": [dict(s), {"type": "null"}]}


def _list(item: Mapping[str, Any], **kw: Any) -> dict[str, Any]:
    return {"type": "array", "items": dict(item), **kw}


def _obj(fields: Mapping[str, Any], required: Sequence[str] = (), closed: bool = True, **kw: Any) -> dict[str, Any]:
    return {"type": "object", "properties": dict(fields), "required": list(required),
            **({"additionalProperties": False} if closed else {}), **kw}


def _when(condition: Mapping[str, Any], then: Mapping[str, Any]) -> dict[str, Any]:
    return {"if": {"type": "object", **condition}, "then": dict(then)}


# ==== the case ================================================================================
_FAMILIES = FAMILIES
_EMBED, _LSTM, _PIPE = ("embed",), ("lstm",), ("pipeline",)
_IDS = ("embed", "pipeline")
_RNN = ("lstm", "pipeline")
_ALL = _FAMILIES
FLOAT_DTYPES = ("float16", "float32", "float64")
#: The dtypes of the numbers a case's explicit array may hold (what ``encode_array`` writes: ``dtype.name``).
NUMBER_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", *FLOAT_DTYPES)
#: The dtypes an audit's tensor may have: a subject's outputs are numbers (complex ones included).
TENSOR_DTYPES = (*NUMBER_DTYPES, "complex64", "complex128")
ID_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32")
ID_KINDS = ("uniform", "collision", "all_equal", "sorted", "explicit")
GRAD_KINDS = ("random", "ones", "zeros", "large", "cancel")
#: Which outputs of an LSTM or pipeline case receive an upstream gradient (harness.core.cases.receives_gradient).
GRAD_OUTPUTS = ("all", "hy", "cy", "ys", "ys_some", "hy_ys_some")
WEIGHT_KINDS = ("lecun", "chaotic")
_FLOAT_DTYPES = list(FLOAT_DTYPES)
_ID_DTYPES = list(ID_DTYPES)

#: Every spec key: its schema and the families whose specs may hold it. A new key is one entry here.
SPEC_FIELDS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "vocab": (POS, _IDS),
    "width": (POS, _IDS),
    "ids_shape": (_list(NAT, maxItems=8), _EMBED),
    "id_kind": ({"enum": list(ID_KINDS)}, _IDS),
    "distinct": (POS, _IDS),
    "ignore_label": (_null(INT), _IDS),
    "ignore_frac": ({"type": "number", "minimum": 0, "maximum": 1}, _IDS),
    # Padded id batches as recipes make them (harness.generate.recipes): the id every row is padded with past
    # its length (ESPnet's decoder and LM: eos = V - 1, with no ignore label) instead of the ignore label, the
    # id every row starts with (ESPnet's decoder input: sos, the same id as eos), and, for an embedding's 2-D
    # ids, each row's length (rows past the list are whole).
    "pad_id": (INT, _IDS),
    "sos_id": (INT, _IDS),
    "row_lengths": (_list(NAT, minItems=1), _EMBED),
    "id_dtype": ({"enum": _ID_DTYPES}, _IDS),
    "w_dtype": ({"enum": _FLOAT_DTYPES}, _EMBED),
    "w_shape": (_list(NAT, maxItems=8), _EMBED),
    "w_scale": ({"type": "number", "minimum": 0}, _ALL),
    "gy_kind": ({"enum": list(GRAD_KINDS)}, _ALL),
    "n_layers": (POS, _RNN),
    "hidden": (POS, _RNN),
    "in_size": (POS, _LSTM),
    "lengths": (_list(NAT, minItems=1), _RNN),
    "bidirectional": (BOOL, _RNN),
    "dtype": ({"enum": _FLOAT_DTYPES}, _RNN),
    "dropout": ({"type": "number", "minimum": 0, "exclusiveMaximum": 1}, _RNN),
    "dropout_seed": (NAT, _RNN),
    "initial_state": ({"enum": ["none", "given"]}, _RNN),
    "grad_outputs": ({"enum": list(GRAD_OUTPUTS)}, _RNN),
    "weight_kind": ({"enum": list(WEIGHT_KINDS)}, _RNN),
    # Bad inputs: per-sequence widths that disagree with in_size. Never negative: a negative width is
    # no input at all, and it made the size estimate (and so --max-case-bytes) too small.
    "xs_widths": (_list(NAT, minItems=1), _LSTM),
    "inject": (_list(_obj({"array": NAME, "index": NAT,
                           "value": {"anyOf": [NUM, {"enum": ["nan", "inf", "-inf"]}],
                                     "message": "must be a number or 'nan', 'inf', '-inf'"}},
                          ["array", "index", "value"])), _ALL),
    "relation": (_obj({"name": {"enum": list(RELATIONS)}, "base": NAME,
                       "label": STR, "index": _list(NAT)}, ["name", "base", "label", "index"]), _ALL),
}
#: The keys each family's spec must hold.
SPEC_REQUIRED = {"embed": ["vocab", "width", "ids_shape"], "lstm": ["n_layers", "hidden", "in_size", "lengths"],
                 "pipeline": ["vocab", "width", "n_layers", "hidden", "lengths"]}

# ---- the model family (harness.subjects.model): K optimizer steps of a model, everything drawn from the seed ----
#: What a model case trains (harness.subjects.model_calls): ESPnet's blstmp encoder with a CTC head, an RNN LM on
#: ESPnet's deterministic EmbedID (eos padding), the same LM on Chainer's EmbedID (ignore_label=-1).
MODEL_RECIPES = ("espnet_blstmp_ctc", "espnet_rnnlm", "chainer_lm")
#: The optimizers of ESPnet1's chainer training (AdaDelta with eps 1e-8 is its default).
OPTIMIZERS = ("adadelta", "adam")
_MODEL = MODEL_FAMILIES
# The keys a model spec shares with the call families mean the same there: the label vocabulary (a CTC head's
# output labels, blank 0 among them), the input width (an embedding's, or the features'), the LSTM's units and
# layers, how ids are drawn.
for _key in ("vocab", "width", "hidden", "n_layers", "id_kind"):
    SPEC_FIELDS[_key] = (SPEC_FIELDS[_key][0], SPEC_FIELDS[_key][1] + _MODEL)
SPEC_FIELDS.update({
    "recipe": ({"enum": list(MODEL_RECIPES)}, _MODEL),
    "steps": (POS, _MODEL),
    "batch": (POS, _MODEL),
    "min_len": (POS, _MODEL),
    "max_len": (POS, _MODEL),
    "eprojs": (POS, _MODEL),
    "subsample": (_list(POS, minItems=1), _MODEL),
    "optimizer": ({"enum": list(OPTIMIZERS)}, _MODEL),
    "clip": ({"type": "number", "exclusiveMinimum": 0}, _MODEL),
    # The instability baseline's start: one ULP up in one element of one parameter, after the initial draw
    # (no param: the first weight matrix in the model's parameter order).
    "perturb": (_obj({"param": NAME, "index": NAT}, ["index"]), _MODEL),
})
SPEC_REQUIRED["model"] = ["recipe", "steps", "batch", "max_len", "vocab", "width", "hidden", "n_layers"]


def spec_schema(family: str) -> dict[str, Any]:
    """The schema of one family's spec, built from :data:`SPEC_FIELDS` (the same object on every call)."""
    if family not in _SPECS:
        _SPECS[family] = _obj({k: s for k, (s, fams) in SPEC_FIELDS.items() if family in fams},
                              SPEC_REQUIRED[family])
    return _SPECS[family]


_SPECS: dict[str, dict[str, Any]] = {}


_EXPECT_FIELDS: dict[str, Any] = {
    "kind": {"enum": ["raises", "documented", "propagates", "either"]},
    "errors": _list(NAME), "errors_in_debug": _list(NAME), "subjects": _list(NAME),
    "devices": _list({"enum": ["cpu", "gpu"]}), "behaviour": STR, "why": STR,
}
_EXPECT = _obj({**_EXPECT_FIELDS, "of": _list(_obj(_EXPECT_FIELDS, ["kind"]))}, ["kind"],
               allOf=[_when({"properties": {"kind": {"const": "raises"}}}, {"required": ["errors"]}),
                      _when({"properties": {"kind": {"const": "either"}}}, {"required": ["of"]})])
_ARRAY = _obj({"dtype": NAME, "shape": _list(NAT, maxItems=8), "data": {"type": "array"}, "bits": STR},
              ["dtype", "shape"], oneOf=[{"required": ["data"]}, {"required": ["bits"]}])

#: A case (harness.core.cases.Case.to_dict, and a line of a corpus).
CASE: dict[str, Any] = _obj(
    {"version": {"type": "integer", "const": 1, "message": "is not supported (this harness reads version 1)"},
     "family": {"enum": list(CASE_FAMILIES)}, "seed": NAT, "spec": {"type": "object"},
     "arrays": {"type": "object", "additionalProperties": _ARRAY}, "expect": _null(_EXPECT),
     "tags": _list(STR), "id": STR},
    ["family", "seed", "spec"],
    allOf=[_when({"properties": {"family": {"const": f}}, "required": ["family"]},
                 {"properties": {"spec": spec_schema(f)}}) for f in CASE_FAMILIES])


# ==== the contracts file ======================================================================
_RELATIONS = list(RELATIONS)
#: The looser oracle acceptances a contract may opt into (``oracle_rules``), defined in
#: :mod:`harness.judge.tolerance`; every reader takes the names from here.
ORACLE_RULES: tuple[str, ...] = ("summation_bound", "normwise", "amplification")
_PHASES = [*COMPUTE_PHASES, *PHASE_SPELLINGS]
_NAMES = _list(NAME, uniqueItems=True)
#: An exception's name as a run records it (``ValueError``; a dotted path is read as its last part).
_EXCEPTION = {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
              "message": "must be an exception's name (e.g. ValueError, InvalidType)"}
_TOL_PAIR = _list({"type": "number", "minimum": 0}, minItems=2, maxItems=2,
                  message="must be [atol, rtol], two finite numbers >= 0")

#: The keys of a ``[[contract]]`` line.
CONTRACT_FIELDS: dict[str, Any] = {
    "subject": NAME, "device": {"enum": ["cpu", "gpu"]}, "context": NAME,
    "reproducible": BOOL, "across_processes": BOOL,
    "identical_across": _list({"type": "string", "minLength": 1, "not": {"const": "*"},
                               "message": "must name a context ('*' is every context, itself included)"},
                              uniqueItems=True),
    "oracle": {"enum": ["within", "record"]},
    "tolerance": {"type": "object", "minProperties": 1, "propertyNames": {"enum": _FLOAT_DTYPES},
                  "additionalProperties": _TOL_PAIR},
    "reason": NAME, "invariant_under": _list({"enum": _RELATIONS}, uniqueItems=True),
    "oracle_rules": _list({"enum": list(ORACLE_RULES)}, uniqueItems=True),
}
_FALSE = {"properties": {"reproducible": {"const": False}}}
_RECORD = {"properties": {"oracle": {"const": "record"}}, "required": ["oracle"]}
_CONTRACT = _obj(CONTRACT_FIELDS, ["subject", "device", "reason"], allOf=[
    _when({"properties": {"across_processes": {"const": True}}, "required": ["across_processes"]},
          {"properties": {"reproducible": {"const": True, "message": "must be true where across_processes = true "
                                                                     "(bit-identical across processes implies run "
                                                                     "to run)"}},
           "required": ["reproducible"]}),
    _when(_FALSE, {"properties": {"identical_across": {"maxItems": 0, "message": "must be [] where reproducible "
                                                       "is false (results that differ run to run cannot be "
                                                       "identical to another context's)"},
                                  "invariant_under": {"maxItems": 0, "message": "must be [] where reproducible "
                                                      "is false (results that differ run to run cannot be "
                                                      "bit-identical to a related case's)"}}}),
    _when(_RECORD, {"properties": {
        "tolerance": {"not": {}, "message": "has no meaning with oracle = 'record' (nothing is judged against "
                                            "the oracle): remove it, or say oracle = 'within'"},
        "oracle_rules": {"not": {}, "message": "has no meaning with oracle = 'record': remove it"}}}),
])

#: The keys of a ``[[bad_input]]`` rule.
BAD_INPUT_FIELDS: dict[str, Any] = {
    "tag": NAME, "subjects": _NAMES, "device": {"enum": ["cpu", "gpu", "*"]},
    "outcome": {"enum": ["raises", "no_error", "any"]}, "errors": _list(_EXCEPTION, uniqueItems=True),
    "reason": NAME, "context": NAME,
    "phase": {"enum": _PHASES},
}
_RAISES = {"anyOf": [{"properties": {"outcome": {"const": "raises"}}, "required": ["outcome"]},
                     {"not": {"required": ["outcome"]}}]}
_BAD_INPUT = _obj(BAD_INPUT_FIELDS, ["tag", "reason"], allOf=[
    {"if": _RAISES, "then": {"required": ["errors", "phase"],
                             "message": "outcome = 'raises' needs errors = [...] and phase = forward, backward or "
                                        "double-backward (where the error must be raised)",
                             "properties": {"errors": {"minItems": 1}}},
     "else": {"properties": {"phase": {"not": {}, "message": "applies to outcome = 'raises' only"},
                             "errors": {"not": {}, "message": "applies to outcome = 'raises' only (a no_error or "
                                                             "any rule judges no error type): remove it"}}}},
])

#: The keys of a ``[[known_defect]]`` declaration.
KNOWN_DEFECT_FIELDS: dict[str, Any] = {
    "subjects": _NAMES, "device": {"enum": ["cpu", "gpu", "*"]}, "context": NAME,
    "tags": _list(NAME, uniqueItems=True, minItems=1), "error": _EXCEPTION, "phase": {"enum": _PHASES},
    "reason": NAME, "reference": NAME, "wrong": _list(NAME, uniqueItems=True, minItems=1),
}
_NOT_WITH_WRONG = {"not": {}, "message": "is for a crash; a declaration with wrong = [...] names tensors whose values "
                                         "are wrong, not an error"}
_KNOWN_DEFECT = _obj(KNOWN_DEFECT_FIELDS, ["subjects", "tags", "reason", "reference"], allOf=[
    {"if": {"required": ["wrong"]},
     "then": {"properties": {"error": _NOT_WITH_WRONG, "phase": _NOT_WITH_WRONG}},
     "else": {"required": ["error", "phase"],
              "message": "needs error and phase (a crash: the error's type and the phase that raises it), or "
                         "wrong = [tensor names] (values beyond the oracle's tolerance)"}},
])

#: The contracts file (TOML, read as data).
CONTRACTS: dict[str, Any] = _obj(
    {"version": {"type": "integer", "const": 1, "message": "is not supported (expected the integer 1)"},
     "contract": _list(_CONTRACT, minItems=1, message="must be an array of tables [[contract]] (at least one: "
                                                      "every subject x device x context needs a line)"),
     "bad_input": _list(_BAD_INPUT), "known_defect": _list(_KNOWN_DEFECT)},
    ["contract"])


# ==== the audit file ==========================================================================
#: The environment fingerprint's fields that compare, merge and the labels read (others pass as they are).
ENVIRONMENT: dict[str, Any] = _obj({
    "python": _null(STR), "implementation": _null(STR), "platform": _null(STR),
    "packages": {"type": "object", "additionalProperties": _null(STR)},
    "cpu": _obj({"model": _null(STR), "cores": _null(NAT)}, closed=False),
    "blas": _list(_obj({"internal_api": _null(STR), "user_api": _null(STR), "version": _null(STR),
                        "num_threads": _null(NAT)}, closed=False)),
    "env": {"type": "object", "additionalProperties": _null(STR)},
    "chainer": _obj({"version": _null(STR), "usable": BOOL}, closed=False),
    "compat_patches": _list(STR),
    "gpu": _obj({"available": BOOL, "reason": _null(STR), "driver_version": _null(STR),
                 "cuda_version": {"type": ["string", "integer", "number", "null"]},
                 "devices": _list(_obj({"name": _null(STR)}, closed=False))}, closed=False),
    "problems": _list(STR),
}, closed=False)

_STATUSES = ["ok", "error", "partial", "skipped", "crashed", "timeout"]
_SHARD = {"type": "string", "pattern": r"^[1-9][0-9]*/[1-9][0-9]*$", "message": "must be 'i/n' with 1 <= i <= n"}
#: A tensor sketch (harness.judge.sketch): a few sampled elements' bits and the norms.
SKETCH = _obj({"n": NAT, "l2": _null(NUM), "max_abs": NUM, "nan": NAT, "inf": NAT, "index": _list(NAT),
               "bits": _list({"type": "string", "pattern": "^[0-9a-fA-F]+$", "message": "must be a hex string"})},
              ["n", "l2", "max_abs", "nan", "inf", "index", "bits"], closed=False)
_DEVICE = {"type": "string", "pattern": r"^(cpu|gpu(:[0-9]+)?)$", "message": "must be cpu, gpu or gpu:N"}
#: The fields of one tensor of an audit entry (a digest's algorithm is checked against the file's $.digest by
#: harness.outputs.audit.fileformat, which knows the algorithms).
AUDIT_TENSOR_FIELDS: dict[str, Any] = {
    "digest": {"type": "string", "pattern": "^([a-z0-9_]+:)?[0-9a-f]+$|^missing$",
               "message": "must be '<algorithm>:<hex>' (what the audit wrote)"},
    "dtype": {"enum": list(TENSOR_DTYPES), "message": "must name a number dtype: " + ", ".join(TENSOR_DTYPES)},
    "shape": _list(NAT, maxItems=32), "repeats_agreed": BOOL,
    "sketch": _null(SKETCH),
}
#: The fields of one audit entry (one case x subject x device x context).
AUDIT_ENTRY_FIELDS: dict[str, Any] = {
    "case_id": NAME, "family": {"enum": list(CASE_FAMILIES)}, "subject": NAME, "device": _DEVICE, "context": NAME,
    "role": {"enum": list(ROLES)}, "bad_input": BOOL, "status": {"enum": _STATUSES},
    "error": _null(STR), "skip_reason": _null(STR), "repeats_agreed": _null(BOOL),
    "array_file": _null({"type": "string", "pattern": r"^(?!\.\.?$)[^/\\\x00]+$",
                         "message": "must be a file name in the audit's arrays_dir (no folder)"}),
    "tensors": {"type": "object", "additionalProperties": _obj(AUDIT_TENSOR_FIELDS, ["digest", "dtype", "shape"])},
}
#: An audit file (harness.outputs.audit): every field known (``cluster`` is what ``--cluster`` adds); the
#: environment fingerprint alone is open (a newer harness records more of the machine).
AUDIT: dict[str, Any] = _obj({
    "format": {"const": "harness-audit", "message": "is not 'harness-audit' (not an audit file)"},
    "version": {"type": "integer", "const": 1, "message": "is not supported (this harness reads version 1)"},
    "id": STR, "created": STR, "digest": NAME,
    "environment": ENVIRONMENT,
    "corpus": _obj({"digest": _null(STR), "cases": NAT, "path": _null(STR), "shard": _null(_SHARD),
                    "full_digest": _null(STR), "full_cases": _null(NAT)}, ["digest", "cases"]),
    "settings": _obj({"repeats": POS, "fresh": NAT, "timeout": _null({"type": "number", "exclusiveMinimum": 0}),
                      "devices": _list(_DEVICE), "contexts": _list(NAME), "subjects": _list(NAME),
                      "plugins": _list(NAME), "keep_arrays": BOOL}),
    "arrays_dir": _null(STR), "seconds": {"type": "number", "minimum": 0}, "cluster": {"type": "object"},
    "entries": _list(_obj(AUDIT_ENTRY_FIELDS, ["case_id", "family", "subject", "device", "context", "status",
                                               "tensors"])),
}, ["format", "version", "created", "environment", "corpus", "settings", "entries"])


# ==== campaign.json ===========================================================================
#: The fields of a run directory's campaign.json (what ``--resume`` continues).
CAMPAIGN_FIELDS: dict[str, Any] = {
    "subjects": _list(NAME, minItems=1, message="must name at least one subject"),
    "devices": _list({"type": "string", "pattern": r"^(cpu|gpu(:[0-9]+)?)$"}, minItems=1,
                     message="must name at least one device (cpu, gpu, gpu:N)"),
    "contexts": _list(NAME, minItems=1, message="must name at least one context"),
    "relations": _list({"enum": _RELATIONS}),
    "repeats": POS, "fresh": NAT,
    "timeout": _null({"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT}),
    "plugins": _list(NAME), "shard": _null(_SHARD), "cluster": {"type": "object"},
    "profile": {"enum": ["ci", "dev", "audit", "realistic"]},
    "max_case_bytes": _null(POS),
}
CAMPAIGN: dict[str, Any] = _obj(CAMPAIGN_FIELDS, ["subjects", "devices", "contexts", "repeats", "fresh",
                                                  "timeout"], closed=False)
