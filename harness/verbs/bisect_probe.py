"""One bisection probe, run by ``harness bisect`` in a throwaway environment: one case, one subject, one
context, and the digest of every output tensor, as one JSON line on stdout.

It runs as ``python -m harness.verbs.bisect_probe REQUEST`` in the probe environment's interpreter with this
checkout first on ``PYTHONPATH``: the subject's code, the case's arrays and the digest are the harness's own
(:func:`harness.subjects.base.execute`, :func:`harness.judge.bitwise.digest`), so a probe digests exactly what a
campaign's worker digests; only the packages the probe installed differ. ``REQUEST`` is JSON: ``case`` (a case
file), ``case_id``, ``subject``, ``context``, ``plugins`` and ``packages`` (the distributions whose versions the
probe reports as imported, to show that the pins took effect).
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from typing import Any, Mapping

__all__ = ["probe", "main"]


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def probe(request: Mapping[str, Any]) -> dict[str, Any]:
    """Run the request's subject once on its case in its context (on the CPU); its digests in output order,
    or its error (``Type in phase: message``, itself compared as the run's result)."""
    from harness.core.contexts import get_context
    from harness.core.corpus_files import load_case_file
    from harness.core.devices import CPU
    from harness.judge.digest import digest
    from harness.subjects.base import execute
    from harness.subjects.registry import get_subject, load_plugin

    for p in request.get("plugins", ()):
        load_plugin(p, in_process=True)
    case = load_case_file(request["case"], request.get("case_id") or None)
    result = execute(get_subject(request["subject"]), case, CPU, get_context(request.get("context", "default")))
    out: dict[str, Any] = {"status": result.status,
                           "versions": {d: _version(d) for d in request.get("packages", ())}}
    if result.ok:
        out["digests"] = [[name, digest(a)] for name, a in result.arrays.items()]
    elif result.error is not None:
        out["error"] = f"{result.error.type} in {result.error.phase}: {result.error.message}"
    else:
        out["error"] = result.skip_reason or result.status
    return out


def main(argv: list[str] | None = None) -> int:
    request = json.loads((argv if argv is not None else sys.argv[1:])[0])
    try:
        out = probe(request)
    except Exception as exc:  # noqa: BLE001 - a probe that cannot start (unknown subject, plug-in) says why
        text = (str(exc).strip().splitlines() or [""])[0]
        out = {"status": "crashed", "error": f"{type(exc).__name__}: {text}"[:500]}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
