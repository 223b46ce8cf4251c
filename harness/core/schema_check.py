"""Checking data against a JSON Schema, and the one vocabulary every input problem is written in.

Every input file is validated *whole* against one schema of :mod:`harness.core.schemas` by ``jsonschema``
(Draft 2020-12, JSON's integers only); the first problem in document order comes back as one line from
:func:`problem`: the JSON path of the bad field, its value, what it must be, and ``file:line`` where the caller
knows it (``cases.jsonl:3: $.spec.xs_widths[1]=-3 must be >= 0``). Other checks of input (an explicit array's
data, a plug-in's fields) write their messages with the same :func:`brief`, :func:`json_path` and
:func:`problem`, so a user reads one shape of message whatever was wrong.

>>> check({"seed": -1}, {"type": "object", "properties": {"seed": {"type": "integer", "minimum": 0}}})
'$.seed=-1 must be >= 0'
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["brief", "json_path", "problem", "check", "first_problem"]


# ==== the one error vocabulary ==================================================================
def brief(value: Any, limit: int = 60) -> str:
    """A value as the message shows it: a string as Python writes it (``'bogus'``), anything else as JSON
    (``true``, ``null``, ``[2, 0]``), shortened: ``{...}`` / ``[...]`` for containers that would not fit."""
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else text[:limit - 4] + "...'"
    try:
        # a read-only mapping (a Case's frozen fields) is shown as the object it was read from
        text = json.dumps(value, sort_keys=True, allow_nan=True,
                          default=lambda o: dict(o) if isinstance(o, Mapping) else str(o))
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    if len(text) > limit:
        text = ("{...}" if isinstance(value, Mapping) else "[...]" if isinstance(value, (list, tuple))
                else text[:limit - 3] + "...")
    return text


def json_path(path: Iterable[Any]) -> str:
    """``['entries', 3, 'tensors', 'ys.0']`` -> ``$.entries[3].tensors["ys.0"]``."""
    out = "$"
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(p)):
            out += f".{p}"
        else:
            out += f"[{json.dumps(str(p))}]"
    return out


def problem(path: Iterable[Any], value: Any, must: str, where: str | None = None) -> str:
    """The one message shape: ``[where: ]$.path=value must ...`` (Hypothesis's ``name=value must be ...``)."""
    head = f"{where}: " if where else ""
    return f"{head}{json_path(path)}={brief(value)} {must}"


# ==== validation ============================================================================
def _must(err: Any) -> str:
    """What the failing keyword demands, in the harness's words (a schema's own ``message`` first)."""
    v, arg = err.validator, err.validator_value
    if "message" in err.schema and v not in ("required", "additionalProperties"):
        return str(err.schema["message"])
    if v in ("anyOf", "oneOf") and err.context:
        kinds = [c.validator_value for c in err.context if c.validator == "type"]
        flat = [k for ks in kinds for k in ([ks] if isinstance(ks, str) else ks)]
        if len(kinds) == len(err.context):
            return _must_type(flat, err.instance)
        return "must be " + _either([_must(c).removeprefix("must be ") for c in err.context])
    if v == "type":
        return _must_type([arg] if isinstance(arg, str) else list(arg), err.instance)
    if v == "minimum":
        return f"must be >= {arg}"
    if v == "exclusiveMinimum":
        return f"must be > {arg}"
    if v == "maximum":
        return f"must be <= {arg}"
    if v == "exclusiveMaximum":
        return f"must be < {arg}"
    if v == "enum":
        return "must be " + _either([brief(a) for a in arg])
    if v == "const":
        return f"must be {brief(arg)}"
    if v == "minItems":
        return f"must hold at least {arg} item{'s' if arg != 1 else ''}"
    if v == "maxItems":
        return f"must hold at most {arg} item{'s' if arg != 1 else ''}"
    if v == "minLength":
        return "must be a non-empty string"
    if v == "maxLength":
        return f"must be at most {arg} characters"
    if v == "minProperties":
        return "must not be empty"
    if v == "uniqueItems":
        return "must not repeat an item"
    if v == "pattern":
        return f"must match {arg}"
    if v == "propertyNames":
        return "has a key that is not allowed"
    return str(err.message).split("\n")[0]


def _must_type(kinds: Sequence[str], value: Any) -> str:
    names = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
             "object": "an object", "array": "an array", "null": "null"}
    return "must be " + _either([names.get(k, k) for k in kinds]) + f", got {_json_type(value)}"


def _either(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _json_type(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "true/false", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _first(errors: Sequence[Any]) -> Any:
    # The error of the first bad field in document order; of several on one field, the most specific.
    def key(e: Any) -> tuple[Any, ...]:
        return (tuple((0, p) if isinstance(p, int) else (1, str(p)) for p in e.absolute_path),)

    best = min(errors, key=key)
    while best.context and "message" not in best.schema:
        # anyOf/oneOf: descend where a branch went deeper than the value itself (the bad item of a list);
        # where every branch failed on the value itself, the anyOf is the error ("an integer or null").
        deeper = [e for e in best.context if len(e.absolute_path) > len(best.absolute_path)]
        if not deeper:
            # "an object or null" given an object: what the object lacks, not that it is not null
            real = [e for e in best.context if not (e.validator == "type" and e.validator_value == "null")]
            if real and not all(e.validator == "type" for e in real) and best.instance is not None:
                best = min(real, key=key)
                continue
            break
        best = min(deeper, key=lambda e: (-len(e.absolute_path), key(e)))
    return best


def check(data: Any, schema: Mapping[str, Any]) -> str | None:
    """The first problem of ``data`` against ``schema`` as one :func:`problem` line (without a ``where``), or
    None. :func:`locate` adds ``file:line`` where the caller knows it."""
    detail = first_problem(data, schema)
    return None if detail is None else detail[1]


def first_problem(data: Any, schema: Mapping[str, Any]) -> tuple[list[Any], str] | None:
    """``(JSON path of the first bad field, the one-line message)``, or None when ``data`` is valid."""
    import jsonschema

    validator = _validator(id(schema), schema, jsonschema)
    errors = list(validator.iter_errors(data))
    if not errors:
        return None
    err = _first(errors)
    path = list(err.absolute_path)
    if err.validator == "required":
        missing = [k for k in err.validator_value if isinstance(err.instance, Mapping) and k not in err.instance]
        return path, f"{json_path(path)} is missing the field {missing[0]!r}" + (
            f" ({err.schema['message']})" if "message" in err.schema else "")
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(k for k in err.instance if k not in allowed)
        return path + [extra[0]], (f"{json_path(path + [extra[0]])} is not a known field"
                                   f"{' (known: ' + ', '.join(allowed) + ')' if allowed else ''}")
    return path, problem(path, err.instance, _must(err))


_VALIDATORS: dict[int, Any] = {}


def _validator(key: int, schema: Mapping[str, Any], jsonschema: Any) -> Any:
    if key not in _VALIDATORS:
        # The schemas are constants (harness.core.schemas): suites/core/test_schemas.py checks each against the
        # Draft 2020-12 meta-schema once, rather than every process paying for it at start-up.
        base = jsonschema.Draft202012Validator
        # JSON's integers only: true is not 1 and 2.0 is not 2 (jsonschema accepts 2.0 as an integer).
        types = base.TYPE_CHECKER.redefine(
            "integer", lambda _checker, v: isinstance(v, int) and not isinstance(v, bool))
        cls = jsonschema.validators.extend(base, type_checker=types)
        _VALIDATORS[key] = cls(schema)
    return _VALIDATORS[key]
