"""What a replay found, as one of a few kinds with one exit code each: an error is never a difference.

A difference is two sets of values compared and found unequal (:func:`is_difference`): bits of two runs, of two
contexts or devices, of the run and the baseline, of a case and its related case, or an error beyond the oracle's
tolerance. A run that raised, crashed, timed out or could not be set up has no values: it is counted as an
error, never as a difference, wherever measures are counted (replay, the report's matrix, the gate).

:func:`replay_outcome` sorts one replay (the task's runs, the runs it was compared with, and the measures) into:

========== ============================================================================== ====
kind       what it is                                                                     exit
========== ============================================================================== ====
same       every run gave values, and nothing differs                                     0
skipped    the subject does not run this case here                                        0
differs    values differ (:func:`is_difference`), or the runs disagree: some gave values   1
           and some raised, or they raised in different ways
broken     the runs agree but a check of the contract fails (a bad input that must raise  1
           returned values, or raised elsewhere; no contract line)
raised     every run raised the same way (type and phase) and no check of the contract   3
           fails on it: an error, reproduced, not a difference; the line says whether
           the contracts expect or declare it
========== ============================================================================== ====

A bad input (an unreadable case, a bad option) never gets here: it is exit 2 before any run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from harness.core.classification import Verdict
from harness.core.records import Measure

__all__ = ["BITWISE_KINDS", "EXIT_CODES", "Outcome", "is_difference", "replay_outcome", "run_signatures"]

#: The measure kinds that compare the bits of two sets of values.
BITWISE_KINDS = frozenset({"repeat", "process", "context", "device", "baseline", "relation"})
#: The exit code of each kind of replay outcome (the one table; README "Exit codes" says the same).
EXIT_CODES: Mapping[str, int] = {"same": 0, "skipped": 0, "differs": 1, "broken": 1, "raised": 3}


def is_difference(m: Measure) -> bool:
    """Whether ``m`` compared values and found them unequal (an oracle error beyond tolerance counts, unless the
    contracts declare those values a known defect). A task's error, a skip, a check that did not run: never."""
    if m.kind == "oracle":
        return m.within is False and m.verdict != Verdict.KNOWN_DEFECT
    return m.kind in BITWISE_KINDS and m.identical is False


@dataclass(frozen=True)
class Outcome:
    """One replay's finding: its kind (a key of :data:`EXIT_CODES`) and the last line it prints."""

    kind: str
    line: str

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.kind]


def run_signatures(record: Any) -> dict[str, int]:
    """How the runs of one task ended: ``"ok"`` or ``"<Type> in <phase>"`` (a crash or a timeout has its own
    type) -> number of runs. The record keeps its distinct errors, not one per run: where there are several,
    each is counted once and the first takes the other failed runs."""
    out: dict[str, int] = {}
    statuses = dict(getattr(record, "statuses", {}) or {})
    if statuses.get("ok"):
        out["ok"] = int(statuses["ok"])
    failed = sum(int(n) for s, n in statuses.items() if s not in ("ok", "skipped"))
    if not failed:
        return out
    kinds = list(dict.fromkeys(f"{e.get('type')} in {e.get('phase')}" for e in (record.errors or ())))
    if not kinds:
        kinds = [s for s in sorted(statuses) if s not in ("ok", "skipped")]
    for i, k in enumerate(kinds):
        out[k] = max(1, failed - (len(kinds) - 1)) if i == 0 else 1
    return out


def replay_outcome(records: Sequence[Any], measures: Iterable[Measure]) -> Outcome:
    """The outcome of a replay whose first record is the task replayed and whose others are the runs it was
    compared with (other contexts, other devices). See the module's table."""
    measures = list(measures)
    ran = [r for r in records if r is not None and r.status != "skipped"]
    if not ran:
        why = next((r.skip_reason for r in records if r is not None and r.skip_reason), "")
        return Outcome("skipped", f"skipped: {why}" if why else "skipped")
    ends: dict[str, int] = {}
    for r in ran:
        for sig, n in run_signatures(r).items():
            ends[sig] = ends.get(sig, 0) + n
    failed = {k: n for k, n in ends.items() if k != "ok"}
    if failed and len(ends) > 1:
        said = ", ".join(f"{n} {k}" for k, n in sorted(ends.items(), key=lambda kv: kv[0] != "ok"))
        return Outcome("differs", f"the runs disagree: {said}")
    if failed:
        (sig, n), = failed.items()
        task = next((m for m in measures if m.kind == "task" and m.tensor == ""), None)
        verdict = task.verdict if task is not None else Verdict.ERROR
        if task is not None and verdict == Verdict.BROKEN:  # the error itself breaks the contract: a finding
            return Outcome("broken", f"every run raised the same way ({sig} in {n} of {n} run(s)), which breaks "
                                     f"the contract: {task.rule}")
        return Outcome("raised", f"every run raised the same way: {sig} in {n} of {n} run(s), verdict "
                                 f"{str(verdict)!r}: an error, not a difference")
    found = [m for m in measures if is_difference(m)]
    if found:
        return Outcome("differs", f"{len(found)} comparison(s) differ")
    broken = [m for m in measures if m.verdict == Verdict.BROKEN]
    if broken:
        return Outcome("broken", f"{len(broken)} check(s) of the contract broken: {broken[0].rule}")
    return Outcome("same", "nothing differs")
