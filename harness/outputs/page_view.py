"""What the report's page and its Markdown twin show, built once: :class:`ReportView` and its verdict lines.

The gate line, the cells that hold and those not judged (with the cells' own reasons), the findings and their
headlines, one verdict line per finding class (:func:`finding_lines`); the renderer
(:mod:`harness.outputs.render`) only lays this out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import pandas as pd

from harness.core.classification import Verdict, fails_gate
from harness.judge.findings import Classification, Finding
from harness.judge.headlines import Headline, contexts_by_device, headlines

__all__ = ["Line", "ReportView", "report_view", "finding_lines", "run_files"]


#: A verdict line: what decides its colour (a verdict or a finding class), and its text.
Line = tuple[Verdict | Classification, str]


@dataclass(frozen=True)
class ReportView:
    """Everything the page and the Markdown summary show, built once (:func:`report_view`)."""

    held: int                                    # cells that ran and hold
    total: int                                   # every cell of the matrix (skipped ones included)
    not_judged: tuple[tuple[str, int, str], ...]  # (where, cells, why): cells not judged or not run, with reason
    findings: Sequence[Finding]                  # most severe first
    cells: pd.DataFrame                          # tables.cells_frame (CELL_COLUMNS)
    figures: Sequence[tuple[str, bytes]]         # (file name, PNG bytes)
    environment: pd.DataFrame                    # key / value
    run_dir: str
    files: Sequence[str] = ()                    # the run directory's files, relative paths
    lines: Sequence[Line] = field(default_factory=tuple)  # the verdict lines after the gate line
    notes: Sequence[str] = ()                    # infrastructure notes (TaskRecord.notes): never findings
    #: the model cases' trajectories between contexts (trajectory_files.summary_rows: SUMMARY_COLUMNS)
    trajectories: Sequence[dict[str, Any]] = ()

    @property
    def fails(self) -> bool:
        ran = self.cells[self.cells["verdict"] != "skipped"] if len(self.cells) else self.cells
        bad = ran["verdict"].map(fails_gate).any() if len(ran) else False
        return bool(bad) or any(f.fails for f in self.findings)

    def headlines(self) -> list[Headline]:
        """The findings by cause (one bug, one headline), "every context" meaning every one this run's cells
        have on that device."""
        pairs = zip(self.cells["device"], self.cells["context"]) if len(self.cells) else ()
        return headlines(self.findings, contexts_by_device(pairs))

    def gate_line(self) -> Line:
        """The gate verdict in one line: PASS or FAIL, how many cells hold, the findings that fail the gate,
        what was not judged and why."""
        ran = self.total - sum(n for _, n, _ in self.not_judged)
        text = f"{'FAIL' if self.fails else 'PASS'}: " + (f"all {ran} cells that ran hold" if self.held == ran
                                                          else f"{self.held} of {ran} cells that ran hold")
        failing: dict[str, int] = {}
        for h in self.headlines():
            if h.fails:
                failing[str(h.classification)] = failing.get(str(h.classification), 0) + 1
        if failing:
            text += "; the gate fails on " + ", ".join(f"{n} {c}" for c, n in failing.items())
        if self.not_judged:
            text += f"; {self.total - ran} of {self.total} not judged — " + "; ".join(
                f"{w}: {why}" if len(self.not_judged) == 1 else f"{w} ({n} cells): {why}"
                for w, n, why in self.not_judged)
        return (Verdict.BROKEN if self.fails else Verdict.BIT_IDENTICAL, text)


def _not_judged(cells: pd.DataFrame) -> tuple[tuple[str, int, str], ...]:
    if not len(cells):
        return ()
    out = []
    nj = cells[cells["verdict"].isin(["skipped", "not judged"])]
    for (device, verdict), g in nj.groupby(["device", "verdict"], sort=True):
        reasons = sorted({r for r in g["reason"] if r})  # never empty: every such measure says why
        out.append((f"{device} {'not run' if verdict == 'skipped' else 'not judged'}", len(g), "; ".join(reasons)))
    return tuple(out)


def report_view(run_dir: str, cells: pd.DataFrame, findings: Sequence[Finding],
                figures: Sequence[tuple[str, bytes]], environment: pd.DataFrame,
                files: Sequence[str] = (), lines: Sequence[Line] = (), notes: Sequence[str] = (),
                trajectories: Sequence[Any] = ()) -> ReportView:
    """The view of a run: the cells that hold and those not judged (with the cells' own reasons: a GPU that is
    missing says the reason the run recorded), the findings, the figures, the environment, the files, the model
    cases' trajectories and the infrastructure notes (a timeout beside other runs that answered alone: said,
    never a finding)."""
    from harness.outputs.trajectory_files import summary_rows

    nj = _not_judged(cells)
    held = 0
    if len(cells):
        ran = cells[~cells["verdict"].isin(["skipped", "not judged"])]
        held = int((~ran["verdict"].map(fails_gate).astype(bool)).sum())
    return ReportView(held=held, total=len(cells), not_judged=nj, findings=list(findings), cells=cells,
                      figures=list(figures), environment=environment, run_dir=run_dir,
                      files=sorted(files), notes=tuple(notes), trajectories=summary_rows(trajectories),
                      lines=tuple(lines) if lines else finding_lines(
                          headlines(findings, contexts_by_device(zip(cells["device"], cells["context"]))
                                    if len(cells) else None)))


def finding_lines(heads: Sequence[Headline], per_line: int = 3) -> tuple[Line, ...]:
    """One verdict line per finding class present, most severe first, coloured by the class: how many headline
    findings (:mod:`harness.judge.headlines`), and the first few (subject, device, what, where)."""
    out: list[Line] = []
    for cls in Classification:
        fs = [h for h in heads if h.classification == cls]
        if not fs:
            continue
        what = list(dict.fromkeys(f"{h.lead.subject} [{h.lead.device}] {h.what()} {h.where}" for h in fs))
        shown = "; ".join(what[:per_line]) + (f"; and {len(what) - per_line} more" if len(what) > per_line else "")
        out.append((cls, f"{len(fs)} {cls}: {shown}"))
    return tuple(out)


def run_files(run_dir: str) -> list[str]:
    """The files of a run directory, relative paths (what the page may link to)."""
    out = []
    for root, _dirs, names in os.walk(run_dir):
        for n in names:
            out.append(os.path.relpath(os.path.join(root, n), run_dir))
    return sorted(out)
