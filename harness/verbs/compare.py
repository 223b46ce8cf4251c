"""``harness compare A B`` (what changed between two audit files) and ``harness merge`` (many audit files as
one matrix)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from harness.core import argcheck
from harness.core.options import like, opt
from harness.verbs.cases import CasesOptions

__all__ = ["CompareOptions", "compare", "MergeOptions", "merge"]


@dataclass(frozen=True)
class CompareOptions:
    a: str = opt("a", "the first audit file", check=argcheck.kept(argcheck.readable_file), metavar="A.json",
                 role="input")
    b: str = opt("b", "the second audit file", check=argcheck.kept(argcheck.readable_file), metavar="B.json",
                 role="input")
    #: also write compare.md/.csv/.html into this directory
    out: str | None = like(CasesOptions, "out", default=None, check=argcheck.kept(argcheck.writable_dir),
                           writes=("compare.md", "compare.csv", "compare.html"))
    #: 1 when anything changed, 0 when the same (as git diff --exit-code)
    exit_code: bool = opt("--exit-code", "exit 1 when anything changed, 0 when the same", default=False, switch=True)


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
    files: tuple[str, ...] = opt("files", "audit files", check=argcheck.kept(argcheck.readable_file),
                                 metavar="AUDIT.json", nargs="+", role="input")
    #: the directory to write merge.md/.csv/.html into
    out: str = like(CasesOptions, "out", check=argcheck.kept(argcheck.writable_dir), required=True,
                    writes=("merge.md", "merge.csv", "merge.html"))


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
