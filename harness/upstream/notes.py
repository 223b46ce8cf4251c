"""Whether an exported finding is a defect or an allowed behaviour (a note), and the contract's reason."""

from __future__ import annotations

from harness.judge.reproducer import Reproducer

__all__ = ["allowance_reason"]


def allowance_reason(r: Reproducer) -> str:
    """The contract's reason where ``r``'s finding is allowed behaviour; '' for a defect."""
    if r.kind == "expected error":
        return "the contracts declare this error as the expected answer to this input"
    return ""
