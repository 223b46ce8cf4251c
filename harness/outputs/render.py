"""What a person reads: the report's page, its Markdown twin, the terminal summary and the figures.

Pure: frames from :mod:`harness.outputs.tables` in, strings and PNG bytes out (the caller writes them). The page
opens with the verdict (one line per verdict), then the verdict matrix (subject x device, context and
relation, each cell coloured by its verdict with its worst ULP distance), the findings grouped one row per
subject x device x context x case, the figures, and the environment folded away. Every value written into
HTML is escaped; every Markdown cell has its ``|`` escaped and its newlines replaced.
"""

from __future__ import annotations

import base64
import html
import io
import os
import re
import shutil
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["VERDICT_COLOURS", "matrix_frame", "summary_html", "summary_md", "terminal_matrix", "plot_divergence",
           "plot_error_ratio", "plot_matrix", "plot_text", "prune_reports", "FINISHED", "invariance_frame", "SHOWN_FINDINGS"]

#: One colour per verdict (the Okabe-Ito palette, readable with the common colour-vision deficiencies).
VERDICT_COLOURS = {
    "bit-identical": "#cfe8d8",        # bluish green, light
    "within tolerance": "#e3f1f9",     # sky blue, light
    "expected error": "#eeeeee",
    "diverged as allowed": "#fbe3b4",  # orange, light
    "skipped": "#f6f6f6",
    "error": "#f3c6a5",                # vermillion, lighter
    "broken": "#e69f9f",               # vermillion
}
_MARK = {"bit-identical": "=", "within tolerance": "≈", "expected error": "raises", "diverged as allowed": "≠",
         "skipped": "–", "error": "error", "broken": "BROKEN"}

#: The findings table on the page shows this many rows (findings.csv has them all).
SHOWN_FINDINGS = 30


def _ulp_text(v: Any) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return ""
    v = int(v)
    if v >= 2**64 - 1:
        return "NaN"
    for unit, scale in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if v >= scale:
            return f"{v / scale:.3g}{unit}"
    return str(v)


def matrix_frame(cells: pd.DataFrame) -> pd.DataFrame:
    """The verdict matrix as a frame of cell texts: one row per subject (role order: subjects, controls,
    oracles), one column per ``device context`` or ``device relation``; a device whose every cell was skipped
    is left out (the headline says why)."""
    if not len(cells):
        return pd.DataFrame()
    ran_devices = set(cells.loc[cells["verdict"] != "skipped", "device"])
    c = cells[cells["device"].isin(ran_devices)].copy()
    c["column"] = [f"{d} {r if r else ctx}" for d, ctx, r in zip(c["device"], c["context"], c["relation"])]
    c["text"] = [f"{_MARK.get(v, v)} {_ulp_text(u)}".strip() for v, u in zip(c["verdict"], c["worst_ulp"])]
    order = {"subject": 0, "control": 1, "oracle": 2}
    subjects = sorted(set(c["subject"]), key=lambda s: (order.get(dict(zip(c["subject"], c["role"]))[s], 3), s))
    # per device: the default context, the other contexts, then the relations
    rank = {col: (d, bool(r), ctx != "default", col) for col, d, ctx, r in
            zip(c["column"], c["device"], c["context"], c["relation"])}
    columns = sorted(set(c["column"]), key=lambda col: rank[col])
    text = c.pivot_table(index="subject", columns="column", values="text", aggfunc="first")
    return text.reindex(index=subjects, columns=columns).fillna("")


def _verdicts(cells: pd.DataFrame) -> pd.DataFrame:
    ran_devices = set(cells.loc[cells["verdict"] != "skipped", "device"])
    c = cells[cells["device"].isin(ran_devices)].copy()
    c["column"] = [f"{d} {r if r else ctx}" for d, ctx, r in zip(c["device"], c["context"], c["relation"])]
    return c.pivot_table(index="subject", columns="column", values="verdict", aggfunc="first")


def _matrix_html(cells: pd.DataFrame) -> str:
    text = matrix_frame(cells)
    if not len(text):
        return "<p><em>nothing ran</em></p>"
    verdict = _verdicts(cells).reindex(index=text.index, columns=text.columns)
    text.columns.name = None
    styles = verdict.map(lambda v: f"background-color: {VERDICT_COLOURS.get(v, '#ffffff')}" if isinstance(v, str)
                         else "")
    sty = (text.style.apply(lambda _: styles, axis=None).set_table_attributes('class="matrix"')
           .format(escape="html").format_index(escape="html", axis=0).format_index(escape="html", axis=1))
    sty.index.name = None
    return sty.to_html()


def invariance_frame(cells: pd.DataFrame) -> pd.DataFrame:
    """Per subject x device x relation: tensors compared, the share bit-identical, the worst ULP distance."""
    rel = cells[(cells["relation"] != "") & (cells["verdict"] != "skipped")] if len(cells) else cells
    if not len(rel):
        return pd.DataFrame(columns=["subject", "device", "relation", "verdict", "tensors", "bit-identical", "worst ULP"])
    return pd.DataFrame({
        "subject": rel["subject"], "device": rel["device"], "relation": rel["relation"], "verdict": rel["verdict"],
        "tensors": rel["tensors"],
        "bit-identical": [f"{1 - d / n:.0%}" if n else "" for d, n in zip(rel["tensors_differing"], rel["tensors"])],
        "worst ULP": [_ulp_text(u) or "0" for u in rel["worst_ulp"]]}).reset_index(drop=True)


def _legend() -> str:
    items = "".join(f'<span class="key" style="background:{c}">{html.escape(_MARK[v])} {html.escape(v)}</span>'
                    for v, c in VERDICT_COLOURS.items())
    return f'<p class="legend">{items} — the number is the worst ULP distance of the cell.</p>'


def _table_html(df: pd.DataFrame, colour_col: str | None = None, code: Sequence[str] = ()) -> str:
    if not len(df):
        return "<p><em>none</em></p>"
    shown = df.copy()
    out = ['<div class="scroll"><table class="report"><thead><tr>']
    out += [f"<th>{html.escape(str(c))}</th>" for c in shown.columns]
    out.append("</tr></thead><tbody>")
    for _, row in shown.iterrows():
        style = ""
        if colour_col is not None:
            style = f' style="background:{VERDICT_COLOURS.get(str(row[colour_col]), "#fff")}"'
        out.append(f"<tr{style}>")
        for c in shown.columns:
            v = row[c]
            v = "" if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else str(v)
            cell = html.escape(v)
            out.append(f"<td><code>{cell}</code></td>" if c in code and v else f"<td>{cell}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.2em auto; max-width: 1360px; padding: 0 12px; color: #222; }
h1 { font-size: 1.5em; margin: 0.2em 0 0.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
ul.verdict { list-style: none; padding: 0; margin: 0 0 1em; }
ul.verdict li { padding: 6px 10px; margin: 3px 0; border-radius: 4px; font-size: 14px; }
table.matrix { border-collapse: collapse; font-size: 12px; }
table.matrix th, table.matrix td { border: 1px solid #ccc; padding: 3px 6px; white-space: nowrap; }
table.matrix th.col_heading { writing-mode: vertical-rl; transform: rotate(180deg); max-height: 9em; }
.scroll { max-width: 100%; overflow-x: auto; }
table.report { border-collapse: collapse; font-size: 12px; width: 100%; table-layout: auto; }
table.report th, table.report td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top;
  overflow-wrap: anywhere; }
table.report th { background: #f0f0f0; }
code { font-size: 11px; overflow-wrap: anywhere; }
.legend .key { display: inline-block; padding: 1px 6px; margin: 2px 4px 2px 0; border-radius: 3px; font-size: 12px; }
img { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
details { margin-top: 1em; }
"""

def _line_colour(line: str) -> str:
    """A headline line's colour by what it says (the lines are made by tables.verdict_lines)."""
    if "contract(s) broken" in line:
        return VERDICT_COLOURS["broken"]
    if "with errors" in line:
        return VERDICT_COLOURS["error"]
    if line.startswith("finding"):
        return VERDICT_COLOURS["diverged as allowed"]
    if line.startswith("all contracts hold"):
        return VERDICT_COLOURS["bit-identical"]
    return "#f4f4f4"


def summary_html(headline: Sequence[str], cells: pd.DataFrame, findings: pd.DataFrame, figures: Sequence[tuple[str, bytes]],
                 environment: pd.DataFrame, campaign_dir: str) -> str:
    """The report's page (see the module docstring)."""
    lines = "".join(f'<li style="background:{_line_colour(l)}">{html.escape(l)}</li>' for l in headline)
    shown = _findings_for_reading(findings.head(SHOWN_FINDINGS)) if len(findings) else findings
    more = (f"<p>{len(findings) - SHOWN_FINDINGS} more in <code>findings.csv</code>.</p>"
            if len(findings) > SHOWN_FINDINGS else "")
    figs = "".join(f'<h3>{html.escape(name)}</h3><img alt="{html.escape(name)}" '
                   f'src="data:image/png;base64,{base64.b64encode(data).decode()}">' for name, data in figures)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Reproducibility report</title><style>{_CSS}</style></head><body>
<h1>Reproducibility report</h1>
<ul class="verdict" id="verdict">{lines}</ul>
<h2 id="matrix">Verdicts: subject x device, context and invariance relation</h2>
{_legend()}
<div class="scroll">{_matrix_html(cells)}</div>
<h2>Invariance: per subject x device x relation</h2>
{_table_html(invariance_frame(cells), "verdict")}
<h2>Findings ({len(findings)})</h2>
{_table_html(shown, None, code=("replay",))}{more}
<h2>Figures</h2>{figs}
<details><summary>Environment (run directory {html.escape(campaign_dir)})</summary>
{_table_html(environment)}</details>
</body></html>
"""


def _findings_for_reading(f: pd.DataFrame) -> pd.DataFrame:
    """The findings with their place in one column and the worst tensor with its ULP: fewer, wider columns."""
    def where(r: Any) -> str:
        w = f"{r.device} {r.context}"
        if r.kind == "cross-context difference":
            w = f"{r.device} {r.other} vs {r.context}"
        elif r.kind == "cross-device difference":
            w = f"{r.other} vs {r.device}, {r.context}"
        elif r.relation:
            w = f"{r.device} under {r.relation}"
        return w

    def worst(r: Any) -> str:
        if not r.worst_tensor:
            return ""
        ulp = _ulp_text(r.worst_ulp)
        return (f"{r.worst_tensor}" + (f" ({ulp} ULP)" if ulp else "")
                + f", {r.tensors_differing} tensor(s) in {r.n_cases} case(s)")

    return pd.DataFrame({"class": f["classification"], "finding": f["kind"], "subject": f["subjects"],
                         "where": [where(r) for r in f.itertuples()],
                         "case": [c + (f" (minimal {m})" if m else "") for c, m in zip(f["case_id"], f["minimal_case"])],
                         "worst": [worst(r) for r in f.itertuples()], "root cause": f["root_cause"],
                         "replay": f["replay"]})


def _md_cell(v: Any) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return ""
    return str(v).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _md_table(df: pd.DataFrame, index: bool = False) -> str:
    if not len(df):
        return "_none_"
    cols = ([df.index.name or ""] if index else []) + [str(c) for c in df.columns]
    rows = ["| " + " | ".join(_md_cell(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for i, (_, r) in enumerate(df.iterrows()):
        vals = ([df.index[i]] if index else []) + list(r)
        rows.append("| " + " | ".join(_md_cell(v) for v in vals) + " |")
    return "\n".join(rows)


def summary_md(headline: Sequence[str], cells: pd.DataFrame, findings: pd.DataFrame,
               figures: Sequence[str], environment: pd.DataFrame | None = None) -> str:
    """The same verdict and matrix in Markdown, the findings (first :data:`SHOWN_FINDINGS`), the figures."""
    shown = _findings_for_reading(findings.head(SHOWN_FINDINGS)) if len(findings) else findings
    if len(shown):
        shown["replay"] = shown["replay"].map(lambda s: f"`{s}`" if s else s)
    matrix = matrix_frame(cells)
    if len(matrix):
        matrix.index.name = "subject"
    parts = ["# Reproducibility report", "\n".join(f"- {_md_cell(l)}" for l in headline),
             "## Verdicts", "`=` bit-identical, `≈` within tolerance, `≠` diverged as allowed, `BROKEN`, `error`, "
             "`raises` (expected error), `–` skipped; the number is the worst ULP distance.",
             _md_table(matrix, index=True), "## Invariance", _md_table(invariance_frame(cells)),
             f"## Findings ({len(findings)})", _md_table(shown)]
    if len(findings) > SHOWN_FINDINGS:
        parts.append(f"{len(findings) - SHOWN_FINDINGS} more in `findings.csv`.")
    parts += ["## Figures", *(f"![{n}]({n})" for n in figures)]
    if environment is not None:
        parts += ["## Environment", _md_table(environment)]
    return "\n\n".join(parts) + "\n"


def terminal_matrix(cells: pd.DataFrame, width: int = 100) -> str:
    """The verdict matrix for a terminal: one line per subject, cells cut to fit ``width``."""
    m = matrix_frame(cells)
    if not len(m):
        return ""
    name_w = max(len(s) for s in m.index)
    cell_w = max(7, min(10, (width - name_w - 2) // max(len(m.columns), 1)))
    devices = {c.split(" ", 1)[0] for c in m.columns}
    labels = [c.split(" ", 1)[1] if len(devices) == 1 else c for c in m.columns]
    head = " " * (name_w + 2) + "".join(lab[:cell_w - 1].rjust(cell_w) for lab in labels)
    body = [s.ljust(name_w + 2) + "".join(str(v)[:cell_w - 1].rjust(cell_w) for v in row) for s, row in m.iterrows()]
    return "\n".join([head, *body])


# ---------------------------------------------------------------------------------------------- figures


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def plot_text(value: Any) -> str:
    """A name or label as matplotlib must show it: literally. Matplotlib reads text between two ``$`` as
    mathtext (and with ``usetex``, all of it as TeX), so a subject named ``adv.$\\foo{$`` made every figure
    raise; each ``$`` escaped, nothing is parsed. The one escaping for figures (the page and Markdown have
    theirs)."""
    return str(value).replace("$", r"\$")


def _png(fig: Any) -> bytes:
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"text.usetex": False}):  # a user's matplotlibrc must not hand names to TeX
        fig.savefig(buf, format="png")
    return buf.getvalue()


def plot_divergence(divergence: pd.DataFrame) -> bytes:
    """A heatmap of the worst ULP distance per subject x axis (repeat, process, context, device, relation),
    log scale, every cell annotated ("=" where every comparison was bit-identical); about 1200 x 500 px."""
    axes_order = ["repeat", "process", "context", "device", "baseline", "relation"]
    subjects = sorted(set(divergence["subject"])) if len(divergence) else []
    axes = [a for a in axes_order if len(divergence) and a in set(divergence["axis"])]
    fig = _figure(12, max(3.0, 0.32 * len(subjects) + 1.6))
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title("Worst ULP distance per subject and axis of comparison (= : always bit-identical)")
    if not subjects:
        ax.text(0.5, 0.5, "nothing was compared", ha="center", va="center", transform=ax.transAxes)
        return _png(fig)
    grid = np.full((len(subjects), len(axes)), np.nan)
    for r in divergence.itertuples():
        grid[subjects.index(r.subject), axes.index(r.axis)] = float(r.worst_ulp)
    shown = np.log10(1 + np.where(grid >= 2**64 - 1, 1e20, grid))
    im = ax.imshow(np.ma.masked_invalid(shown), aspect="auto", cmap="YlOrRd", vmin=0, vmax=max(6.0, np.nanmax(shown)))
    for i in range(len(subjects)):
        for j in range(len(axes)):
            v = grid[i, j]
            if np.isnan(v):
                continue
            ax.text(j, i, "=" if v == 0 else _ulp_text(v), ha="center", va="center", fontsize=9,
                    color="white" if shown[i, j] > 4 else "black")
    ax.set_xticks(range(len(axes)), [plot_text(a) for a in axes], fontsize=10)
    ax.set_yticks(range(len(subjects)), [plot_text(n) for n in subjects], fontsize=9)
    fig.colorbar(im, ax=ax, label="log10(1 + ULP)")
    fig.tight_layout()
    return _png(fig)


def plot_matrix(cells: pd.DataFrame) -> bytes:
    """The verdict matrix as a figure: one row per subject, one column per device x context or relation, each
    cell in its verdict's colour with its mark and worst ULP; width follows the columns (at most ~1300 px)."""
    from matplotlib.colors import ListedColormap

    text = matrix_frame(cells)
    names = list(VERDICT_COLOURS)
    rows, cols = (list(text.index), list(text.columns)) if len(text) else ([], [])
    fig = _figure(min(13.0, 2.2 + 0.9 * max(len(cols), 1)), max(2.5, 0.3 * len(rows) + 2.2))
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title("Verdict per subject x device, context and relation (the number: worst ULP)", fontsize=11)
    if not rows:
        ax.text(0.5, 0.5, "nothing ran", ha="center", va="center", transform=ax.transAxes)
        return _png(fig)
    verdict = _verdicts(cells).reindex(index=rows, columns=cols)
    codes = verdict.map(lambda v: names.index(v) if isinstance(v, str) and v in names else np.nan).to_numpy(float)
    ax.imshow(np.ma.masked_invalid(codes), aspect="auto", cmap=ListedColormap([VERDICT_COLOURS[n] for n in names]),
              vmin=-0.5, vmax=len(names) - 0.5)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax.text(j, i, plot_text(text.loc[r, c]), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(cols)), [plot_text(c) for c in cols], rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), [plot_text(r) for r in rows], fontsize=8)
    fig.tight_layout()
    return _png(fig)


def plot_error_ratio(oracle_errors: pd.DataFrame) -> bytes:
    """Error / allowed against the float64 oracle by input size, log-log, one colour per subject family
    prefix, with the tolerance line at 1; about 1200 x 500 px."""
    fig = _figure(12, 5)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xlabel("case size (elements)")
    ax.set_ylabel("error / allowed (1 = at the tolerance)")
    ax.set_title("Error against the float64 oracle, by input size (every tensor of every run)")
    t = oracle_errors.dropna(subset=["error_ratio", "case_size"]) if len(oracle_errors) else oracle_errors
    if not len(t):
        ax.text(0.5, 0.5, "no result was compared with an oracle", ha="center", va="center", transform=ax.transAxes)
        return _png(fig)
    floor = 1e-6
    ax.set_xscale("log")
    ax.set_yscale("log")
    groups = t.groupby(t["subject"].str.split(".").str[0], sort=True)
    for i, (prefix, g) in enumerate(groups):
        q = g["error_ratio"].to_numpy(dtype=float)
        size = g["case_size"].to_numpy(dtype=float)
        ax.scatter(np.maximum(size, 1), np.clip(q, floor, None), s=10, alpha=0.5, color=f"C{i}", label=plot_text(prefix))
    ax.axhline(1.0, color="#d55e00", lw=1.5, ls="--", label="tolerance")
    ax.legend(fontsize=9, loc="lower right", title=f"subjects (exact = {floor:g})", title_fontsize=9)
    fig.tight_layout()
    return _png(fig)


# ---------------------------------------------------------------------------------------------- retention

_RUN_DIR = re.compile(r"^\d{8}T\d{6}Z-\d+$")


def prune_reports(base: str = "reports", keep: int = 10) -> list[str]:
    """Delete the oldest run directories of ``base`` beyond the newest ``keep`` (run directories only: names
    like ``20261202T215718Z-1234``; never ``README.md``, ``baselines/``, ``latest`` or what it points to).

    Only finished, idle runs go: a directory without its finished marker (:data:`FINISHED`, written last by a
    report) or whose ``.lock`` another process holds (a report running, or being resumed, now) is kept, and
    the lock is held while it is deleted so that no run can start writing into it meanwhile. Returns what
    was deleted."""
    if keep < 0:
        from harness.core.errors import InvalidArgument

        raise InvalidArgument(f"keep={keep} must be >= 0")
    if not os.path.isdir(base):
        return []
    latest = os.path.realpath(os.path.join(base, "latest"))
    runs = sorted(n for n in os.listdir(base) if _RUN_DIR.match(n) and os.path.isdir(os.path.join(base, n))
                  and not os.path.islink(os.path.join(base, n)))
    finished = [n for n in runs if os.path.exists(os.path.join(base, n, FINISHED))]
    doomed = [n for n in finished[:max(len(finished) - keep, 0)]
              if os.path.realpath(os.path.join(base, n)) != latest]
    gone = []
    for n in doomed:
        if _remove_if_idle(os.path.join(base, n)):
            gone.append(n)
    return gone


#: The file a report writes last into its run directory: a directory without it is not finished (running,
#: interrupted, or being resumed) and is never pruned.
FINISHED = "timings.json"


def _remove_if_idle(path: str) -> bool:
    """Delete ``path`` only while holding its ``.lock`` (non-blocking): a run holding it is left alone."""
    import fcntl

    lock = os.path.join(path, ".lock")
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        fd = None  # a run that never locked (an old report): nothing can be writing into it through the lock
    except OSError:
        return False
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # in use
            if not os.path.exists(os.path.join(path, FINISHED)):
                return False  # a resume took it and removed the marker before we locked
        shutil.rmtree(path)
        return True
    finally:
        if fd is not None:
            os.close(fd)
