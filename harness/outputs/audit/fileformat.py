"""The audit file: its format, its validation and the loaded :class:`Audit`.

The audit file (plain JSON, written atomically)::

    {"format": "harness-audit", "version": 1, "id": "<12 hex>", "created": "<ISO 8601 UTC>",
     "digest": "xxh3_128" (the tensor digests' algorithm; files without the field are sha256),
     "environment": harness.core.env.fingerprint(),
     "corpus": {"path", "digest" (corpus_digest of the cases run), "cases", "shard": "i/n" | null,
                "full_digest", "full_cases" (the corpus before sharding)},
     "settings": {"repeats", "fresh", "timeout", "devices", "contexts", "subjects", "plugins", "keep_arrays"},
     "arrays_dir": absolute path | null,
     "entries": [{"case_id", "family", "subject", "role" (subject, oracle or control), "device", "context",
                  "bad_input", "status" (ok, error, partial, skipped, crashed, timeout), "error" (one line | null),
                  "skip_reason", "repeats_agreed" (true | false | null when no tensors),
                  "array_file" (npz name relative to arrays_dir | null),
                  "tensors": {name: {"digest", "dtype", "shape", "repeats_agreed",
                                     "sketch": {"n", "l2", "max_abs", "nan", "inf", "index", "bits"} | null}}}]}

``role`` and ``sketch`` (:mod:`harness.judge.sketch`) are absent from older files; such files still load and
compare (a change without a sketch says so).

:func:`load_audit` validates a file whole against this schema (``_TOP_SCHEMA`` and its kin) and
refuses it with the JSON path of the first bad field: a wrong type, an unknown status, two
entries of one case x subject x device x context, a key twice in one object, deep nesting.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from harness.core.env import machine_label
from harness.core.errors import AuditFileError, InvalidArgument
from harness.judge.bitwise import DIGEST_ALGORITHMS as _BITWISE_ALGORITHMS

__all__ = ["DEFAULT_CORPUS", "FORMAT", "VERSION", "STATUSES", "DIGEST_ALGORITHMS", "DEFAULT_DIGEST", "Audit",
           "load_audit", "as_audit", "digest_algorithm", "one_digest_algorithm", "entry_key", "npz_key", "failing"]

#: The committed audit corpus (see suites/corpus/README.md for how it was made).
DEFAULT_CORPUS = Path(__file__).resolve().parents[3] / "suites/corpus/audit.jsonl"

FORMAT = "harness-audit"
VERSION = 1

#: Entry statuses an audit file may hold (what the worker and the campaign produce).
STATUSES = ("ok", "error", "partial", "skipped", "crashed", "timeout")
#: Digest algorithms this harness can read; a file without a ``digest`` field is from before it
#: was written, when every digest was SHA-256.
DIGEST_ALGORITHMS = tuple(_BITWISE_ALGORITHMS)
DEFAULT_DIGEST = "sha256"


@dataclass(frozen=True)
class Audit:
    """A loaded audit file (see the module docstring for the fields)."""

    path: str
    data: Mapping[str, Any]

    @property
    def environment(self) -> dict[str, Any]:
        return self.data["environment"]

    @property
    def corpus(self) -> dict[str, Any]:
        return self.data["corpus"]

    @property
    def settings(self) -> dict[str, Any]:
        return self.data["settings"]

    @property
    def entries(self) -> list[dict[str, Any]]:
        return self.data["entries"]

    @property
    def created(self) -> str:
        return self.data["created"]

    @property
    def label(self) -> str:
        """The short machine label of this audit's environment (see :func:`harness.core.env.machine_label`)."""
        return machine_label(self.environment)

    @property
    def stem(self) -> str:
        return Path(self.path).stem

    def by_key(self) -> dict[tuple[str, str, str, str], dict[str, Any]]:
        """Entries by ``(case_id, subject, device, context)``."""
        return {entry_key(e): e for e in self.entries}

    @property
    def arrays_dir(self) -> str | None:
        """Where this audit's npz files are (None when it kept none)."""
        d = self.data.get("arrays_dir")
        if not d:
            return None
        if not os.path.isabs(d):
            d = os.path.join(os.path.dirname(os.path.abspath(self.path)), d)
        if not os.path.isdir(d):  # the audit and its arrays moved together
            alt = os.path.join(os.path.dirname(os.path.abspath(self.path)), os.path.basename(d.rstrip(os.sep)))
            if os.path.isdir(alt):
                return alt
        return d

    def arrays(self, entry: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
        """The kept arrays of one entry by tensor name, or None when none were kept."""
        fname = entry.get("array_file")
        d = self.arrays_dir
        if not fname or d is None:
            return None
        path = os.path.join(d, fname)
        if not os.path.exists(path):
            return None
        with np.load(path, allow_pickle=False) as z:
            stored = {k: z[k] for k in z.files}
        return {name: stored[npz_key(name)] for name in entry["tensors"] if npz_key(name) in stored}


def entry_key(e: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """``(case_id, subject, device, context)``: what identifies an entry within an audit."""
    return (e["case_id"], e["subject"], e["device"], e["context"])


def npz_key(name: str) -> str:
    """A tensor name as an npz member name (``/`` is not allowed there)."""
    return name.replace("/", "_")


def failing(status: str) -> bool:
    """A status that ran and failed (error, partial, crashed, timeout)."""
    return status not in ("ok", "skipped")


# The schema, as data: field -> (JSON types, required). Hand-written rather than jsonschema
# because the checks that matter here go beyond a schema (duplicate entries across the array,
# one status vocabulary shared with the runner), the messages must be one line with the JSON
# path of the first bad field, and the harness then needs no new dependency.
_STR, _INT, _BOOL, _NULL, _OBJ, _ARR = (str,), (int,), (bool,), (type(None),), (dict,), (list,)
_NUM = (int, float)
_TOP_SCHEMA: dict[str, tuple[tuple[type, ...], bool]] = {
    "format": (_STR, True), "version": (_INT, True), "created": (_STR, True), "environment": (_OBJ, True),
    "corpus": (_OBJ, True), "settings": (_OBJ, True), "entries": (_ARR, True), "id": (_STR, False),
    "arrays_dir": (_STR + _NULL, False), "digest": (_STR, False),
}
_CORPUS_SCHEMA = {"digest": (_STR + _NULL, True), "cases": (_INT, True), "path": (_STR + _NULL, False),
                  "shard": (_STR + _NULL, False), "full_digest": (_STR + _NULL, False),
                  "full_cases": (_INT + _NULL, False)}
_ENTRY_SCHEMA = {
    "case_id": (_STR, True), "family": (_STR, True), "subject": (_STR, True), "device": (_STR, True),
    "context": (_STR, True), "status": (_STR, True), "tensors": (_OBJ, True), "bad_input": (_BOOL, False),
    "error": (_STR + _NULL, False), "skip_reason": (_STR + _NULL, False),
    "repeats_agreed": (_BOOL + _NULL, False), "array_file": (_STR + _NULL, False), "role": (_STR + _NULL, False),
}
_TENSOR_SCHEMA = {"digest": (_STR, True), "dtype": (_STR, True), "shape": (_ARR, True),
                  "repeats_agreed": (_BOOL, False), "sketch": (_OBJ + _NULL, False)}
_SKETCH_SCHEMA = {"n": (_INT, True), "l2": (_NUM + _NULL, True), "max_abs": (_NUM, True), "nan": (_INT, True),
                  "inf": (_INT, True), "index": (_ARR, True), "bits": (_ARR, True)}


def load_audit(path: str | os.PathLike[str]) -> Audit:
    """Read and validate an audit file whole. Anything wrong raises :class:`AuditFileError` (one line,
    naming the JSON path of the first bad field); nothing is returned partially."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise AuditFileError(f"audit file {path!r} is a directory, not a file")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise AuditFileError(f"audit file {path!r} cannot be read: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except UnicodeDecodeError as exc:
        raise AuditFileError(f"audit file {path!r} is not UTF-8 text (corrupt?): {exc.reason}") from None
    except json.JSONDecodeError as exc:
        what = "truncated" if exc.pos >= len(raw.rstrip()) else "corrupt"
        raise AuditFileError(f"audit file {path!r} is not valid JSON ({what}): {exc.msg} at line "
                             f"{exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise AuditFileError(f"audit file {path!r} is nested too deeply to be an audit file") from None
    except ValueError as exc:  # NaN / Infinity
        raise AuditFileError(f"audit file {path!r}: {exc}") from None
    _validate(path, data)
    return Audit(path, data)


def as_audit(x: Audit | str | os.PathLike[str]) -> Audit:
    """``x`` itself when it is an :class:`Audit`, else the audit file it names, loaded."""
    return x if isinstance(x, Audit) else load_audit(x)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys silently; a duplicated tensor name must be refused.
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"holds the key {k!r} twice in one object")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"holds {name}, which is not valid JSON")


def _check_fields(obj: Any, schema: Mapping[str, tuple[tuple[type, ...], bool]], where: str) -> str | None:
    """The first problem of ``obj`` against ``schema`` (naming its JSON path), or None."""
    if not isinstance(obj, dict):
        return f"{where} must be a JSON object, got {_json_type(obj)}"
    for key, (types, required) in schema.items():
        if key not in obj:
            if required:
                return f"{where} is missing the field {key!r}"
            continue
        v = obj[key]
        # bool is an int in Python, never in JSON: an int field refuses true/false.
        ok = isinstance(v, types) and not (isinstance(v, bool) and bool not in types)
        if not ok:
            want = " or ".join(sorted({_TYPE_NAMES[t] for t in types}))
            return f"{where}.{key}={_brief(v)} must be {want}, got {_json_type(v)}"
    return None


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true/false", type(None): "null",
               dict: "an object", list: "an array"}


def _json_type(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "true/false", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _brief(v: Any) -> str:
    r = json.dumps(v) if not isinstance(v, (dict, list)) else ("{...}" if isinstance(v, dict) else "[...]")
    return r if len(r) <= 60 else r[:57] + "..."


def _sketch_problem(s: Mapping[str, Any], where: str) -> str | None:
    problem = _check_fields(s, _SKETCH_SCHEMA, where)
    if problem:
        return problem
    if len(s["index"]) != len(s["bits"]):
        return f"{where} holds {len(s['index'])} indices but {len(s['bits'])} bit strings"
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < max(s["n"], 1) for i in s["index"]):
        return f"{where}.index={_brief(s['index'])} must hold indices below n={s['n']}"
    for b in s["bits"]:
        try:
            if not isinstance(b, str) or not b:
                raise ValueError
            bytes.fromhex(b)
        except ValueError:
            return f"{where}.bits holds {_brief(b)}, not a hex string"
    return None


def _validate(path: str, data: Any) -> None:
    def bad(msg: str) -> AuditFileError:
        return AuditFileError(f"audit file {path!r}: {msg}")

    if not isinstance(data, dict):
        raise bad(f"holds a JSON {type(data).__name__}, not an audit object")
    if data.get("format") != FORMAT:
        raise bad(f"format={data.get('format')!r} is not {FORMAT!r} (not an audit file)")
    if data.get("version") != VERSION:
        raise bad(f"version={data.get('version')!r} is not supported (this harness reads version {VERSION})")
    problem = _check_fields(data, _TOP_SCHEMA, "$")
    if problem is None:
        problem = _check_fields(data["corpus"], _CORPUS_SCHEMA, "$.corpus")
    if problem:
        raise bad(problem)
    algo = data.get("digest", DEFAULT_DIGEST)
    if algo not in DIGEST_ALGORITHMS:
        raise bad(f"$.digest={algo!r} is not a digest algorithm this harness reads ({', '.join(DIGEST_ALGORITHMS)})")
    try:
        _dt.datetime.fromisoformat(data["created"].replace("Z", "+00:00"))
    except ValueError:
        raise bad(f"$.created={data['created']!r} is not an ISO 8601 time") from None
    shard = data["corpus"].get("shard")
    if shard is not None:
        parts = shard.split("/")
        if not (len(parts) == 2 and all(p.isdigit() for p in parts) and 1 <= int(parts[0]) <= int(parts[1])):
            raise bad(f"$.corpus.shard={shard!r} must be 'i/n' with 1 <= i <= n")
    seen: dict[tuple[str, ...], int] = {}
    for i, e in enumerate(data["entries"]):
        where = f"$.entries[{i}]"
        problem = _check_fields(e, _ENTRY_SCHEMA, where)
        if problem:
            raise bad(problem)
        if e["status"] not in STATUSES:
            raise bad(f"{where}.status={e['status']!r} is not one of {', '.join(STATUSES)}")
        key = entry_key(e)
        if key in seen:
            raise bad(f"{where} duplicates $.entries[{seen[key]}] (case {key[0]}, subject {key[1]}, "
                      f"device {key[2]}, context {key[3]})")
        seen[key] = i
        for name, t in e["tensors"].items():
            tw = f"{where}.tensors[{json.dumps(name)}]"
            problem = _check_fields(t, _TENSOR_SCHEMA, tw)
            if problem:
                raise bad(problem)
            if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in t["shape"]):
                raise bad(f"{tw}.shape={_brief(t['shape'])} must hold non-negative integers")
            if t.get("sketch") is not None:
                problem = _sketch_problem(t["sketch"], f"{tw}.sketch")
                if problem:
                    raise bad(problem)


def digest_algorithm(audit: Audit) -> str:
    """The digest algorithm an audit's tensor digests were made with (``sha256`` for files older than the field)."""
    return str(audit.data.get("digest", DEFAULT_DIGEST))


def one_digest_algorithm(audits: Sequence[Audit]) -> str:
    """The digest algorithm every audit uses (files from before the ``digest`` field are SHA-256); a mix is
    refused in one line, since digests of two algorithms differ whatever the tensors."""
    algs = {au.path: digest_algorithm(au) for au in audits}
    if len(set(algs.values())) > 1:
        raise InvalidArgument("audit files digest tensors with different algorithms ("
                              + ", ".join(f"{p!r}: {a}" for p, a in algs.items())
                              + "): their digests cannot be compared; re-run `harness audit` for the older ones")
    return next(iter(algs.values()))
