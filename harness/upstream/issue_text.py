"""The text of an upstream issue for an exported reproducer (placeholder until the template module lands)."""

from __future__ import annotations

from harness.judge.reproducer import Reproducer

__all__ = ["issue_for"]


def issue_for(written, r: Reproducer) -> str:  # type: ignore[no-untyped-def]
    with open(written.script, encoding="utf-8") as fh:
        script = fh.read()
    return f"# {written.title}\n\n```python\n{script}```\n\n```\n{written.output}\n```\n"
