"""Driver audits: digest every subject on a fixed corpus into one file per machine, then say what changed.

Users run the same corpus on two GPU drivers (or CUDA/CuPy versions, BLAS builds, machines) and
want to know at a glance which implementations changed bits, by how much, and which environment
difference goes with it. Three verbs:

``python -m harness audit --out A.json``
    runs every subject (the ``control.*`` self-test subjects only when asked for with
    ``--subjects``) on the corpus (default :data:`DEFAULT_CORPUS`) through the runner's
    :class:`~harness.execute.campaign.Campaign` (``R`` in-process repetitions, no fresh processes), and
    writes an *audit file*: the environment fingerprint, the corpus digest and, per case x
    subject x device x context, the status and the SHA-256 digest of every output tensor, with
    whether the repetitions agreed. No arrays unless ``--keep-arrays DIR`` (one ``.npz`` per
    entry, written with plain NumPy arrays only, loadable with ``allow_pickle=False``).
``python -m harness compare A.json B.json [--out DIR]``
    per subject x device x context: tensors compared, how many changed digest, the greatest ULP
    and relative difference where both audits kept arrays, a verdict, and the environment
    fields that differ (driver, CUDA, CuPy, GPU name, BLAS version and threads, environment
    variables, packages).
``python -m harness merge A.json B.json ... --out DIR``
    many audit files as one matrix: subject/device/context rows x machine columns, each cell a
    short fingerprint of all that row's tensor digests plus a consistency marker. Shards of
    one corpus run on one machine are joined into one column.

The audit file (plain JSON, written atomically)::

    {"format": "harness-audit", "version": 1, "id": "<12 hex>", "created": "<ISO 8601 UTC>",
     "digest": "sha256" (the tensor digests' algorithm; files without the field are sha256),
     "environment": harness.core.env.fingerprint(),
     "corpus": {"path", "digest" (corpus_digest of the cases run), "cases", "shard": "i/n" | null,
                "full_digest", "full_cases" (the corpus before sharding)},
     "settings": {"repeats", "fresh", "timeout", "devices", "contexts", "subjects", "plugins", "keep_arrays"},
     "arrays_dir": absolute path | null,
     "entries": [{"case_id", "family", "subject", "device", "context", "bad_input",
                  "status" (ok, error, partial, skipped, crashed, timeout), "error" (one line | null),
                  "skip_reason", "repeats_agreed" (true | false | null when no tensors),
                  "array_file" (npz name relative to arrays_dir | null),
                  "tensors": {name: {"digest", "dtype", "shape", "repeats_agreed"}}}]}

:func:`load_audit` validates a file whole against this schema (``_TOP_SCHEMA`` and its kin) and
refuses it with the JSON path of the first bad field: a wrong type, an unknown status, two
entries of one case x subject x device x context, a key twice in one object, deep nesting.
"""

from __future__ import annotations

import argparse
import base64
import collections
import datetime as _dt
import hashlib
import io
import json
import math
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from harness.judge.bitwise import DIGEST_ALGORITHMS as _BITWISE_ALGORITHMS
from harness.core.env import flatten_fingerprint
from harness.core.fileio import atomic_npz, atomic_write
from harness.core.errors import AuditFileError, InvalidArgument

__all__ = [
    "DEFAULT_CORPUS", "FORMAT", "VERSION", "VERDICTS", "Audit", "AuditComparison", "MergeResult",
    "run_audit", "load_audit", "compare_audits", "merge_audits", "machine_label", "environment_diff",
    "flatten", "cmd_audit", "cmd_compare", "cmd_merge", "compare_changed", "STATUSES", "digest_algorithm",
]

#: The committed audit corpus (see suites/corpus/README.md for how it was made).
DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "suites/corpus/audit.jsonl"

FORMAT = "harness-audit"
VERSION = 1

#: Verdicts of :func:`compare_audits`, most alarming first (a group takes the first that applies).
VERDICTS = (
    "newly failing",            # ok in A, failing (error, partial, crashed, timeout) in B
    "not reproducible",         # digests changed, but the repetitions disagreed within A or B
    "changed beyond tolerance", # changed, and beyond gradient_tolerance (or shape/dtype/error changed)
    "changed (no arrays kept)", # changed digests; one of the audits kept no arrays to measure by
    "changed within tolerance", # changed, and within compare.gradient_tolerance of the dtype
    "fixed",                    # failing in A, ok in B
    "identical",                # every tensor digest equal
    "not compared",             # nothing in common (skipped on one side, or present in one audit only)
)



# ==== the audit file ===========================================================================
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
        """The short machine label of this audit's environment (see :func:`machine_label`)."""
        return machine_label(self.environment)

    @property
    def stem(self) -> str:
        return Path(self.path).stem

    def by_key(self) -> dict[tuple[str, str, str, str], dict[str, Any]]:
        """Entries by ``(case_id, subject, device, context)``."""
        return {_entry_key(e): e for e in self.entries}

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
        return {name: stored[_npz_key(name)] for name in entry["tensors"] if _npz_key(name) in stored}


def _entry_key(e: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (e["case_id"], e["subject"], e["device"], e["context"])


def _npz_key(name: str) -> str:
    return name.replace("/", "_")


#: Entry statuses an audit file may hold (what the worker and the campaign produce).
STATUSES = ("ok", "error", "partial", "skipped", "crashed", "timeout")
#: Digest algorithms this harness can read; a file without a ``digest`` field is from before it
#: was written, when every digest was SHA-256.
DIGEST_ALGORITHMS = tuple(_BITWISE_ALGORITHMS)
DEFAULT_DIGEST = "sha256"

# The schema, as data: field -> (JSON types, required). Hand-written rather than jsonschema
# because the checks that matter here go beyond a schema (duplicate entries across the array,
# one status vocabulary shared with the runner), the messages must be one line with the JSON
# path of the first bad field, and the harness then needs no new dependency.
_STR, _INT, _BOOL, _NULL, _OBJ, _ARR = (str,), (int,), (bool,), (type(None),), (dict,), (list,)
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
    "repeats_agreed": (_BOOL + _NULL, False), "array_file": (_STR + _NULL, False),
}
_TENSOR_SCHEMA = {"digest": (_STR, True), "dtype": (_STR, True), "shape": (_ARR, True),
                  "repeats_agreed": (_BOOL, False)}


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


_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true/false", type(None): "null", dict: "an object",
               list: "an array"}


def _json_type(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "true/false", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _brief(v: Any) -> str:
    r = json.dumps(v) if not isinstance(v, (dict, list)) else ("{...}" if isinstance(v, dict) else "[...]")
    return r if len(r) <= 60 else r[:57] + "..."


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
        key = _entry_key(e)
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


def digest_algorithm(audit: Audit) -> str:
    """The digest algorithm an audit's tensor digests were made with (``sha256`` for files older than the field)."""
    return str(audit.data.get("digest", DEFAULT_DIGEST))


def _atomic_write(path: str, text: str) -> None:
    atomic_write(path, text)


def _atomic_npz(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    atomic_npz(path, {k: np.ascontiguousarray(v) for k, v in arrays.items()})


# ==== running an audit =========================================================================
def _default_subjects() -> list[str]:
    from harness.subjects.registry import SUBJECTS

    return [n for n in SUBJECTS if SUBJECTS[n].role != "control"]


def _names(value: str | Iterable[str] | None) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    return [str(v) for v in value]


def _one_line_error(rec: Mapping[str, Any]) -> str | None:
    errs = rec.get("errors") or []
    if not errs:
        return None
    e = errs[0]
    text = f"{e.get('type')} in {e.get('phase')}: {e.get('message')}"
    return " ".join(text.split())[:500]


def _entry(rec: Mapping[str, Any]) -> dict[str, Any]:
    tensors = {name: {"digest": t["digest"], "dtype": t["dtype"], "shape": list(t["shape"]),
                      "repeats_agreed": bool(t["bitwise_identical"])}
               for name, t in sorted(rec.get("tensors", {}).items())}
    if not tensors:
        agreed = None if rec["status"] in ("skipped", "error", "crashed", "timeout") else rec["status"] == "ok"
    else:
        agreed = rec["status"] == "ok" and all(t["repeats_agreed"] for t in tensors.values())
    return {
        "case_id": rec["case_id"], "family": rec["family"], "subject": rec["subject"], "device": rec["device"],
        "context": rec["context"], "bad_input": bool(rec.get("bad_input", False)), "status": rec["status"],
        "error": _one_line_error(rec), "skip_reason": rec.get("skip_reason"), "repeats_agreed": agreed,
        "array_file": None, "tensors": tensors,
    }


def run_audit(corpus_path: str | os.PathLike[str] | None, devices: Any, contexts: Any,
              out_path: str | os.PathLike[str], *, keep_arrays: str | os.PathLike[str] | None = None,
              shard: str | None = None, repeats: int = 2, subjects: str | Iterable[str] | None = None,
              quiet: bool = False, plugins: Sequence[str] = (), timeout: float = 120.0,
              executor: Any = None, environment: Mapping[str, Any] | None = None,
              extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run every subject on the corpus and write the audit file ``out_path``; returns its data.

    ``devices`` and ``contexts`` are comma strings (``"cpu"``, ``"all"``; ``"default,blas1"``)
    or lists of names; ``subjects`` None means every registered subject except the
    ``control.*`` self-tests. ``shard="i/n"`` runs the cases of :func:`harness.execute.campaign.shard`.
    ``executor`` runs the tasks (default the local pool; :class:`harness.execute.cluster.DaskExecutor` for
    a cluster), ``environment`` is the fingerprint to record (default this process's: a cluster passes the
    one taken on the worker that ran the tasks) and ``extra`` adds top-level fields (``cluster``).
    """
    from harness.core.cases import corpus_digest, load_corpus
    from harness.core.contexts import Context, get_context
    from harness.core.devices import Device, parse_device, parse_devices
    from harness.core.env import fingerprint
    from harness.execute.campaign import CampaignSettings, load_arrays, parse_shard, plan
    from harness.execute.driver import run_campaign
    from harness.execute.campaign import shard as shard_cases
    from harness.subjects.registry import subjects_for

    t_start = time.perf_counter()
    if repeats < 2:
        raise InvalidArgument(f"repeats={repeats} must be >= 2: an audit records whether the repetitions agreed")
    corpus_path = os.fspath(corpus_path if corpus_path is not None else DEFAULT_CORPUS)
    full = load_corpus(corpus_path)
    if not full:
        raise InvalidArgument(f"corpus={corpus_path!r} holds no cases")
    sh = parse_shard(shard)
    cases = shard_cases(full, *sh) if sh is not None else full

    if devices is None or isinstance(devices, str):
        devs = parse_devices(devices)
    else:
        devs = [d if isinstance(d, Device) else parse_device(str(d)) for d in devices]
    ctx_names = _names(contexts) or ["default"]
    ctxs = [c if isinstance(c, Context) else get_context(c) for c in ctx_names]
    subj = subjects_for(_names(subjects) or _default_subjects())

    settings = CampaignSettings(repeats=repeats, fresh=0, timeout=timeout, plugins=tuple(plugins), quiet=quiet)
    tasks = plan(cases, subj, devs, ctxs, oracle_contexts=tuple(c.name for c in ctxs))
    audit_id = uuid.uuid4().hex[:12]
    arrays_dir = os.path.abspath(os.fspath(keep_arrays)) if keep_arrays is not None else None
    if arrays_dir is not None:
        os.makedirs(arrays_dir, exist_ok=True)
    if not quiet:
        print(f"harness audit: {len(cases)} of {len(full)} cases, {len(subj)} subjects, devices "
              f"{', '.join(d.id for d in devs)}, contexts {', '.join(c.name for c in ctxs)}: "
              f"{len(tasks)} tasks x {repeats} repetitions -> {out_path}", file=sys.stderr)
    env = dict(environment) if environment is not None else fingerprint()
    entries = []
    with tempfile.TemporaryDirectory(prefix="harness-audit-") as work:
        # The one campaign driver (its measures, judged under the shipped contracts, stay in the work directory:
        # an audit records digests, and compare/merge judge two audits against each other).
        records = run_campaign(work, cases, subj, devs, ctxs, settings, executor=executor,
                               oracle_contexts=tuple(c.name for c in ctxs)).records if tasks else {}
        for task in tasks:
            rec = records[task.key].to_dict()
            e = _entry(rec)
            if arrays_dir is not None and rec.get("array_file"):
                got = load_arrays(work, rec["array_file"])
                fname = f"{audit_id}-{rec['array_file']}"
                _atomic_npz(os.path.join(arrays_dir, fname), got)
                e["array_file"] = fname
            entries.append(e)
    from harness.judge.bitwise import DIGEST_ALGORITHM

    data = {
        "format": FORMAT, "version": VERSION, "id": audit_id, "digest": DIGEST_ALGORITHM,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "environment": env,
        "corpus": {"path": corpus_path, "digest": corpus_digest(cases), "cases": len(cases),
                   "shard": None if sh is None else f"{sh[0]}/{sh[1]}",
                   "full_digest": corpus_digest(full), "full_cases": len(full)},
        "settings": {"repeats": repeats, "fresh": 0, "timeout": timeout, "devices": [d.id for d in devs],
                     "contexts": [c.name for c in ctxs], "subjects": [s.name for s in subj],
                     "plugins": list(plugins), "keep_arrays": arrays_dir is not None},
        "arrays_dir": arrays_dir,
        "seconds": round(time.perf_counter() - t_start, 3),
        "entries": entries,
        **dict(extra or {}),
    }
    _atomic_write(os.fspath(out_path), json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n")
    return data


def cmd_audit(args: argparse.Namespace) -> int:
    """``harness audit``: every argument checked before the audit runs; 0 when the file was written."""
    from harness.core import argcheck
    from harness.core.contexts import get_context
    from harness.core.devices import select_devices
    from harness.execute.campaign import parse_shard
    from harness.subjects.registry import load_entry_points, load_plugin, subjects_for

    load_entry_points()
    for s in args.subject_plugin or ():
        load_plugin(s)
    argcheck.int_at_least("repeats", args.repeats, 2)
    subjects = argcheck.name_list("subjects", args.subjects)
    if subjects is not None:
        subjects_for(subjects)
    for c in argcheck.name_list("contexts", args.contexts) or ():
        get_context(c)
    parse_shard(args.shard)
    sel = select_devices(args.devices)
    if args.corpus is not None:
        argcheck.readable_file("corpus", args.corpus)
    argcheck.writable_file("out", args.out)
    if args.keep_arrays is not None:
        argcheck.writable_dir("keep-arrays", args.keep_arrays)
    for note in sel.notes:  # after every check, so that a usage error stays one line
        print(f"harness: note: {note}", file=sys.stderr)
    t0 = time.perf_counter()
    if getattr(args, "cluster", None):
        from harness.outputs.fleet import audit_on_cluster

        for out, data in audit_on_cluster(args):
            _summary_line(data, out, t0)
        return 0
    # The implied GPU of "all" stays in the plan: its entries are recorded as skipped, with the reason.
    data = run_audit(args.corpus, sel.planned, args.contexts, args.out, keep_arrays=args.keep_arrays,
                     shard=args.shard, repeats=args.repeats, subjects=subjects, quiet=args.quiet,
                     plugins=tuple(args.subject_plugin or ()))
    _summary_line(data, args.out, t0)
    return 0


def _summary_line(data: Mapping[str, Any], out: str, t0: float) -> None:
    counts = collections.Counter(e["status"] for e in data["entries"])
    disagreed = sum(1 for e in data["entries"] if e["repeats_agreed"] is False)
    where = data.get("cluster", {}).get("worker")
    print(f"audit: {len(data['entries'])} entries ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}; "
          f"repetitions disagreed in {disagreed}) on {machine_label(data['environment'])}"
          f"{f' (Dask worker {where})' if where else ''} -> {out} ({time.perf_counter() - t0:.0f} s)")


# ==== environment ==============================================================================
flatten = flatten_fingerprint


def _env_kind(key: str) -> str:
    k = key.lower()
    if k.startswith("env."):
        return "environment variable"
    if "driver" in k:
        return "GPU driver"
    if "cuda" in k and not k.startswith("packages."):
        return "CUDA"
    if k.startswith("gpu.devices") and k.endswith(".name"):
        return "GPU"
    if k.startswith("gpu.cupy") or k.startswith("packages.cupy"):
        return "CuPy"
    if k.startswith("gpu."):
        return "GPU"
    if k.startswith("blas."):
        return "BLAS threads" if k.endswith("num_threads") else "BLAS"
    if k.startswith("packages.") or k.startswith("chainer.version"):
        return "package"
    if k.startswith("cpu."):
        return "CPU"
    if k.startswith("chainer."):
        return "Chainer config"
    if k in ("python", "implementation", "platform"):
        return "Python/OS"
    return "other"


_KIND_ORDER = ("GPU driver", "CUDA", "CuPy", "GPU", "BLAS threads", "BLAS", "environment variable", "package",
               "CPU", "Chainer config", "Python/OS", "other")


def environment_diff(a: Mapping[str, Any], b: Mapping[str, Any]):
    """The fingerprint fields that differ between two environments, as a DataFrame
    (``field``, ``kind``, ``A``, ``B``), the likeliest causes of changed bits first."""
    import pandas as pd

    fa, fb = flatten(dict(a)), flatten(dict(b))
    rows = []
    for key in sorted(set(fa) | set(fb)):
        va, vb = fa.get(key, "(absent)"), fb.get(key, "(absent)")
        if json.dumps(va, sort_keys=True, default=str) != json.dumps(vb, sort_keys=True, default=str):
            rows.append({"field": key, "kind": _env_kind(key), "A": _short(va), "B": _short(vb)})
    rows.sort(key=lambda r: (_KIND_ORDER.index(r["kind"]), r["field"]))
    return pd.DataFrame(rows, columns=["field", "kind", "A", "B"])


def _short(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def machine_label(env: Mapping[str, Any]) -> str:
    """A short, hostname-free label: GPU name and driver where a GPU is visible, else the CPU
    model with the BLAS library and its thread count (``AMD EPYC, openblas x2``)."""
    gpu = env.get("gpu") or {}
    devs = gpu.get("devices") or []
    if gpu.get("available") and devs:
        name = str(devs[0].get("name") or "GPU")
        more = f" x{len(devs)}" if len(devs) > 1 else ""
        drv = gpu.get("driver_version") or gpu.get("cuda_driver_api") or "?"
        return f"{name}{more}, driver {drv}"
    cpu = (env.get("cpu") or {}).get("model") or "CPU"
    blas = env.get("blas") or []
    if blas:
        b = blas[0]
        return f"{cpu}, {b.get('internal_api') or 'blas'} x{b.get('num_threads')}"
    return f"{cpu}, no BLAS"


# ==== compare ==================================================================================
@dataclass
class AuditComparison:
    """What :func:`compare_audits` found. ``rows``: one per subject x device x context;
    ``subjects``: one per subject (its most alarming verdict); ``environment``: the differing
    fingerprint fields; ``warnings``: corpus or settings mismatches."""

    a: Audit
    b: Audit
    rows: Any
    subjects: Any
    environment: Any
    warnings: list[str] = field(default_factory=list)

    def verdicts(self) -> dict[str, str]:
        """subject -> verdict."""
        return dict(zip(self.subjects["subject"], self.subjects["verdict"]))

    def to_markdown(self) -> str:
        lines = ["# Audit comparison", "",
                 f"- A: {_md_text(self.a.path)} ({_md_text(self.a.label)}, {_md_text(self.a.created)})",
                 f"- B: {_md_text(self.b.path)} ({_md_text(self.b.label)}, {_md_text(self.b.created)})", ""]
        for w in self.warnings:
            lines.append(f"> **warning:** {_md_text(w)}")
        if self.warnings:
            lines.append("")
        lines += ["## Verdicts per subject", "", _md(_present(self.subjects)), "",
                  "## Per subject, device and context", "", _md(_present(self.rows)), "",
                  "## Environment differences", ""]
        lines.append(_md(self.environment) if len(self.environment) else "No fingerprint field differs.")
        return "\n".join(lines) + "\n"


_ROW_COLUMNS = ["subject", "device", "context", "verdict", "cases", "changed_cases", "tensors", "changed",
                "arrays_kept", "max_ulp", "max_rel", "max_abs", "beyond_tolerance", "newly_failing", "fixed", "not_reproducible",
                "skipped", "only_in_a", "only_in_b"]


def _as_audit(x: Audit | str | os.PathLike[str]) -> Audit:
    return x if isinstance(x, Audit) else load_audit(x)


def _one_digest_algorithm(audits: Sequence[Audit]) -> str:
    """The digest algorithm every audit uses (files from before the ``digest`` field are SHA-256); a mix is
    refused in one line, since digests of two algorithms differ whatever the tensors."""
    algs = {au.path: str(au.data.get("digest", "sha256")) for au in audits}
    if len(set(algs.values())) > 1:
        raise InvalidArgument("audit files digest tensors with different algorithms ("
                              + ", ".join(f"{p!r}: {a}" for p, a in algs.items())
                              + "): their digests cannot be compared; re-run `harness audit` for the older ones")
    return next(iter(algs.values()))


def _failing(status: str) -> bool:
    return status not in ("ok", "skipped")


def _measure(name: str, x: np.ndarray | None, y: np.ndarray | None) -> tuple[float, float, float, bool]:
    """(max ULP, max relative difference, max absolute difference, within tolerance) of two kept arrays:
    B against A under the one tolerance policy (:func:`harness.judge.tolerance.judge_oracle`, A standing in
    for the reference), so an audit's "within tolerance" means what the gate's and the report's mean."""
    from harness.judge import bitwise as compare
    from harness.judge import tolerance

    if x is None or y is None or x.shape != y.shape or x.dtype != y.dtype:
        return math.inf, math.inf, math.inf, False
    c = compare.compare_pair(name, x, y)
    ulp = math.inf if c.max_ulp == compare.ULP_MAX else float(c.max_ulp)
    if c.bitwise_identical:
        return 0.0, 0.0, 0.0, True
    if x.dtype.kind not in "fiub":
        return ulp, math.inf, math.inf, False
    try:
        e, _ = tolerance.judge_oracle(None, name, y, x.astype(np.float64), text=False)
    except (TypeError, ValueError):
        return ulp, math.inf, math.inf, False
    return ulp, float(e.max_rel), float(e.max_abs), bool(e.within_tolerance)


def compare_audits(a: Audit | str | os.PathLike[str], b: Audit | str | os.PathLike[str]) -> AuditComparison:
    """Compare two audits entry by entry (matched on case, subject, device and context)."""
    import pandas as pd

    a, b = _as_audit(a), _as_audit(b)
    _one_digest_algorithm([a, b])
    warnings = []
    if a.corpus.get("digest") != b.corpus.get("digest"):
        warnings.append(f"the corpus digests differ (A {str(a.corpus.get('digest'))[:12]}, {a.corpus.get('cases')} "
                        f"cases; B {str(b.corpus.get('digest'))[:12]}, {b.corpus.get('cases')} cases): only "
                        f"the entries present in both are compared")
    if digest_algorithm(a) != digest_algorithm(b):
        warnings.append(f"the digest algorithms differ (A {digest_algorithm(a)}, B {digest_algorithm(b)}): "
                        f"every digest compares as changed; only kept arrays can say by how much")
    for k in ("repeats", "devices", "contexts", "subjects"):
        if a.settings.get(k) != b.settings.get(k):
            warnings.append(f"settings differ: {k} is {a.settings.get(k)!r} in A, {b.settings.get(k)!r} in B")
    ea, eb = a.by_key(), b.by_key()
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}

    def group(key: tuple[str, str, str, str]) -> dict[str, Any]:
        g = groups.get(key[1:])
        if g is None:
            g = groups[key[1:]] = dict.fromkeys(_ROW_COLUMNS[4:], 0)
            g.update(subject=key[1], device=key[2], context=key[3], max_ulp=None, max_rel=None, max_abs=None,
                     arrays_kept=True, _no_arrays=0, _err_changed=0, _measured=False)
        return g

    for key in list(ea) + [k for k in eb if k not in ea]:
        g = group(key)
        x, y = ea.get(key), eb.get(key)
        if x is None:
            g["only_in_b"] += 1
            continue
        if y is None:
            g["only_in_a"] += 1
            continue
        sa, sb = x["status"], y["status"]
        if "skipped" in (sa, sb):
            g["skipped"] += 1
            continue
        g["cases"] += 1
        if sa == "ok" and _failing(sb):
            g["newly_failing"] += 1
            continue
        if _failing(sa) and sb == "ok":
            g["fixed"] += 1
            continue
        if _failing(sa) and _failing(sb):
            ta = (x.get("error") or "").split(" ", 1)[0]
            tb = (y.get("error") or "").split(" ", 1)[0]
            if sa != sb or ta != tb:
                g["_err_changed"] += 1
            continue
        if x.get("repeats_agreed") is False or y.get("repeats_agreed") is False:
            nonrepro = True
        else:
            nonrepro = False
        names = list(dict.fromkeys([*x["tensors"], *y["tensors"]]))
        # Shape and dtype are compared beside the digest: a digest that (in some file) did not
        # cover them must not make a reshaped tensor "identical".
        changed = [n for n in names if n not in x["tensors"] or n not in y["tensors"]
                   or any(x["tensors"][n][k] != y["tensors"][n][k] for k in ("digest", "dtype", "shape"))]
        g["tensors"] += len(names)
        g["changed"] += len(changed)
        g["changed_cases"] += int(bool(changed))
        if changed and nonrepro:
            g["not_reproducible"] += 1
        arr_a, arr_b = a.arrays(x), b.arrays(y)
        if arr_a is None or arr_b is None:
            g["arrays_kept"] = False
            g["_no_arrays"] += len(changed)
            continue
        g["_measured"] = True
        g["max_ulp"] = g["max_ulp"] or 0.0
        g["max_rel"] = g["max_rel"] or 0.0
        g["max_abs"] = g["max_abs"] or 0.0
        for n in changed:
            ulp, rel, absdiff, within = _measure(n, arr_a.get(n), arr_b.get(n))
            g["max_ulp"] = max(g["max_ulp"], ulp)
            g["max_rel"] = max(g["max_rel"], rel)
            g["max_abs"] = max(g["max_abs"], absdiff)
            g["beyond_tolerance"] += int(not within)

    rows = []
    for key in sorted(groups):
        g = groups[key]
        if not g["_measured"]:
            g["max_ulp"] = g["max_ulp"] if g["max_ulp"] is not None else math.nan
            g["max_rel"] = g["max_rel"] if g["max_rel"] is not None else math.nan
            g["max_abs"] = g["max_abs"] if g["max_abs"] is not None else math.nan
        if g["cases"] == 0:
            g["arrays_kept"] = False
        g["verdict"] = _verdict(g)
        rows.append({k: g[k] for k in _ROW_COLUMNS})
    df = pd.DataFrame(rows, columns=_ROW_COLUMNS)
    if len(df):
        df["max_ulp"] = df["max_ulp"].astype(float)
        df["max_rel"] = df["max_rel"].astype(float)
        df["max_abs"] = df["max_abs"].astype(float)
    return AuditComparison(a, b, df, _subject_summary(df), environment_diff(a.environment, b.environment),
                           warnings)


def _verdict(g: Mapping[str, Any]) -> str:
    if g["newly_failing"]:
        return "newly failing"
    if g["cases"] == 0:
        return "not compared"
    if g["changed"] and g["not_reproducible"]:
        return "not reproducible"
    if g["beyond_tolerance"] or g["_err_changed"]:
        return "changed beyond tolerance"
    if g["_no_arrays"]:
        return "changed (no arrays kept)"
    if g["changed"]:
        return "changed within tolerance"
    if g["fixed"]:
        return "fixed"
    return "identical"


def _subject_summary(df: Any) -> Any:
    import pandas as pd

    cols = ["subject", "verdict", "rows", "cases", "changed_cases", "tensors", "changed", "max_ulp", "max_rel",
            "max_abs"]
    out = []
    for subject, part in df.groupby("subject", sort=True):
        verdicts = [v for v in part["verdict"] if v != "not compared"] or ["not compared"]
        out.append({"subject": subject, "verdict": min(verdicts, key=VERDICTS.index), "rows": len(part),
                    "cases": int(part["cases"].sum()), "changed_cases": int(part["changed_cases"].sum()),
                    "tensors": int(part["tensors"].sum()), "changed": int(part["changed"].sum()),
                    "max_ulp": part["max_ulp"].max(skipna=True), "max_rel": part["max_rel"].max(skipna=True),
                    "max_abs": part["max_abs"].max(skipna=True)})
    return pd.DataFrame(out, columns=cols)


def _fmt_num(v: Any, kind: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    if kind == "ulp":
        return str(int(v))
    return f"{v:.3g}"


def _present(df: Any) -> Any:
    out = df.copy()
    if "max_ulp" in out:
        out["max_ulp"] = [_fmt_num(v, "ulp") for v in out["max_ulp"]]
    for col in ("max_rel", "max_abs"):
        if col in out:
            out[col] = [_fmt_num(v, "rel") for v in out[col]]
    return out


def _md_text(v: Any) -> str:
    """One Markdown table cell or inline text: no newline, no bare ``|``, no raw HTML.

    Markdown renderers pass raw HTML through, so ``<``/``>``/``&`` are escaped as entities too.
    """
    import html

    text = " ".join(str(v).splitlines()) if isinstance(v, str) else str(v)
    return html.escape(text, quote=False).replace("|", "\\|")


def _md(df: Any) -> str:
    if not len(df):
        return "(none)"
    safe = df.copy()
    safe.columns = [_md_text(c) for c in safe.columns]
    for col in safe.columns:
        if any(isinstance(v, str) for v in safe[col]):
            safe[col] = [_md_text(v) if isinstance(v, str) else v for v in safe[col]]
    return safe.to_markdown(index=False)


_VERDICT_COLOURS = {
    "newly failing": "#f4a6a6", "not reproducible": "#f9d29d", "changed beyond tolerance": "#f4a6a6",
    "changed (no arrays kept)": "#fbe3a1", "changed within tolerance": "#fff3b0", "fixed": "#b8e0b8",
    "identical": "#d9f2d9", "not compared": "#e6e6e6",
}


def _escaped_style(df: Any) -> Any:
    # pandas' Styler writes cell values and headers raw by default: escape both.
    return df.style.hide(axis="index").format(escape="html").format_index(escape="html", axis=1)


def _styled(df: Any, colour_col: str | None = "verdict") -> str:
    sty = _escaped_style(df)
    if colour_col and colour_col in df:
        sty = sty.map(lambda v: f"background-color: {_VERDICT_COLOURS.get(v, '')}", subset=[colour_col])
    return sty.to_html()


def _png(fig: Any) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def _heatmap(rows: Any) -> str:
    """A base64 PNG: changed-tensor counts, subjects x device/context."""
    from matplotlib.figure import Figure

    if not len(rows):
        return ""
    piv = rows.assign(col=rows["device"] + "/" + rows["context"]).pivot_table(
        index="subject", columns="col", values="changed", aggfunc="sum", fill_value=0)
    fig = Figure(figsize=(2.0 + 1.3 * piv.shape[1], 1.0 + 0.42 * piv.shape[0]))
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(piv.values, cmap="Reds", aspect="auto", vmin=0, vmax=max(1, int(piv.values.max())))
    ax.set_xticks(range(piv.shape[1]), labels=list(piv.columns), rotation=30, ha="right")
    ax.set_yticks(range(piv.shape[0]), labels=list(piv.index))
    for i in range(piv.shape[0]):
        for j in range(piv.shape[1]):
            v = int(piv.values[i, j])
            ax.text(j, i, str(v), ha="center", va="center", fontsize=8,
                    color="white" if v > 0.6 * max(1, int(piv.values.max())) else "black")
    ax.set_title("tensors with a changed digest (A vs B)")
    fig.colorbar(im, ax=ax, shrink=0.8)
    return _png(fig)


def _html_page(title: str, body: str) -> str:
    import html

    return (f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;margin:1.5em} table{border-collapse:collapse;font-size:13px}"
            " td,th{border:1px solid #ccc;padding:2px 6px} .warn{color:#a33}</style></head><body>\n"
            f"<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")


def write_compare(cmp: AuditComparison, out_dir: str) -> dict[str, str]:
    """compare.md, compare.html (heatmap + tables), compare.csv under ``out_dir``; returns the paths."""
    import html

    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f"compare.{k}") for k in ("md", "html", "csv")}
    _atomic_write(paths["md"], cmp.to_markdown())
    _atomic_write(paths["csv"], cmp.rows.to_csv(index=False))
    png = _heatmap(cmp.rows)
    body = [f"<p>A: <code>{html.escape(cmp.a.path)}</code> ({html.escape(cmp.a.label)}, {html.escape(cmp.a.created)})"
            f"<br>B: <code>{html.escape(cmp.b.path)}</code> ({html.escape(cmp.b.label)}, "
            f"{html.escape(cmp.b.created)})</p>"]
    body += [f"<p class='warn'>warning: {html.escape(w)}</p>" for w in cmp.warnings]
    if png:
        body.append(f"<img alt='changed-tensor heatmap' src='data:image/png;base64,{png}'>")
    body += ["<h2>Verdicts per subject</h2>", _styled(_present(cmp.subjects)),
             "<h2>Per subject, device and context</h2>", _styled(_present(cmp.rows)),
             "<h2>Environment differences</h2>",
             _styled(cmp.environment, None) if len(cmp.environment) else "<p>No fingerprint field differs.</p>"]
    _atomic_write(paths["html"], _html_page("Audit comparison", "\n".join(body)))
    return paths


def compare_changed(cmp: AuditComparison) -> tuple[bool, str]:
    """``(changed, one line)`` for ``compare --exit-code``: changed when a row's verdict is anything but
    "identical" (rows with only skipped entries excepted) or an entry is in one audit only; and also
    when nothing at all was compared, since "the same" must have been seen, not assumed."""
    rows = cmp.rows
    if not len(rows):
        return True, "nothing to compare: both audits are empty"
    only = int(rows["only_in_a"].sum() + rows["only_in_b"].sum())
    skipped_only = (rows["verdict"] == "not compared") & (rows["only_in_a"] == 0) & (rows["only_in_b"] == 0)
    bad = rows[(rows["verdict"] != "identical") & ~skipped_only]
    compared = int(rows["cases"].sum())
    if compared == 0:
        return True, "nothing compared: no entry ran in both audits (skipped or missing)"
    if len(bad) or only:
        kinds = collections.Counter(bad["verdict"])
        parts = [f"{v} {n}" for v, n in sorted(kinds.items())]
        if only:
            parts.append(f"{only} entries in one audit only")
        return True, f"changed: {len(bad)} of {len(rows)} subject/device/context rows ({', '.join(parts)})"
    return False, f"same: {compared} entries identical in {len(rows)} subject/device/context rows"


def cmd_compare(args: argparse.Namespace) -> int:
    """``harness compare A B``: 0 when compared; with ``--exit-code`` 0 same / 1 changed (2 on error)."""
    from harness.core import argcheck

    argcheck.readable_file("a", args.a)
    argcheck.readable_file("b", args.b)
    if args.out:
        argcheck.writable_dir("out", args.out)
    cmp = compare_audits(args.a, args.b)
    for w in cmp.warnings:
        print(f"harness compare: warning: {w}", file=sys.stderr)
    print(cmp.to_markdown())
    if args.out:
        paths = write_compare(cmp, args.out)
        print(f"compare: wrote {', '.join(paths.values())}", file=sys.stderr)
    changed, line = compare_changed(cmp)
    print(f"compare: {line}", file=sys.stderr)
    return 1 if (changed and getattr(args, "exit_code", False)) else 0


# ==== merge ====================================================================================
@dataclass
class MergeResult:
    """``matrix``: rows subject/device/context, one column per machine (cells ``<8 hex> <marker>``);
    ``long``: one row per (row, column) with the details; ``columns``: column -> files joined."""

    matrix: Any
    long: Any
    columns: dict[str, list[str]]
    warnings: list[str] = field(default_factory=list)

    LEGEND = ("Cells: first 8 hex of SHA-256 over the sorted `case:tensor:digest` lines of that row "
              "(failing entries count as `case:status:error type`). Marker `=`: the same as the most common "
              "cell of the row; `!`: differs from it; `~`: the repetitions disagreed within that audit. "
              "`skipped`: every entry was skipped there; `-`: no entry.")

    def to_markdown(self) -> str:
        lines = ["# Audit merge", "", self.LEGEND, ""]
        for col, files in self.columns.items():
            lines.append(f"- **{_md_text(col)}**: {', '.join(_md_text(f) for f in files)}")
        lines.append("")
        lines += [f"> **warning:** {_md_text(w)}" for w in self.warnings]
        if self.warnings:
            lines.append("")
        lines.append(_md(self.matrix))
        return "\n".join(lines) + "\n"


def _cell_digest(entries: Sequence[Mapping[str, Any]]) -> tuple[str, bool, bool]:
    """(first 8 hex, all skipped, some repetitions disagreed)."""
    lines = []
    live = [e for e in entries if e["status"] != "skipped"]
    for e in live:
        if e["status"] == "ok":
            lines += [f"{e['case_id']}:{n}:{t['digest']}" for n, t in e["tensors"].items()]
        else:
            lines.append(f"{e['case_id']}:status:{e['status']}:{(e.get('error') or '').split(' ', 1)[0]}")
    h = hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:8]
    return h, not live, any(e.get("repeats_agreed") is False for e in live)


def _refuse_repeated(audits: Sequence[Audit]) -> None:
    """One audit given twice (the same file, or a copy with the same id and content) would be two machines."""
    seen: dict[Any, str] = {}
    for au in audits:
        keys = [("path", os.path.realpath(au.path))]
        keys.append(("content", hashlib.sha256(json.dumps(au.data, sort_keys=True).encode()).hexdigest()))
        for k in keys:
            if k in seen:
                raise InvalidArgument(f"audit file {au.path!r} is given twice to merge (the same "
                                      f"{'file' if k[0] == 'path' else 'content'} as {seen[k]!r})")
        for k in keys:
            seen[k] = au.path


def merge_audits(paths: Sequence[str | os.PathLike[str] | Audit]) -> MergeResult:
    """Many audits as one matrix. Audits with the same machine label that are shards ``i/n`` of
    the same corpus are unioned into one column; other same-label columns get the file stem."""
    import pandas as pd

    audits = [_as_audit(p) for p in paths]
    if not audits:
        raise InvalidArgument("merge needs at least one audit file")
    _one_digest_algorithm(audits)
    _refuse_repeated(audits)
    warnings: list[str] = []
    # Sources: a sharded audit joins the others of its (label, full corpus, n); the rest stand alone.
    sources: dict[Any, list[Audit]] = {}
    for i, au in enumerate(audits):
        sh = au.corpus.get("shard")
        if sh:
            n = sh.split("/")[1]
            key = ("shards", au.label, au.corpus.get("full_digest"), n)
        else:
            key = ("whole", i)
        sources.setdefault(key, []).append(au)
    labels = collections.Counter(group[0].label for group in sources.values())
    columns: dict[str, list[Audit]] = {}
    for key, group in sources.items():
        label = group[0].label
        if labels[label] > 1:
            label = f"{label} ({'+'.join(au.stem for au in group)})"
        while label in columns:
            label += "'"
        columns[label] = group
        if key[0] == "shards":
            n = int(key[3])
            have = sorted(int(au.corpus["shard"].split("/")[0]) for au in group)
            if have != list(range(1, n + 1)):
                warnings.append(f"column {label!r} holds shards {have} of {n}: the corpus is not complete there")
    digests = {au.corpus.get("full_digest") or au.corpus.get("digest") for au in audits}
    if len(digests) > 1:
        warnings.append("the audits are of different corpora: cells of different columns cover different cases")

    merged: dict[str, dict[tuple, dict[str, Any]]] = {}
    for label, group in columns.items():
        by_key: dict[tuple, dict[str, Any]] = {}
        for au in group:
            for k, e in au.by_key().items():
                if k in by_key and by_key[k]["tensors"] != e["tensors"]:
                    warnings.append(f"column {label!r}: entry {k} appears in two shards with different digests")
                by_key.setdefault(k, e)
        merged[label] = by_key

    row_keys = sorted({k[1:] for by_key in merged.values() for k in by_key})
    long_rows = []
    for rk in row_keys:
        cells = {}
        for label, by_key in merged.items():
            es = [e for k, e in sorted(by_key.items()) if k[1:] == rk]
            if not es:
                cells[label] = None
                continue
            h, skipped, disagreed = _cell_digest(es)
            cells[label] = (h, skipped, disagreed, es)
        live = [c[0] for c in cells.values() if c is not None and not c[1]]
        common = collections.Counter(live).most_common(1)[0][0] if live else None
        for label, c in cells.items():
            if c is None:
                text, marker = "-", ""
            elif c[1]:
                text, marker = "skipped", ""
            else:
                marker = "~" if c[2] else ("=" if c[0] == common else "!")
                text = f"{c[0]} {marker}"
            long_rows.append({
                "subject": rk[0], "device": rk[1], "context": rk[2], "column": label, "cell": text,
                "fingerprint": None if c is None or c[1] else c[0], "marker": marker,
                "entries": 0 if c is None else len(c[3]),
                "tensors": 0 if c is None else sum(len(e["tensors"]) for e in c[3]),
                "failing": 0 if c is None else sum(1 for e in c[3] if _failing(e["status"])),
                "consistent": len(set(live)) <= 1,
            })
    long = pd.DataFrame(long_rows, columns=["subject", "device", "context", "column", "cell", "fingerprint",
                                            "marker", "entries", "tensors", "failing", "consistent"])
    if len(long):
        matrix = long.pivot(index=["subject", "device", "context"], columns="column", values="cell")
        matrix = matrix[list(columns)].reset_index()
        matrix.columns.name = None
        cons = long.groupby(["subject", "device", "context"], sort=False)["consistent"].first()
        matrix["consistent"] = [bool(cons[(s, d, c)]) for s, d, c in
                                zip(matrix["subject"], matrix["device"], matrix["context"])]
    else:
        matrix = pd.DataFrame(columns=["subject", "device", "context", *columns, "consistent"])
    return MergeResult(matrix, long, {k: [au.path for au in v] for k, v in columns.items()}, warnings)


def write_merge(res: MergeResult, out_dir: str) -> dict[str, str]:
    """merge.md, merge.csv, merge.html under ``out_dir``; returns the paths."""
    import html

    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f"merge.{k}") for k in ("md", "csv", "html")}
    _atomic_write(paths["md"], res.to_markdown())
    _atomic_write(paths["csv"], res.matrix.to_csv(index=False))

    def colour(v: Any) -> str:
        s = str(v)
        if s.endswith(" !") or s == "False":
            return "background-color: #f4a6a6"
        if s.endswith(" ~"):
            return "background-color: #f9d29d"
        if s.endswith(" =") or s == "True":
            return "background-color: #d9f2d9"
        return "color: #888"

    cols = [c for c in res.matrix.columns if c not in ("subject", "device", "context")]
    table = _escaped_style(res.matrix).map(colour, subset=cols).to_html() if len(res.matrix) else ""
    body = [f"<p>{html.escape(res.LEGEND)}</p>", "<ul>"]
    body += [f"<li><b>{html.escape(c)}</b>: {html.escape(', '.join(f))}</li>" for c, f in res.columns.items()]
    body.append("</ul>")
    body += [f"<p class='warn'>warning: {html.escape(w)}</p>" for w in res.warnings]
    body.append(table)
    _atomic_write(paths["html"], _html_page("Audit merge", "\n".join(body)))
    return paths


def cmd_merge(args: argparse.Namespace) -> int:
    """``harness merge FILES --out DIR``: 0 when the matrix was written."""
    from harness.core import argcheck

    for f in args.files:
        argcheck.readable_file("files", f)
    argcheck.writable_dir("out", args.out)
    res = merge_audits(args.files)
    for w in res.warnings:
        print(f"harness merge: warning: {w}", file=sys.stderr)
    print(res.to_markdown())
    paths = write_merge(res, args.out)
    print(f"merge: wrote {', '.join(paths.values())}", file=sys.stderr)
    return 0
