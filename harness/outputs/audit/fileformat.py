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

:func:`load_audit` validates a file whole against :data:`harness.core.schemas.AUDIT` and
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
from harness.core.fileio import npz_key
from harness.judge.digest import DIGEST_ALGORITHMS as _BITWISE_ALGORITHMS
from harness.judge.digest import digest_algorithm_of

__all__ = ["DEFAULT_CORPUS", "FORMAT", "VERSION", "STATUSES", "DIGEST_ALGORITHMS", "DEFAULT_DIGEST", "Audit",
           "load_audit", "as_audit", "digest_algorithm", "one_digest_algorithm", "entry_key", "failing"]

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
        stored = _load_npz(self.path, path)
        out = {}
        for name, t in entry["tensors"].items():
            a = stored.get(npz_key(name))
            if a is None:
                continue
            if a.dtype.name != t["dtype"] or list(a.shape) != list(t["shape"]):
                raise AuditFileError(f"audit file {self.path!r}: array file {path!r} holds {name!r} as {a.dtype.name} "
                                     f"{list(a.shape)}, the entry says {t['dtype']} {list(t['shape'])}: not the "
                                     f"arrays of this audit")
            out[name] = a
        return out


def _load_npz(audit_path: str, path: str) -> dict[str, np.ndarray]:
    """Every member of an audit's ``.npz`` array file, read with ``allow_pickle=False``; a file that is not an
    npz of plain arrays (a corrupt zip, a pickled object array, a bare ``.npy``, a directory) is one
    :class:`AuditFileError` line naming the audit and the array file."""
    import zipfile

    where = f"audit file {audit_path!r}: array file {path!r}"
    try:
        with np.load(path, allow_pickle=False) as z:
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise AuditFileError(f"{where} is a bare .npy array, not the .npz of an entry's tensors")
            return {k: z[k] for k in z.files}
    except AuditFileError:
        raise
    except TypeError:  # np.load gives a bare .npy as an array, which has no context manager
        raise AuditFileError(f"{where} is a bare .npy array, not the .npz of an entry's tensors") from None
    except ValueError as exc:
        what = ("holds a pickled object array (never unpickled: it could run code)" if "pickle" in str(exc)
                else f"cannot be read as .npz: {' '.join(str(exc).split())[:160]}")
        raise AuditFileError(f"{where} {what}") from None
    except (zipfile.BadZipFile, EOFError, OSError, KeyError) as exc:
        raise AuditFileError(f"{where} is not a readable .npz ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:120]})") from None


def entry_key(e: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """``(case_id, subject, device, context)``: what identifies an entry within an audit."""
    return (e["case_id"], e["subject"], e["device"], e["context"])


def failing(status: str) -> bool:
    """A status that ran and failed (error, partial, crashed, timeout)."""
    return status not in ("ok", "skipped")


def load_audit(path: str | os.PathLike[str]) -> Audit:
    """Read and validate an audit file whole against :data:`harness.core.schemas.AUDIT` (the environment's
    fields typed too), then what a schema does not say (a known digest algorithm, an ISO 8601 time, a shard
    i <= n, no entry twice, sketches whose indices fit). Anything wrong raises :class:`AuditFileError` (one
    line naming the JSON path of the first bad field and its value); nothing is returned partially."""
    from harness.core import schemas
    from harness.core.argcheck import readable_file
    from harness.core.input_parsing import InputProblem, parse_json
    from harness.core.schema_check import check

    path = os.fspath(path)
    try:  # a directory, a FIFO or a device is refused before anything is read
        readable_file("audit file", path)
        with open(path, "rb") as f:
            raw = f.read()
    except InvalidArgument as exc:
        raise AuditFileError(str(exc)) from None
    except OSError as exc:
        raise AuditFileError(f"audit file {path!r} cannot be read: {exc.strerror or exc}") from None
    try:
        data = parse_json(raw, f"audit file {path!r}")
    except InputProblem as exc:
        raise AuditFileError(str(exc)) from None
    problem = check(data, schemas.AUDIT)
    if problem is not None:
        raise AuditFileError(f"audit file {path!r}: {problem}")
    _validate(path, data)
    return Audit(path, data)


def as_audit(x: Audit | str | os.PathLike[str]) -> Audit:
    """``x`` itself when it is an :class:`Audit`, else the audit file it names, loaded."""
    return x if isinstance(x, Audit) else load_audit(x)


def _validate(path: str, data: Mapping[str, Any]) -> None:
    """The rules beyond the schema, on a file the schema accepted."""
    def bad(msg: str) -> AuditFileError:
        return AuditFileError(f"audit file {path!r}: {msg}")

    algo = data.get("digest", DEFAULT_DIGEST)
    if algo not in DIGEST_ALGORITHMS:
        raise bad(f"$.digest={algo!r} is not a digest algorithm this harness reads ({', '.join(DIGEST_ALGORITHMS)})")
    try:
        _dt.datetime.fromisoformat(data["created"].replace("Z", "+00:00"))
    except ValueError:
        raise bad(f"$.created={data['created']!r} is not an ISO 8601 time") from None
    shard = data["corpus"].get("shard")
    if shard is not None and int(shard.split("/")[0]) > int(shard.split("/")[1]):
        raise bad(f"$.corpus.shard={shard!r} must be 'i/n' with 1 <= i <= n")
    seen: dict[tuple[str, ...], int] = {}
    for i, e in enumerate(data["entries"]):
        where = f"$.entries[{i}]"
        key = entry_key(e)
        if key in seen:
            raise bad(f"{where} duplicates $.entries[{seen[key]}] (case {key[0]}, subject {key[1]}, "
                      f"device {key[2]}, context {key[3]})")
        seen[key] = i
        for name, t in e["tensors"].items():
            tw = f"{where}.tensors[{json.dumps(name)}]"
            if t["digest"] != "missing":
                try:
                    t_algo = digest_algorithm_of(t["digest"])
                except ValueError:
                    raise bad(f"{tw}.digest={t['digest'][:80]!r} is no {algo} digest") from None
                if t_algo != algo:
                    raise bad(f"{tw}.digest={t['digest'][:80]!r} is a {t_algo} digest in a file of $.digest={algo!r}: "
                              f"it would compare as changed whatever the tensor")
            s = t.get("sketch")
            if s is None:
                continue
            sw = f"{where}.tensors[{json.dumps(name)}].sketch"
            if len(s["index"]) != len(s["bits"]):
                raise bad(f"{sw} holds {len(s['index'])} indices but {len(s['bits'])} bit strings")
            if not all(i < max(s["n"], 1) for i in s["index"]):
                raise bad(f"{sw}.index={s['index']!r} must hold indices below n={s['n']}")


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
