"""Where each finding starts: ``harness localize`` for each localizable finding, in a child process.

Once per finding (the group shares one cause), on its reproducer's case (the minimal one where shrinking found
it), within a total budget; the child runs the subject under the hashing hooks, so a crash, a hang or an exit
there is this finding's "not localized: <why>", never the report's end.
"""

from __future__ import annotations

import time
from typing import Sequence

from harness.execute.sandbox import run_child
from harness.judge import findings as F

__all__ = ["localize_findings"]


def _cause(text: str) -> str:
    """The line that names where it starts (``Root cause: ...``), else the first line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    root = next((ln for ln in lines if ln.startswith("Root cause:")), None)
    if root is not None:
        return root.removeprefix("Root cause:").strip()
    return lines[0] if lines else "no differing function node"


def localize_findings(found: Sequence[F.Finding], *, budget: float = 90.0, per_finding: float = 60.0
                      ) -> list[F.Finding]:
    """``found`` with ``cause`` filled for each localizable finding (in order, until ``budget`` seconds)."""
    out = list(found)
    t0 = time.perf_counter()
    for i, f in enumerate(found):
        argv = F.localize_argv(f)
        if not argv or f.cause:
            continue
        left = budget - (time.perf_counter() - t0)
        if left <= 1:
            break
        res = run_child(argv[3:], timeout=min(per_finding, left))  # argv[:3] is "python -m harness"
        if res.ok:
            cause = _cause(res.stdout)
        else:
            cause = f"not localized: {res.reason()}"
        out[i] = F.with_cause(f, cause)
    return out
