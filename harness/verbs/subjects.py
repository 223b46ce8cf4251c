"""``harness subjects``: the registered subjects, their family, devices and declared determinism."""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.core.options import like
from harness.verbs.common import load_plugins, reproducer_option
from harness.verbs.env import EnvOptions

__all__ = ["SubjectsOptions", "subjects"]


@dataclass(frozen=True)
class SubjectsOptions:
    json: bool = like(EnvOptions, "json", default=False)
    plugins: tuple[str, ...] = reproducer_option("--subject-plugin", "subjects", default=())


def _declared(d: bool | None) -> str:
    return "deterministic" if d else "nondeterministic" if d is False else "unknown"


def subjects(opts: SubjectsOptions) -> int:
    """0: listed."""
    from harness.subjects.registry import SUBJECTS

    load_plugins(opts.plugins)
    rows = [s.to_dict() for s in SUBJECTS.values()]
    if opts.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            decl = ", ".join(f"{k}: {_declared(v['deterministic'])}" for k, v in r["declared"].items())
            print(f"{r['name']:28s} {r['family']:9s} {','.join(r['devices']):8s} {decl}")
    return 0
