"""The text of an upstream issue for an exported reproducer (placeholder until the template module lands)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.judge.reproducer import Reproducer

if TYPE_CHECKING:
    from harness.upstream.reproducer import Written

__all__ = ["issue_for"]


def issue_for(written: "Written", r: Reproducer) -> str:
    with open(written.script, encoding="utf-8") as fh:
        script = fh.read()
    return f"# {written.title}\n\n```python\n{script}```\n\n```\n{written.output}\n```\n"
