"""Shrink findings (the report's and the gate's); the ``harness shrink`` verb is :mod:`harness.verbs.shrink`.

Each finding's smallest case is reduced by :func:`harness.execute.shrink.shrink` within a share of the budget,
in worker processes; the minimal case is written beside the original under ``cases/`` and the finding keeps both
(:class:`~harness.judge.findings.Shrunk`): its reproducer then runs the minimal case.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Sequence

from harness.core.cases import Case
from harness.core.corpus_files import load_case_file
from harness.core.devices import parse_device
from harness.core.fileio import atomic_write
from harness.execute.isolated import Runner
from harness.execute.shrink import Target, case_sizes, reproduces, shrink
from harness.judge import findings as F
from harness.judge.contracts import Contracts

__all__ = ["target_of", "shrink_findings"]


def target_of(f: F.Finding) -> Target:
    """What must still reproduce while ``f``'s case shrinks."""
    devices = f.kind == F.FindingKind.DEVICE
    return Target(kind=f.kind, subject=f.subject, device=parse_device(f.device), context=f.context,
                  other=f.other if f.kind.paired else "",
                  relation=f.relation if f.kind == F.FindingKind.RELATION else "", tensor_kind=f.tensor_kind,
                  error=f.error.split(":", 1)[0] if f.error else "",
                  others=(parse_device(f.other),) if devices and f.other else (), flaky=f.flaky)


def shrink_findings(found: Sequence[F.Finding], contracts: Contracts, *, budget: float = 60.0,
                    timeout: float | None = None, log: Any = None, parallel: int = 0) -> list[F.Finding]:
    """``found`` with each shrinkable finding's minimal case, until ``budget`` seconds (wall) are spent.

    Findings go to ``parallel`` lanes (0: :func:`~harness.execute.settings.default_jobs`), each its own
    :class:`Runner`, most severe first; each finding gets its lane's share of the time left. The same finding
    in another context (or another tensor kind of the same case) usually shrinks to the same case, so such
    findings go to one lane, in order, and each starts from the minimal case found before where it reproduces
    there; each lane keeps what each case showed (:func:`~harness.execute.shrink.reproduces`' ``memo``), so
    the group's later findings mostly re-read the checks of the first."""
    from harness.execute.settings import default_jobs

    out = list(found)
    todo = [i for i, f in enumerate(found) if f.kind.shrinkable and f.shrunk is None]
    t0 = time.perf_counter()
    plugins = tuple(found[0].origin.plugins) if found else ()
    groups: dict[tuple[str, ...], list[int]] = {}
    for i in todo:
        f = found[i]
        groups.setdefault((f.subject, f.kind, f.case_id, f.relation, f.device), []).append(i)
    queue = list(groups.values())
    lanes = max(1, min(parallel or default_jobs(), len(queue)))
    lock = threading.Lock()
    left_count = [len(todo)]

    def one(runner: Runner, memo: dict, i: int, start: Case | None) -> Case | None:
        f = found[i]
        path = f.origin.case_file(f.case_id)
        try:
            case = load_case_file(path)
        except Exception:  # noqa: BLE001 - a finding without its case file is left as it is
            return None
        if case.arrays:
            return None
        left = budget - (time.perf_counter() - t0)
        with lock:
            share = min(left, left * lanes / max(1, left_count[0]))
        target = target_of(f)
        if start is not None and reproduces(runner, contracts, start, target, memo=memo):
            res = shrink(runner, contracts, start, target, budget=share, log=log, memo=memo)
            res.original = case
        else:
            res = shrink(runner, contracts, case, target, budget=share, log=log, memo=memo)
        if not res.shrunk:
            return None
        mini = os.path.join(os.path.dirname(path), f"{res.case.id}.json")
        atomic_write(mini, res.case.to_json() + "\n")
        out[i] = F.with_shrunk(f, F.Shrunk(res.case.id, mini, case.id, case_sizes(res.case), case_sizes(case),
                                           res.runs, round(res.seconds, 2), res.complete))
        return res.case

    errors: list[BaseException] = []

    def lane() -> None:
        try:
            run_lane()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            with lock:
                errors.append(exc)
                queue.clear()  # the other lanes stop after their current finding

    def run_lane() -> None:
        with Runner(plugins=plugins, timeout=timeout, fresh=2) as runner:
            memo: dict = {}  # a case's check, for every tensor kind at once: a group's findings share it
            while True:
                with lock:
                    if not queue:
                        return
                    group = queue.pop(0)
                start = None
                for i in group:
                    if budget - (time.perf_counter() - t0) <= 0:
                        return
                    start = one(runner, memo, i, start) or start
                    with lock:
                        left_count[0] -= 1

    threads = [threading.Thread(target=lane, name=f"harness-shrink-{k}", daemon=True) for k in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out
