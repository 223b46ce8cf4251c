"""The page's finding cards: one per headline, its lead finding in full (sizes, commands, links), the rest beneath.

How large a finding is in words (:func:`size_lines`), what its replay command does, and the run directory's
files a card links to (its case, its row of findings.csv, its figure).
"""

from __future__ import annotations

import math
import os
from typing import Any, Sequence

from harness.judge.findings import Classification, Finding, FindingKind
from harness.judge.outcomes import EXIT_CODES
from harness.outputs.page_view import ReportView

__all__ = ["size_lines", "finding_items", "headline_items"]


def _num(v: Any) -> float | None:
    try:
        f = float(str(v).split()[0])
    except (ValueError, IndexError, TypeError):
        return None
    return f if math.isfinite(f) else None


def size_lines(f: Finding) -> list[tuple[str, str]]:
    """How large a finding is, as (label, text): values first, then ULPs and error/allowed."""
    m = f.worst
    out: list[tuple[str, str]] = []
    a, e = _num(m.actual), _num(m.expected)
    if a is not None and e is not None:
        # enough digits that two different values never print the same
        p = next((p for p in range(6, 18) if f"{a:.{p}g}" != f"{e:.{p}g}"), 17) if a != e else 6
        out.append(("worst element", f"{a:.{p}g} against {e:.{p}g}" + (f" ({m.tensor})" if m.tensor else "")))
    absd = m.max_abs if m.max_abs is not None else (abs(a - e) if a is not None and e is not None else None)
    rel = m.max_rel if m.max_rel is not None else (abs(a - e) / abs(e) if a is not None and e else None)
    if absd is not None:
        out.append(("absolute difference", f"{absd:.3g}" + (f", relative {rel:.3g} ({rel * 100:.3g}%)"
                                                            if rel is not None else "")))
    if m.max_ulp is not None and m.kind not in ("oracle", "task"):
        ulps = "NaN against a number" if m.max_ulp >= 2**63 else f"{m.max_ulp:,} ULP"
        out.append(("ULP distance", ulps + (f" ({m.dtype})" if m.dtype else "")))
    if m.error_ratio is not None:
        out.append(("error / allowed", f"{m.error_ratio:.3g}" + (f" ({m.allowed})" if m.allowed else "")))
    if m.n_total and m.n_diff is not None:
        out.append(("elements differing", f"{m.n_diff:,} of {m.n_total:,} ({m.n_diff / m.n_total:.1%})"))
    if f.error:
        out.append(("error", f.error + (f" (raised in {f.where})" if f.where else "")))
    if f.reason:
        out.append(("why", f.reason))
    return out


def _replay_note(f: Finding) -> str:
    """What the finding's replay command does when it reproduces (its exit code says so)."""
    if f.classification in (Classification.KNOWN_DEFECT, Classification.EXPECTED_ERROR):
        if f.kind.measure_kind == "oracle":  # values the contracts declare wrong: nothing differs
            return f"prints the values beyond the oracle's tolerance; exit {EXIT_CODES['same']}: the contracts file " \
                   "declares them"
        return f"prints the error; exit {EXIT_CODES['raised']}: every run raised it, as the contracts file declares"
    return f"exit {EXIT_CODES['differs']} when it reproduces"


def _export_what(f: Finding) -> str:
    """What the finding's export commands write: a behaviour note, or one script per library that has it."""
    if f.classification in (Classification.ALLOWED, Classification.EXPECTED_ERROR):
        return "a behaviour note (the contracts file allows or expects it: not a defect)"
    return "a standalone script" + (", one per library," if f.library_cases else "")


_FIGURE_OF = {"repeat": "divergence.png", "process": "divergence.png", "context": "divergence.png",
              "device": "divergence.png", "relation": "divergence.png", "baseline": "divergence.png",
              "oracle": "error_vs_size.png"}


def finding_items(view: ReportView) -> list[dict[str, Any]]:
    files = set(view.files)
    items = []
    for row, f in enumerate(view.findings, start=1):
        links = []
        case = os.path.relpath(f.shrunk.file, view.run_dir) if f.shrunk is not None and f.shrunk.file else \
            os.path.join("cases", f"{f.repro_case}.json")
        if case in files:
            links.append((f"case {f.repro_case}", case))
        if "findings.csv" in files:
            links.append((f"findings.csv row {row}", f"findings.csv#row={row + 1}"))  # RFC 7111: row 1 = header
        fig = _FIGURE_OF.get(f.worst.kind, "verdicts.png")
        if fig in files:
            links.append((fig, fig))
        where = f"under '{f.relation}'" if f.relation else f.context
        if f.other and f.kind.paired:
            where = f"{f.other} vs {f.context if f.kind == FindingKind.CONTEXT else f.device}"
        items.append({"f": f, "anchor": f"finding-{f.id}", "where": where, "size": size_lines(f),
                      "replay": f.replay(), "replay_note": _replay_note(f), "export": "\n".join(f.exports()),
                      "export_what": _export_what(f), "links": links,
                      "also": [s for s in f.subjects if s != f.subject]})
    return items


def headline_items(view: ReportView, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One card per headline: its lead finding's item shown in full, the other findings' items beneath."""
    by_id = {i["f"].id: i for i in items}
    return [{**by_id[h.lead.id], "h": h, "anchor": f"finding-{h.lead.id}",
             "rest": [by_id[f.id] for f in h.findings[1:]]}
            for h in view.headlines()]
