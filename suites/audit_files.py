"""Audit files for the audit tests (suites/unit/verbs/test_audit.py and suites/unit/outputs/audit/): the anchor
cases their small corpora are made of, an audit run in this process, and audit files written by hand (``_synthetic``,
``_base_audit``) whose verdicts are known in advance. The ``work``, ``small`` and ``whole`` fixtures built on them
are in suites/conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.generate.corpora import anchor_cases
from harness.judge.digest import DIGEST_ALGORITHM, digest
from harness.judge.sketch import tensor_sketch
from harness.outputs import audit as A
from harness.verbs.audit import AuditOptions

EMBED_SUBJECTS = ("chainer.embed_id", "chainer.EmbedID", "espnet.embed_id", "espnet.EmbedID")
BLAS_SPLIT = next(c for c in anchor_cases() if "blas-split" in c.tags)


def _anchor(tag: str):
    return next(c for c in anchor_cases() if tag in c.tags)


def _run(corpus: Path, out: Path, **kw) -> Path:
    """An audit of ``corpus`` into ``out`` on the CPU, in this process (``kw``: more of the audit's options)."""
    A.run_audit(AuditOptions(corpus=str(corpus), out=str(out), **{"devices": "cpu", "quiet": True, **kw}))
    return out


def _synthetic(path: Path, env: dict, entries: list[tuple[str, str, dict[str, np.ndarray] | None]],
               algorithm: str | None = DIGEST_ALGORITHM, *, arrays: bool = True, sketches: bool = False,
               roles: dict[str, str] | None = None) -> Path:
    """An audit file of (subject, status, arrays) entries on one case; arrays kept under ``<path>.arrays``
    (``arrays=False``: none kept). ``algorithm=None`` writes a file as audits were before they named their
    digest (plain SHA-256); ``sketches`` adds each tensor's sketch, ``roles`` records entry roles."""
    keep = path.with_suffix(".arrays")
    keep.mkdir(exist_ok=True)
    out = []
    for i, (subject, status, tensors) in enumerate(entries):
        e = {"case_id": "c0", "family": "embed", "subject": subject, "device": "cpu", "context": "default",
             "status": status, "error": None if status == "ok" else "ValueError in forward: boom",
             "repeats_agreed": True if status == "ok" else None, "array_file": None, "tensors": {}}
        if roles and subject in roles:
            e["role"] = roles[subject]
        if status == "ok":
            e["tensors"] = {k: {"digest": (digest(v, algorithm) if algorithm
                                           else digest(v, "sha256").removeprefix("sha256:")),
                                "dtype": v.dtype.name, "shape": list(v.shape), "repeats_agreed": True}
                            for k, v in tensors.items()}
            if sketches:
                for k, v in tensors.items():
                    e["tensors"][k]["sketch"] = tensor_sketch(v)
            if arrays:
                e["array_file"] = f"{i}.npz"
                np.savez(keep / e["array_file"], **tensors)
        out.append(e)
    data = {"format": "harness-audit", "version": 1, "created": "2026-01-01T00:00:00+00:00", "environment": env,
            "corpus": {"path": "x", "digest": "d", "cases": 1, "shard": None},
            "settings": {"repeats": 2}, "arrays_dir": str(keep) if arrays else None, "entries": out}
    if algorithm is not None:
        data["digest"] = algorithm
    path.write_text(json.dumps(data))
    return path


def _base_audit(work: Path, name: str, subject: str = "s", shape=(50,)) -> Path:
    x = np.linspace(-2, 3, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    return _synthetic(work / name, {"gpu": {"available": False}}, [(subject, "ok", {"y": x})])
