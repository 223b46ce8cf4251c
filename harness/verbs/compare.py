"""``harness compare A B`` (what changed between two audit files) and ``harness merge`` (many audit files as
one matrix)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

__all__ = ["CompareOptions", "compare", "MergeOptions", "merge"]


@dataclass(frozen=True)
class CompareOptions:
    a: str
    b: str
    out: str | None = None       # also write compare.md/.csv/.html into this directory
    exit_code: bool = False      # 1 when anything changed, 0 when the same (as git diff --exit-code)


def compare(opts: CompareOptions) -> int:
    """0 when compared; with ``exit_code`` 0 same, 1 changed."""
    from harness.outputs.audit.compare import compare_audits, compare_changed, write_compare

    cmp = compare_audits(opts.a, opts.b)
    for w in cmp.warnings:
        print(f"harness compare: warning: {w}", file=sys.stderr)
    print(cmp.to_markdown())
    if opts.out:
        paths = write_compare(cmp, opts.out)
        print(f"compare: wrote {', '.join(paths.values())}", file=sys.stderr)
    changed, line = compare_changed(cmp)
    print(f"compare: {line}", file=sys.stderr)
    return 1 if changed and opts.exit_code else 0


@dataclass(frozen=True)
class MergeOptions:
    files: tuple[str, ...]
    out: str                     # the directory to write merge.md/.csv/.html into


def merge(opts: MergeOptions) -> int:
    """0 when the matrix was written."""
    from harness.outputs.audit.merge import merge_audits, write_merge

    res = merge_audits(list(opts.files))
    for w in res.warnings:
        print(f"harness merge: warning: {w}", file=sys.stderr)
    print(res.to_markdown())
    paths = write_merge(res, opts.out)
    print(f"merge: wrote {', '.join(paths.values())}", file=sys.stderr)
    return 0
