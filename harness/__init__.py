"""chainer-repro-harness: does the same input give the same bits, and does a divergence matter?

The front door. Every verb is a typed function over one frozen options record (``harness.verbs``); the command
line (``python -m harness VERB``) only parses into that record. The data flows one way::

    generate -> cases -> execute -> judge -> findings -> verbs -> outputs
                                                      \\-> upstream (reproducer script, issue text, bisection)

``Case`` is a portable case; ``Reproducer`` the record every printed command of a finding is rendered from.
The names below are imported on first use, so ``import harness`` (and every worker process) stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Each public name and the module that holds it.
_PUBLIC = {
    "Case": "harness.core.cases",
    "Reproducer": "harness.judge.reproducer",
    **{name: f"harness.verbs.{module}" for module, names in (
        ("report", ("report", "ReportOptions")), ("gate", ("gate", "GateOptions")),
        ("replay", ("replay", "ReplayOptions")), ("shrink", ("shrink", "ShrinkOptions")),
        ("localize", ("localize", "LocalizeOptions")), ("export", ("export", "ExportOptions")),
        ("bisect", ("bisect", "BisectOptions")), ("trajectory", ("trajectory", "TrajectoryOptions")),
        ("audit", ("audit", "AuditOptions")), ("compare", ("compare", "CompareOptions", "merge", "MergeOptions")),
        ("cases", ("cases", "CasesOptions")), ("subjects", ("subjects", "SubjectsOptions")),
        ("env", ("env", "EnvOptions"))) for name in names},
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    """``harness.report``, ``harness.ReportOptions``, ...: the verb or record, imported on first use."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)
