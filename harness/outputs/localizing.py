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


def localize_findings(found: Sequence[F.Finding], *, budget: float = 90.0, per_finding: float = 60.0,
                      parallel: int = 2) -> list[F.Finding]:
    """``found`` with ``cause`` filled for each localizable finding, until ``budget`` seconds are spent.

    Findings whose localize command is the same (another tensor kind of the same minimal case) share one run;
    ``parallel`` child processes run at once (each is one interpreter: on two cores, two)."""
    from concurrent.futures import ThreadPoolExecutor

    out = list(found)
    t0 = time.perf_counter()
    commands: dict[tuple[str, ...], list[int]] = {}
    for i, f in enumerate(found):
        argv = F.localize_argv(f)
        if argv and not f.cause:
            commands.setdefault(tuple(argv[3:]), []).append(i)  # argv[:3] is "python -m harness"
    causes: dict[tuple[str, ...], str] = {}

    def one(argv: tuple[str, ...]) -> None:
        left = budget - (time.perf_counter() - t0)
        if left <= 1:
            return
        res = run_child(list(argv), timeout=min(per_finding, left))
        causes[argv] = _cause(res.stdout) if res.ok else f"not localized: {res.reason()}"

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        list(pool.map(one, commands))
    for argv, idx in commands.items():
        if argv in causes:
            for i in idx:
                out[i] = F.with_cause(found[i], causes[argv])
    return out
