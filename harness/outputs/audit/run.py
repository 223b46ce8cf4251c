"""``python -m harness audit``: run every subject on a corpus and write one audit file.

The subjects (the ``control.*`` self-tests only when asked for with ``--subjects``) run on the corpus
(default :data:`~harness.outputs.audit.fileformat.DEFAULT_CORPUS`) through the one campaign driver
(``R`` in-process repetitions, no fresh processes); the file records, per case x subject x device x context,
the status, the digest and the sketch (:mod:`harness.judge.sketch`) of every output tensor and whether the
repetitions agreed. No arrays unless ``--keep-arrays DIR`` (one ``.npz`` per entry, written with plain NumPy
arrays only, loadable with ``allow_pickle=False``). With ``--cluster`` the campaign runs through
:func:`harness.outputs.fleet.run_on_cluster`, one file per target.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

import numpy as np

from harness.core.errors import InvalidArgument
from harness.core.fileio import atomic_npz, atomic_write
from harness.outputs.audit.fileformat import DEFAULT_CORPUS, FORMAT, VERSION

if TYPE_CHECKING:
    from harness.core.argcheck import Shard
    from harness.core.devices import Device

__all__ = ["run_audit", "AuditRequest"]


def _default_subjects() -> list[str]:
    from harness.subjects.registry import SUBJECTS

    return [n for n in SUBJECTS if SUBJECTS[n].role != "control"]


def _one_line_error(rec: Mapping[str, Any]) -> str | None:
    errs = rec.get("errors") or []
    if not errs:
        return None
    e = errs[0]
    text = f"{e.get('type')} in {e.get('phase')}: {e.get('message')}"
    return " ".join(text.split())[:500]


def _entry(rec: Mapping[str, Any], role: str) -> dict[str, Any]:
    tensors = {name: {"digest": t["digest"], "dtype": t["dtype"], "shape": list(t["shape"]),
                      "repeats_agreed": bool(t["bitwise_identical"]), "sketch": t.get("sketch")}
               for name, t in sorted(rec.get("tensors", {}).items())}
    if not tensors:
        agreed = None if rec["status"] in ("skipped", "error", "crashed", "timeout") else rec["status"] == "ok"
    else:
        agreed = rec["status"] == "ok" and all(t["repeats_agreed"] for t in tensors.values())
    return {
        "case_id": rec["case_id"], "family": rec["family"], "subject": rec["subject"], "role": role,
        "device": rec["device"], "context": rec["context"], "bad_input": bool(rec.get("bad_input", False)),
        "status": rec["status"], "error": _one_line_error(rec), "skip_reason": rec.get("skip_reason"),
        "repeats_agreed": agreed, "array_file": None, "tensors": tensors,
    }


class AuditRequest(Protocol):
    """What an audit runs: ``harness audit``'s options record (:class:`harness.verbs.audit.AuditOptions`, which
    refuses a profile with a corpus and fewer than two repetitions), as this stage reads it."""

    @property
    def corpus(self) -> str | None: ...
    @property
    def profile(self) -> str | None: ...
    @property
    def devices(self) -> tuple[str, ...]: ...
    @property
    def contexts(self) -> tuple[str, ...]: ...
    @property
    def subjects(self) -> tuple[str, ...] | None: ...
    @property
    def shard(self) -> Shard | None: ...
    @property
    def out(self) -> str: ...
    @property
    def keep_arrays(self) -> str | None: ...
    @property
    def repeats(self) -> int: ...
    @property
    def jobs(self) -> int: ...
    @property
    def plugins(self) -> tuple[str, ...]: ...
    @property
    def quiet(self) -> bool: ...


def run_audit(opts: AuditRequest, *, devices: Sequence[Device] | None = None, executor: Any = None,
              environment: Mapping[str, Any] | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run every subject on the corpus and write the audit file ``opts.out``; returns its data.

    ``opts.corpus`` None: :data:`DEFAULT_CORPUS`, or with ``opts.profile`` the default corpus generated at that
    profile's sizes (the file records it as ``profile:NAME``); ``opts.subjects`` None: every registered subject
    but the ``control.*`` self-tests; ``opts.shard`` runs the cases of :func:`harness.execute.plan.shard`.
    ``devices``: the devices selected here (default ``opts.devices`` as named, every GPU this machine sees among
    them). ``executor`` runs the tasks (default the local pool; :class:`harness.execute.cluster.DaskExecutor` for
    a cluster), ``environment`` is the fingerprint to record (default this process's: a cluster passes the
    one taken on the worker that ran the tasks) and ``extra`` adds top-level fields (``cluster``).
    """
    from harness.core.contexts import parse_contexts
    from harness.core.corpus_files import corpus_digest, load_corpus
    from harness.core.devices import parse_devices
    from harness.core.env import fingerprint
    from harness.execute.campaign import CampaignOptions, load_arrays
    from harness.execute.driver import run_campaign
    from harness.execute.plan import plan
    from harness.execute.plan import shard as shard_cases
    from harness.judge.digest import DIGEST_ALGORITHM
    from harness.subjects.registry import subjects_for

    t_start = time.perf_counter()
    repeats, quiet, out_path, sh = opts.repeats, opts.quiet, opts.out, opts.shard
    if opts.profile is not None:
        from harness.generate.corpora import default_corpus

        full = default_corpus(profile=opts.profile)
        corpus_path = f"profile:{opts.profile}"
    else:
        corpus_path = os.fspath(opts.corpus if opts.corpus is not None else DEFAULT_CORPUS)
        full = load_corpus(corpus_path)
    if not full:
        raise InvalidArgument(f"corpus={corpus_path!r} holds no cases")
    cases = shard_cases(full, *sh) if sh is not None else full

    devs = list(devices) if devices is not None else parse_devices(opts.devices)
    ctxs = parse_contexts(opts.contexts)
    subj = subjects_for(opts.subjects if opts.subjects is not None else _default_subjects())
    roles = {s.name: s.role for s in subj}

    settings = CampaignOptions(repeats=repeats, fresh=0, plugins=opts.plugins, quiet=quiet, jobs=opts.jobs)
    tasks = plan(cases, subj, devs, ctxs, oracle_contexts=tuple(c.name for c in ctxs))
    audit_id = uuid.uuid4().hex[:12]
    arrays_dir = os.path.abspath(opts.keep_arrays) if opts.keep_arrays is not None else None
    if arrays_dir is not None:
        os.makedirs(arrays_dir, exist_ok=True)
    if not quiet:
        print(f"harness audit: {len(cases)} of {len(full)} cases, {len(subj)} subjects, devices "
              f"{', '.join(d.id for d in devs)}, contexts {', '.join(c.name for c in ctxs)}: "
              f"{len(tasks)} tasks x {repeats} repetitions -> {out_path}", file=sys.stderr)
    env = dict(environment) if environment is not None else fingerprint()
    entries = []
    # The campaign works in the destination's folder (``OUT.work/``), not a temporary one: on the same disk as
    # the result, and kept when the audit fails (a full disk) so that nothing it computed is lost.
    work = os.path.abspath(os.fspath(out_path)) + ".work"
    if os.path.exists(work):
        raise InvalidArgument(f"out={os.fspath(out_path)!r}: {work} exists (an earlier audit that did not finish): "
                              f"remove it or choose another --out")
    # The one campaign driver (its measures, judged under the shipped contracts, stay in the work directory:
    # an audit records digests and sketches, and compare/merge judge two audits against each other).
    records = run_campaign(work, cases, subj, devs, ctxs, settings, executor=executor,
                           oracle_contexts=tuple(c.name for c in ctxs)).records if tasks else {}
    for task in tasks:
        rec = records[task.key].to_dict()
        e = _entry(rec, roles.get(rec["subject"], "subject"))
        if arrays_dir is not None and rec.get("array_file"):
            got = load_arrays(work, rec["array_file"])
            fname = f"{audit_id}-{rec['array_file']}"
            atomic_npz(os.path.join(arrays_dir, fname), {k: np.ascontiguousarray(v) for k, v in got.items()})
            e["array_file"] = fname
        entries.append(e)

    data = {
        "format": FORMAT, "version": VERSION, "id": audit_id, "digest": DIGEST_ALGORITHM,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "environment": env,
        "corpus": {"path": corpus_path, "digest": corpus_digest(cases), "cases": len(cases),
                   "shard": None if sh is None else str(sh),
                   "full_digest": corpus_digest(full), "full_cases": len(full)},
        "settings": {"repeats": repeats, "fresh": 0, "timeout": settings.timeout, "devices": [d.id for d in devs],
                     "contexts": [c.name for c in ctxs], "subjects": [s.name for s in subj],
                     "plugins": list(opts.plugins), "keep_arrays": arrays_dir is not None},
        "arrays_dir": arrays_dir,
        "seconds": round(time.perf_counter() - t_start, 3),
        "entries": entries,
        **dict(extra or {}),
    }
    atomic_write(os.fspath(out_path), json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n")
    shutil.rmtree(work, ignore_errors=True)  # the audit file holds what an audit keeps
    return data
