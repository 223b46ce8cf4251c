"""The report's files: a campaign in memory in, its tables, findings, figures and pages written into its directory.

:func:`write_report` builds every table once (:mod:`harness.outputs.results_table`, :mod:`harness.outputs.tables`),
has the figures drawn elsewhere meanwhile (:func:`start_figures`: a :class:`~harness.outputs.drawing.FigureServer`
or forked children) and writes each file atomically, the pages (:mod:`harness.outputs.render`) last.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import pandas as pd

from harness.core.cases import Case
from harness.core.forking import BEHIND, Forked
from harness.core.records import Measure
from harness.outputs.results_table import results_frame
from harness.outputs.tables import cells_frame, divergence_frame, findings_frame, oracle_errors_frame, summary_frame

if TYPE_CHECKING:
    from harness.outputs.drawing import FigureServer, Job

__all__ = ["write_report", "flatten_environment", "FIGURES", "figure_jobs", "draw_figures", "start_figures"]


def _atomic_write(path: str, data: str | bytes) -> str:
    """Write ``data`` to ``path`` atomically (see :mod:`harness.core.fileio`)."""
    from harness.core.fileio import atomic_write

    return atomic_write(path, data)


def flatten_environment(env: Mapping[str, Any]) -> pd.DataFrame:
    """A nested environment dict as a two-column ``key`` / ``value`` frame (dotted keys)."""
    from harness.core.env import flatten_fingerprint

    items = [(k, v if isinstance(v, str) else json.dumps(v, default=str))
             for k, v in flatten_fingerprint(dict(env)).items()]
    return pd.DataFrame(items, columns=["key", "value"])


def write_report(run: Any, *, environment: Mapping[str, Any], found: Sequence[Any] = (),
                 frames: dict[str, Any] | None = None, meanwhile: Any = None,
                 figures: FigureServer | None = None) -> dict[str, str]:
    """Write the report files of a campaign (a :class:`~harness.execute.driver.CampaignRun`, in memory) into its
    directory, each atomically; returns {file name: path}.

    Files: ``results.csv.gz`` (and ``results.parquet`` where pyarrow is importable), ``summary.csv``,
    ``cells.csv`` (the verdict matrix), ``findings.csv`` and ``findings.json`` (``found``: the
    :class:`~harness.judge.findings.Finding` records), ``summary.md``, ``summary.html``, ``environment.json``,
    the plots. Everything comes from the run's records, measures and cases and the findings; nothing is read
    back or measured here. ``frames`` (a dict) receives the frames built. ``meanwhile`` (a callable) is the
    caller's own work on the directory (compressing its logs, pruning arrays), done here while the figures are
    drawn and before the page lists the directory's files, so the page links the files as they will stay.
    ``figures``: a :class:`~harness.outputs.drawing.FigureServer` started before the campaign, which draws the
    figures (:func:`start_figures`).
    """
    from harness.judge.findings import dumps

    campaign_dir, measures = run.directory, list(run.measures)
    cells = cells_frame(measures)
    # The figures (about a second of matplotlib) are drawn elsewhere while this process builds the tables (the
    # same bytes as drawn here).
    trajectories = list(getattr(run, "trajectories", ()))
    drawing = start_figures(cells, measures, run.cases, server=figures, trajectories=trajectories)
    results = results_frame(run)
    summary = summary_frame(results)
    findings = findings_frame(found)
    _atomic_write(os.path.join(campaign_dir, "findings.json"), dumps(list(found)))
    env_table = flatten_environment(environment)
    out: dict[str, str] = {}

    def put(name: str, data: str | bytes) -> None:
        out[name] = _atomic_write(os.path.join(campaign_dir, name), data)

    # One row per tensor (tens of thousands): stored gzip-compressed; pandas, DuckDB and R read it as it is.
    put("results.csv.gz", _gzip_csv(results))
    if importlib.util.find_spec("pyarrow") is not None:
        buf = io.BytesIO()
        results.to_parquet(buf, index=False)
        put("results.parquet", buf.getvalue())
    put("summary.csv", summary.to_csv(index=False))
    put("cells.csv", cells.to_csv(index=False))
    put("findings.csv", findings.to_csv(index=False))
    if trajectories:  # every step of every compared pair and its baseline
        from harness.judge.trajectory import TABLE_COLUMNS
        from harness.outputs.trajectory_files import step_rows

        put("trajectories.csv", pd.DataFrame(step_rows(trajectories), columns=list(TABLE_COLUMNS)).to_csv(index=False))
    put("environment.json", json.dumps(dict(environment), indent=1, sort_keys=True, default=str) + "\n")
    from harness.outputs import render
    from harness.outputs.page_view import report_view, run_files

    if meanwhile is not None:
        meanwhile()
    drawn = drawing()
    for name, data in drawn:
        put(name, data)
    files = sorted({*run_files(campaign_dir), "summary.html", "summary.md"})
    notes = [n for rec in run.records.values() for n in rec.notes]
    view = report_view(os.path.abspath(campaign_dir), cells, list(found), drawn, env_table, files=files, notes=notes,
                       trajectories=trajectories)
    put("summary.md", render.summary_md(view))
    put("summary.html", render.summary_html(view))
    # the terminal's verdict: the page's gate line and verdict lines, word for word
    headline = [view.gate_line()[1], *(text for _, text in view.lines)]
    if frames is not None:  # what the caller prints at the end, without building the tables again
        frames.update(results=results, summary=summary, cells=cells, findings=findings, headline=headline,
                      found=list(found))
    return out


#: The report's figures, in the order the page shows them.
FIGURES = ("verdicts.png", "divergence.png", "error_vs_size.png")


def figure_jobs(cells: pd.DataFrame, measures: Sequence[Measure], cases: Mapping[str, Case],
                trajectories: Sequence[Any] = ()) -> list[Job]:
    """The report's figures as ``(file name, kind, arguments)`` (:data:`harness.outputs.drawing.DRAWERS`):
    their data frames, built here (a few milliseconds), so that whichever process draws them needs nothing
    else; the trajectory figure where ``trajectories`` compared a pair."""
    from harness.outputs.trajectory_files import figure_job

    trajectory = figure_job(trajectories)
    return [(FIGURES[0], "matrix", (cells,)),
            (FIGURES[1], "divergence", (divergence_frame(measures), cells)),
            (FIGURES[2], "error_ratio", (oracle_errors_frame(measures, cases),))] + ([trajectory] if trajectory else [])


def draw_figures(cells: pd.DataFrame, measures: Sequence[Measure], cases: Mapping[str, Case]
                 ) -> list[tuple[str, bytes]]:
    """The report's three figures, as ``(file name, PNG bytes)``."""
    from harness.outputs.drawing import draw_all

    return draw_all(figure_jobs(cells, measures, cases))


def start_figures(cells: pd.DataFrame, measures: Sequence[Measure], cases: Mapping[str, Case],
                  server: FigureServer | None = None, trajectories: Sequence[Any] = ()
                  ) -> Callable[[], list[tuple[str, bytes]]]:
    """:func:`draw_figures` started elsewhere; the returned callable waits for them. With a running
    ``server`` (:class:`~harness.outputs.drawing.FigureServer`, started before the campaign), there. Else in
    children forked from here (:class:`~harness.core.forking.Forked`): one per figure where this process has
    imported matplotlib already (:func:`harness.outputs.render.preload`), so they draw at once, side by side;
    otherwise one for all three, as each would import matplotlib again. Wherever that fails, here."""
    from harness.outputs.drawing import draw_all, draw_forked
    from harness.outputs.figures import preloaded

    jobs = figure_jobs(cells, measures, cases, trajectories)
    if server is not None and server.running:
        waiting = server.draw(jobs)
        return lambda: waiting() or draw_all(jobs)
    if not preloaded():
        child = Forked(lambda: draw_all(jobs)).start()
        return child.result
    # below this process's priority: the tables and the directory's tidying here are the longer path at a
    # report's size; the children take the cores that leaves (all, once it waits)
    return draw_forked(jobs, nice=BEHIND)


def _gzip_csv(df: pd.DataFrame) -> bytes:
    import gzip

    return gzip.compress(df.to_csv(index=False).encode("utf-8"), compresslevel=6, mtime=0)
