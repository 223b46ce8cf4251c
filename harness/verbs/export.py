"""``harness export``: one finding as a script a maintainer reads in one screen (and, with ``--markdown``, the
text of an upstream issue).

The engine is :mod:`harness.upstream.reproducer`: it writes only after the script's call was checked to be the
subject's and its claim to reproduce here. Exit 0 when written; 1 when the claim does not reproduce here
(nothing written); 2 for bad input (a control or oracle named, a claim no script can check, an output that
would overwrite an input).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.core import argcheck
from harness.core.argcheck import same_file
from harness.core.errors import InvalidArgument
from harness.core.options import like, opt
from harness.judge.reproducer import Reproducer
from harness.verbs.cases import CasesOptions

if TYPE_CHECKING:
    from harness.judge.allowance import Allowance

__all__ = ["ExportOptions", "export"]


@dataclass(frozen=True)
class ExportOptions:
    """What ``harness export`` writes: the finding's reproducer, the script's path, an optional issue text."""

    reproducer: Reproducer
    out: str = like(CasesOptions, "out", check=argcheck.kept(argcheck.writable_file), required=True)
    markdown: str | None = opt("--markdown", "also write the text of an upstream bug report (title, environment, "
                               "script, output)", default=None, check=argcheck.kept(argcheck.writable_file),
                               metavar="FILE", role="output")

    def __post_init__(self) -> None:
        if not self.out:
            raise InvalidArgument("out='' must name the script file to write")
        if self.markdown and (same_file(self.markdown, self.out) or
                              os.path.abspath(self.markdown) == os.path.abspath(self.out)):
            raise InvalidArgument(f"markdown={self.markdown!r} is the script's own path (out={self.out!r}): give "
                                  f"the issue text a file of its own")
        r = self.reproducer
        from harness.judge.contracts import DEFAULT_CONTRACTS

        inputs = [r.case, r.contracts or str(DEFAULT_CONTRACTS), *(_plugin_file(p) for p in r.plugins)]
        for name, path in (("out", self.out), ("markdown", self.markdown or "")):
            stem = os.path.splitext(os.path.abspath(path))[0] if path else ""
            for given in filter(None, inputs):
                if path and (same_file(path, given) or os.path.abspath(path) == os.path.abspath(given)
                             or (name == "out" and same_file(stem + ".npz", given))):
                    raise InvalidArgument(f"{name}={path!r} would overwrite an input of this export ({given})")


def _plugin_file(spec: str) -> str:
    """The file of a plug-in module (``package.module:OBJ``), found without importing it; '' where not found."""
    import importlib.util

    module = spec.partition(":")[0]
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return ""
    return (found.origin or "") if found is not None else ""


def export(opts: ExportOptions) -> int:
    """Write the script (and the issue text where asked): 0 when written, 1 when the claim does not reproduce
    here. Bad input raises ``HarnessError``."""
    from harness.upstream.reproducer import Refused, export_reproducer

    r = opts.reproducer
    allowance = _allowance(r)
    try:
        written = export_reproducer(r, opts.out, allowance.cited if allowance is not None else "")
    except Refused as exc:
        print(f"harness export: {exc}", file=sys.stderr)
        return 1
    data = f" and {os.path.basename(written.data)}" if written.data else ""
    kind = "behaviour note" if written.note else "reproducer"
    print(f"wrote {opts.out}{data}: a {kind} of {written.lines_of_code} lines of code; it exits 1 here "
          f"({(written.output.splitlines() or [''])[-1]})")
    if opts.markdown:
        from harness.upstream.issue import issue_for

        text = issue_for(written, r, allowance)
        os.makedirs(os.path.dirname(os.path.abspath(opts.markdown)), exist_ok=True)
        with open(opts.markdown, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {opts.markdown} ({len(text):,} characters)")
    return 0


def _allowance(r: Reproducer) -> "Allowance | None":
    """The contract's reason where the finding is an allowed behaviour (a note); None for a defect. ``--note``
    on a finding the contracts call a defect is refused: a defect is never written up as allowed."""
    from harness.core.corpus_files import load_case_file
    from harness.judge.allowance import allowance_for
    from harness.judge.contracts import load_contracts

    case = load_case_file(r.case, r.case_id or None)
    found = allowance_for(r, load_contracts(r.contracts or None), case.tags, expect=case.expect)
    if r.note and found is None:
        raise InvalidArgument("note=True: the contracts allow no such behaviour for this finding, so it is a "
                              "defect; export it without --note")
    return found
