"""Reading input text with limits: JSON and TOML parsed into data, every problem one line.

Four file kinds come from outside the harness (a case or a corpus line, the contracts file, an audit file, a run
directory's ``campaign.json``). Before any of them is checked against its schema (:mod:`harness.core.schemas`)
it is parsed here, with size limits that apply before parsing finishes: nesting deeper than :data:`MAX_DEPTH`,
number literals longer than :data:`MAX_NUMBER_CHARS`, ``1e400``, ``NaN``, a key twice in one object. A parser
that recursed 900 levels or an ``int()`` of 5000 digits would be a traceback, not a line a user can act on:
every problem is one :class:`InputProblem` line starting with where the text came from (``file:line`` where the
text has several lines).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable

__all__ = ["MAX_DEPTH", "MAX_NUMBER_CHARS", "InputProblem", "parse_json", "parse_toml"]

#: Deepest nesting of objects and arrays any input may have (the deepest real one, an audit file's
#: environment, is 5 levels; Python's json and tomllib recurse once per level).
MAX_DEPTH = 64
#: Longest number literal accepted (an int64 has 19 digits; 5000 digits would hit int()'s own limit).
MAX_NUMBER_CHARS = 40


class InputProblem(ValueError):
    """One line saying what is wrong with an input (callers re-raise it as their own HarnessError kind)."""


# ==== parsing with limits ====================================================================
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NUMBER = re.compile(r"[-+]?(?:\d[\d_]*)(?:\.[\d_]*)?(?:[eE][-+]?\d+)?")


def _depth(stripped: str) -> tuple[int, int]:
    """(deepest nesting, offset where it is reached) of text whose strings were removed."""
    depth = deepest = at = 0
    for m in re.finditer(r"[\[\]{}]", stripped):
        depth += 1 if m.group() in "[{" else -1
        if depth > deepest:
            deepest, at = depth, m.start()
            if deepest > MAX_DEPTH:
                break
    return deepest, at


def _at(where: str, text: str, offset: int) -> str:
    """``where:line`` for a text of several lines, ``where`` alone for one line (a corpus line says its own)."""
    return f"{where}:{text.count(chr(10), 0, offset) + 1}" if "\n" in text.rstrip() else where


def _prescan(text: str, stripped: str, where: str) -> None:
    # The limits apply before any parser recurses or converts: a RecursionError or int()'s ValueError
    # would be a traceback, and a 900-level document costs a parser far more than this scan.
    deepest, at = _depth(stripped)
    if deepest > MAX_DEPTH:
        raise InputProblem(f"{_at(where, stripped, at)}: nested too deeply (more than {MAX_DEPTH} levels of "
                           f"objects and arrays): not a file this harness writes")
    for m in _NUMBER.finditer(stripped):
        if len(m.group()) > MAX_NUMBER_CHARS:
            raise InputProblem(f"{_at(where, stripped, m.start())}: the number {m.group()[:20]}... has "
                               f"{len(m.group())} characters (at most {MAX_NUMBER_CHARS}): not a size or a seed")


def _number_hooks(where: str) -> dict[str, Callable[[str], Any]]:
    def as_int(s: str) -> int:
        if len(s) > MAX_NUMBER_CHARS:  # the pre-scan catches these; the hook is the last word
            raise InputProblem(f"{where}: the number {s[:20]}... has {len(s)} digits (at most {MAX_NUMBER_CHARS})")
        return int(s)

    def as_float(s: str) -> float:
        v = float(s)
        if not math.isfinite(v) or len(s) > MAX_NUMBER_CHARS:
            raise InputProblem(f"{where}: the number {s[:40]} is out of range for a float64 (finite numbers only)")
        return v

    def constant(s: str) -> Any:
        raise InputProblem(f"{where}: holds {s}, which is not valid JSON (write non-finite values as strings)")

    return {"parse_int": as_int, "parse_float": as_float, "parse_constant": constant}


def _unique_keys(where: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        # json keeps the last of two equal keys silently; a duplicated field or tensor name must be refused.
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise InputProblem(f"{where}: holds the key {k!r} twice in one object")
            out[k] = v
        return out

    return hook


def parse_json(data: str | bytes, where: str) -> Any:
    """JSON text (or UTF-8 bytes) to data, every problem one :class:`InputProblem` line starting ``where``:
    not UTF-8, nested deeper than :data:`MAX_DEPTH`, a number longer than :data:`MAX_NUMBER_CHARS` or out of
    float64's range, NaN/Infinity, a key twice in one object, invalid JSON (with line and column)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        try:
            data = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[:exc.start].count(b"\n") + 1
            at = f"{where}:{line}" if b"\n" in raw.rstrip() else where
            raise InputProblem(f"{at} is not UTF-8 (byte {raw[exc.start]:#04x} at offset {exc.start})") from None
    if not isinstance(data, str):
        raise InputProblem(f"{where}: must be JSON text, got {type(data).__name__}")
    _prescan(data, _JSON_STRING.sub('""', data), where)
    try:
        hooks = _number_hooks(where)
        return json.loads(data, object_pairs_hook=_unique_keys(where), parse_int=hooks["parse_int"],
                          parse_float=hooks["parse_float"], parse_constant=hooks["parse_constant"])
    except json.JSONDecodeError as exc:
        what = "not valid JSON (truncated)" if exc.pos >= len(data.rstrip()) else "not valid JSON"
        raise InputProblem(f"{_at(where, data, exc.pos)}: {what}: {exc.msg} (line {exc.lineno} column "
                           f"{exc.colno})") from None
    except RecursionError:  # pragma: no cover - the pre-scan refuses what could recurse this deep
        raise InputProblem(f"{where}: nested too deeply") from None


_TOML_STRINGS = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*')


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """TOML text to data with the same limits as :func:`parse_json` (``1e400``, ``inf`` and ``nan`` refused)."""
    import tomllib

    _prescan(text, _TOML_STRINGS.sub(lambda m: "\n" * m.group().count("\n") + '""', text), where)
    hooks = _number_hooks(where)

    def as_float(s: str) -> float:
        if s.lstrip("+-") in ("inf", "nan"):
            raise InputProblem(f"{where}: holds {s}: only finite numbers mean anything here")
        return float(hooks["parse_float"](s))

    try:
        return tomllib.loads(text, parse_float=as_float)
    except tomllib.TOMLDecodeError as exc:
        raise InputProblem(f"{where}: not valid TOML: {' '.join(str(exc).split())}") from None
    except (RecursionError, ValueError) as exc:  # pragma: no cover - the pre-scan's job; still one line
        if isinstance(exc, InputProblem):
            raise
        raise InputProblem(f"{where}: cannot be read: {type(exc).__name__}") from None
