"""The report as a person reads it: the gate verdict first, then the findings by severity with their values,
cause and reproducer; every number with its meaning; escaped values in both formats (one escaping function per
format, shared with the audit); links that resolve inside the run directory; in a real headless Chromium the
verdict comes before the findings and no table cell breaks inside a word; figures with keys; the terminal
matrix; retention of old run directories; the run's infrastructure notes (a busy machine) apart from the
findings."""

from __future__ import annotations

import dataclasses
import html
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pandas as pd
import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.core.records import Measure, Verdict
from harness.execute.campaign import CampaignOptions
from harness.execute.driver import run_campaign
from harness.execute.relations import RELATIONS
from harness.generate.corpora import relation_cases
from harness.judge.finding_groups import group
from harness.judge.findings import Classification, Origin, with_cause
from harness.judge.reproducer import export_path
from harness.outputs import (
    figures,
    matrix,
    page_view,
    palette,
    render,
    report_files,
    retention,
    screenshot,
    tables,
    terminal,
)
from harness.outputs.assemble import campaign_findings
from harness.subjects.registry import subjects_for

ROOT = Path(__file__).resolve().parents[3]
COLLIDE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [400], "id_kind": "collision", "distinct": 2})
CHROMIUM = pytest.mark.skipif(screenshot.find_chromium() is None,
                              reason="no chromium here (Debian: apt-get install chromium; .ci/run installs it)")


# ------------------------------------------------------------------------------------------- a hand-made view

def _cells(rows):
    base = {"role": "subject", "device": "cpu", "context": "default", "relation": "", "verdict": "bit-identical",
            "worst_ulp": None, "tensors": 4, "tensors_differing": 0, "error_ratio": None, "allowed": "", "contract": "",
            "reason": ""}
    full = [{**base, **r} for r in rows]
    df = pd.DataFrame(full, columns=list(tables.CELL_COLUMNS))
    df["worst_ulp"] = pd.array([r["worst_ulp"] for r in full], dtype="UInt64")
    df["error_ratio"] = pd.to_numeric(df["error_ratio"]).astype("float64")
    return df


def _measures():
    ctx = dict(case_id="c0ffee12", device="cpu", context="blas1", dtype="float32", shape=(4, 8))
    return [
        Measure(kind="context", subject="chainer.NStepLSTM", tensor="grad.ws.0.1", other="default", identical=False,
                n_diff=7, n_total=32, max_ulp=2_100_000, max_ulp_index=(1, 2), actual="-5.93e-06 (0xb6c6f5a0)",
                expected="-4.98e-06 (0xb6a71c2e)", verdict="diverged as allowed",
                rule="may differ across contexts", contract="NStepLSTM: contexts may differ", **ctx),
        Measure(kind="repeat", subject="plug.<script>x|y$z_", tensor="y", identical=False, n_diff=1, n_total=32,
                max_ulp=3, max_ulp_index=(0, 0), actual="1.0000004 (0x3f800003)", expected="1.0 (0x3f800000)",
                verdict="broken", rule="reproducible: bit-identical run to run in one process",
                contract="bit-identical | always", **{**ctx, "context": "default"}),
        Measure(kind="repeat", subject="control.nondeterministic", tensor="grad.W", identical=False, n_diff=2,
                n_total=12, max_ulp=16, max_ulp_index=(2, 1), actual="0.5 (0x3f000000)", expected="0.50000095",
                verdict="diverged as allowed", rule="a control that diverges by design",
                **{**ctx, "context": "default"}),
        Measure(kind="oracle", subject="chainer.embed_id", tensor="y", max_abs=3.2e-7, max_rel=2.0e-7,
                error_ratio=1.7, allowed="up to 1e-07 + 1e-06*|expected| allowed", within=False,
                actual="1.6 (0x3fcccccd)", expected="1.59999968", verdict="broken", rule="within oracle tolerance",
                **{**ctx, "context": "default"}),
    ]


def _findings(run_dir="/run"):
    found = group(_measures(), {}, Origin(run_dir), roles={"control.nondeterministic": "control"})
    return [with_cause(f, "LinearFunction (first input GEMM)") if "NStepLSTM" in f.subject else f for f in found]


def _view(files=(), findings=None, cells=None):
    cells = cells if cells is not None else _cells([
        {"subject": "chainer.NStepLSTM", "verdict": "diverged as allowed", "worst_ulp": 2_100_000,
         "tensors_differing": 1, "context": "blas1"},
        {"subject": "chainer.embed_id", "verdict": "within tolerance", "error_ratio": 0.31, "allowed": "1e-6"},
        {"subject": "oracle.lstm", "role": "oracle"},
        {"subject": "control.nondeterministic", "role": "control", "verdict": "diverged as allowed", "worst_ulp": 16},
        {"subject": "chainer.NStepLSTM", "relation": "subbatch", "verdict": "diverged as allowed", "worst_ulp": 5145},
        {"subject": "chainer.NStepLSTM", "relation": "duplicate", "verdict": "bit-identical"},
        {"subject": "plug.<script>x|y$z_", "verdict": "broken", "worst_ulp": 3, "tensors_differing": 1},
        {"subject": "chainer.NStepLSTM", "device": "gpu", "verdict": "skipped",
         "reason": "no GPU: nvidia-smi not found"},
    ])
    env = pd.DataFrame({"key": ["gpu.reason", "x"], "value": ["no GPU: nvidia-smi not found", "<i>|`"]})
    return page_view.report_view("/run", cells, _findings() if findings is None else findings, [], env, files=files)


def test_md_escape_escapes_pipes_html_backticks_and_newlines():
    assert render.md_escape("a|b <script>`x`\nc") == "a\\|b &lt;script&gt;\\`x\\` c"
    table = render.md_table(pd.DataFrame({"<b>": ["x|y\nz"]}))
    assert "<b>" not in table and "x\\|y z" in table and table.count("\n") == 2


def test_html_table_escapes_and_colours_by_value_not_text():
    df = pd.DataFrame({"verdict": ["broken", "changed"], "v": ["<b>x</b>", "-4.98e-06"]})
    out = render.html_table(df, colours={"verdict": "verdict"})
    assert "<b>x</b>" not in out and "&lt;b&gt;x&lt;/b&gt;" in out
    assert f'style="background:{palette.VERDICT_COLOURS["broken"]}"' in out and out.count("background:") == 1
    audit = render.html_table(df, colours={"verdict": "verdict"}, palette={"changed": "#123456"})
    assert 'style="background:#123456"' in audit and audit.count("background:") == 1


def test_the_report_and_the_audit_escape_markdown_with_the_same_function():
    from harness.outputs.audit import pages

    assert pages.md_text is render.md_escape and pages.md_table is render.md_table


def test_the_page_and_the_markdown_escape_every_value():
    v = _view()
    page, md = render.summary_html(v), render.summary_md(v)
    assert "plug.&lt;script&gt;x|y$z_" in page and "<script>x" not in page and "<i>|`" not in page
    assert "plug.&lt;script&gt;x\\|y$z\\_" in md or "plug.&lt;script&gt;x\\|y$z_" in md
    prose = re.sub(r"```sh\n.*?\n```", "", md, flags=re.S)  # a code block shows its text verbatim: no HTML there
    assert "<script>" not in prose and "<i>" not in prose
    # a Markdown table row keeps its column count whatever a value holds
    env_rows = [ln for ln in md.splitlines() if ln.startswith("| x ")]
    assert env_rows and env_rows[0].replace("\\|", "").count("|") == 3, env_rows


def test_the_gate_line_comes_first_then_findings_by_severity_controls_folded_last():
    v = _view()
    page = render.summary_html(v)
    gate, findings = page.index('class="gate"'), page.index('id="findings"')
    assert gate < findings < page.index('id="matrix"')
    assert re.search(r'class="gate"[^>]*>FAIL: 6 of 7 cells that ran hold; the gate fails on 2 contract broken; '
                     r'1 of 8 not judged — gpu not run: no GPU: nvidia-smi not found<', page), page[gate:gate + 400]
    classes = [Classification(c) for c in re.findall(r'<span class="badge"[^>]*>([^<]+)</span>', page)]
    assert classes == sorted(classes, key=lambda c: c.rank) and classes[-1] == Classification.CONTROL
    assert page.index('<details id="controls">') < page.rindex("control.nondeterministic")
    md = render.summary_md(v)
    assert md.index("**FAIL") < md.index("## Findings") < md.index("## Verdicts")


def test_each_finding_says_how_large_where_it_starts_and_how_to_reproduce():
    v = _view()
    page = _plain(render.summary_html(v))
    lstm = page[page.index("<b>chainer.NStepLSTM</b>"):]
    lstm = lstm[:lstm.index("</article>")]
    assert "-5.93e-06 against -4.98e-06" in lstm and "2,100,000 ULP" in lstm and "relative 0.191 (19.1%)" in lstm
    assert "LinearFunction (first input GEMM)" in lstm
    f = next(f for f in v.findings if f.subject == "chainer.NStepLSTM")
    cmd = re.search(r'<pre class="cmd"><code>(.*?)</code></pre>', lstm, re.S).group(1)
    assert cmd.replace("&#39;", "'") == f.replay() and "--contexts default,blas1" in cmd
    assert "white-space: pre; overflow-x: auto" in page
    oracle = page[page.index("<b>chainer.embed_id</b>"):]
    assert "error / allowed</th><td>1.7 (up to 1e-07" in oracle
    md = render.summary_md(v)
    assert f"```sh\n{f.replay()}\n```" in md


def test_verdict_lines_are_coloured_by_their_verdict_not_their_words():
    v = _view()
    page = render.summary_html(v)
    for cls, text in v.lines:
        assert isinstance(cls, Classification)
        li = re.search(r'<li style="background:([^"]+)">' + re.escape(text.split(":")[0]), page.replace("&lt;", "<")
                       .replace("&gt;", ">"))
        assert li and li.group(1) == palette.CLASS_COLOURS[cls], (cls, text)
    # the same words under another verdict get that verdict's colour
    odd = page_view.ReportView(**{**v.__dict__, "lines": ((Verdict.BIT_IDENTICAL, "contract(s) broken"),)})
    assert f'<li style="background:{palette.VERDICT_COLOURS["bit-identical"]}">contract(s) broken' in \
        render.summary_html(odd)


def test_a_missing_gpu_says_the_reason_the_run_recorded():
    v = _view()
    page, md = render.summary_html(v), render.summary_md(v)
    assert "not judged — gpu not run: no GPU: nvidia-smi not found" in page and "pip install" not in page
    assert "nvidia-smi not found" in md.split("## Findings")[0]


def test_matrix_cells_show_ulp_or_error_over_allowed_with_the_values_on_hover():
    v = _view()
    m = matrix.matrix_frame(v.cells)
    assert list(m.index) == matrix.subject_order(v.cells)
    assert list(m.index)[-2:] == ["control.nondeterministic", "oracle.lstm"]  # implementations first
    assert m.loc["chainer.embed_id", "cpu default"] == "≈0.31×"
    assert m.loc["chainer.NStepLSTM", "cpu blas1"] == "≠2.1M"
    assert "gpu default" not in m.columns  # every GPU cell skipped: the gate line says why
    page = render.summary_html(v)
    assert 'title="chainer.NStepLSTM [cpu] blas1: diverged as allowed; worst ULP distance 2,100,000' in page
    assert "How to read the numbers" in page and "float32 near 1: 1 ULP = 1.19e-07" in page


def test_the_terminal_matrix_abbreviates_long_headers_with_a_key():
    cells = _view().cells
    out = terminal.terminal_matrix(cells, width=60)
    head, *_rest, key = out.splitlines()
    assert key.startswith("key: ") and "= subbatch" in key and "= duplicate" in key
    for short in re.findall(r"(\S+) = ", key):
        assert short.endswith(".") and short in head
    wide = terminal.terminal_matrix(cells, width=200)
    assert "subbatch" in wide.splitlines()[0] and "duplicate" in wide.splitlines()[0] and "key:" not in wide


def test_the_terminal_matrix_of_two_devices_names_each_column_once_and_never_two_alike():
    # A GPU report's columns (the H200's had 19): default, debug and duplicate all start with "d", on both devices.
    ctxs = ["default", "debug", "duplicate", "dupe_other", "order"]
    cells = _cells([{"subject": "chainer.embed_id", "device": d, "context": c, "verdict": "bit-identical"}
                    for d in ("cpu", "gpu:0") for c in ctxs])
    out = terminal.terminal_matrix(cells, width=50)
    devices, head, row, key = out.splitlines()
    assert devices.split() == ["cpu"] * 5 + ["gpu:0"] * 5
    cols = head.split()
    assert len(cols) == 10 and cols[:5] == cols[5:]  # one label, one abbreviation, on either device
    assert len(set(cols[:5])) == 5, cols  # "dupl." twice would say nothing
    spelled = dict(re.findall(r"(\S+) = ([^,]+)", key.removeprefix("key: ")))
    assert {spelled.get(c, c) for c in cols[:5]} == set(ctxs)
    assert row.split()[0] == "chainer.embed_id" and row.split()[1:] == ["="] * 10


def test_figures_have_keys_one_subject_order_and_survive_tex_specials():
    cells = _cells([{"subject": "zz.impl", "device": "cpu"}, {"subject": "a.$x_^{", "device": "cpu",
                                                                "role": "control", "verdict": "diverged as allowed",
                                                                "worst_ulp": 3}])
    div = pd.DataFrame({"subject": ["a.$x_^{", "zz.impl"], "axis": ["repeat", "repeat"], "worst_ulp": [3, 0],
                        "share_identical": [0.5, 1.0], "compared": [2, 2]})
    for png in (figures.plot_matrix(cells), figures.plot_divergence(div, cells),
                figures.plot_error_ratio(pd.DataFrame({"subject": ["a.$x_^{"], "case_size": [10], "error_ratio": [0.5],
                                                      "device": ["cpu"], "context": ["default"], "case_id": ["c"],
                                                      "tensor": ["y"], "max_abs": [1e-7]}))):
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert matrix.subject_order(cells) == ["zz.impl", "a.$x_^{"]


def test_a_figure_is_drawn_once_and_its_png_is_what_savefig_alone_writes(monkeypatch):
    # After tight_layout(), matplotlib's savefig drew every figure twice (a placeholder layout engine is left
    # behind): _png drops the engine, and the bytes stay those of savefig left to itself.
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    draws = []
    real = FigureCanvasAgg.draw
    monkeypatch.setattr(FigureCanvasAgg, "draw", lambda self: (draws.append(1), real(self))[1])

    def figure():
        fig = figures._figure(6, 3)
        ax = fig.add_subplot(1, 1, 1)
        ax.set_yscale("log")
        ax.plot([1.0, 10.0], [1.0, 100.0], label="a.$x_^{")
        ax.set_title("once", parse_math=False)
        fig.tight_layout()
        return fig

    png = figures._png(figure())
    assert len(draws) == 1
    draws.clear()
    buf = io.BytesIO()
    figure().savefig(buf, format="png")
    assert len(draws) == 2  # the draw _png saves: it is matplotlib's, not this test's
    assert png == figures._palette_png(buf.getvalue())


def test_a_figure_is_kept_as_a_palette_png_that_looks_like_savefigs_and_is_smaller():
    import io

    from PIL import Image

    fig = figures._figure(8, 4)
    ax = fig.add_subplot(1, 1, 1)
    for k in range(6):
        ax.plot(np.arange(50), np.sin(np.arange(50) / (k + 2)), label=f"line {k}")
    ax.legend()
    ax.set_title("antialiased lines and text")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    rgba = buf.getvalue()
    small = figures._palette_png(rgba)
    with Image.open(io.BytesIO(rgba)) as a, Image.open(io.BytesIO(small)) as b:
        assert b.mode == "P" and a.size == b.size
        diff = np.abs(np.asarray(a.convert("RGB"), dtype=np.int16) - np.asarray(b.convert("RGB"), dtype=np.int16))
    assert diff.mean() < 1.0 and np.quantile(diff, 0.999) <= 32  # what a reader sees is the same picture
    assert len(small) < 0.7 * len(rgba)


@pytest.mark.parametrize("ratios", [[0.0, 1e-3, 0.9], [1e-12, 1.0, 1e30], [5e-7, 2.0, float("inf")]])
def test_the_error_figure_keeps_every_label_inside_its_canvas(ratios):
    # its margins are fixed (no tight_layout): the widest tick labels the data can bring must still fit
    sizes = [1, 1e4, 1e9]
    fig = figures.error_ratio_figure(pd.DataFrame({"subject": ["chainer.a", "espnet.b", "pipeline.c"],
                                                  "case_size": sizes, "error_ratio": ratios}))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.get_legend().get_texts(),
             *(t for t in [*ax.get_xticklabels(), *ax.get_yticklabels()] if t.get_visible() and t.get_text())]
    width, height = fig.canvas.get_width_height()
    checked = 0
    for t in texts:
        box = t.get_window_extent(renderer)
        if t in ax.get_xticklabels() and not ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]:
            continue  # a tick the axis does not show
        if t in ax.get_yticklabels() and not ax.get_ylim()[0] <= t.get_position()[1] <= ax.get_ylim()[1]:
            continue
        assert 0 <= box.x0 and box.x1 <= width and 0 <= box.y0 and box.y1 <= height, (t.get_text(), box)
        checked += 1
    assert checked >= 10  # title, two labels, legend and the ticks of both axes


def test_log_tick_labels_are_plain_text_powers_of_ten():
    # matplotlib's own log labels are mathtext, whose parser cost the error figure a third of its drawing
    assert [figures.power_text(x) for x in (1e-6, 1.0, 100.0, 0.002, 2e5, 9.99999e-4, -0.03)] == [
        "10⁻⁶", "10⁰", "10²", "2×10⁻³", "2×10⁵", "10⁻³", "−3×10⁻²"]
    for ratios, sizes in (([1e-5, 0.3, 2.0], [1, 1e4, 1e9]), ([0.2, 0.3, 0.5], [20, 30, 50])):  # wide, narrow
        fig = figures.error_ratio_figure(pd.DataFrame({"subject": ["chainer.a", "espnet.b", "pipeline.c"],
                                                      "case_size": sizes, "error_ratio": ratios}))
        fig.canvas.draw()
        ax = fig.axes[0]
        shown = [(t.get_text(), t.get_position()[k]) for k, ticks in ((0, ax.get_xticklabels(which="both")),
                                                                     (1, ax.get_yticklabels(which="both")))
                 for t in ticks if t.get_text()]
        assert len(shown) >= 4 and all(text == figures.power_text(x) and "$" not in text for text, x in shown), shown


def test_preload_compiles_every_template_of_the_page():
    render._env.cache_clear()
    try:
        render.preload()
        env = render._env()
        assert env.list_templates() and {t.name for t in env.cache.values()} == set(env.list_templates())
    finally:
        render._env.cache_clear()


# ------------------------------------------------------------------------------------------- a real run

@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("render") / "run")
    embed = [c for c in relation_cases() if c.family == "embed"]
    run = run_campaign(d, [COLLIDE, *embed], subjects_for(["chainer.embed_id", "control.nondeterministic",
                                                           "control.deterministic", "oracle.embed"]),
                       [CPU], [get_context("default"), get_context("blas1")],
                       CampaignOptions(repeats=3, fresh=0, quiet=True), relations=[RELATIONS["order"]])
    found = campaign_findings(d, run.measures, run.records, run.cases, Origin(d))
    frames: dict = {}
    env = {"gpu": {"available": False, "reason": "none here"}}
    with pytest.MonkeyPatch.context() as mp:  # the pages come from the view below (the lead's wiring)
        mp.setattr(render, "summary_html", lambda *a, **k: "")
        mp.setattr(render, "summary_md", lambda *a, **k: "")
        report_files.write_report(run, environment=env, found=found, frames=frames)
    pngs = [(n, Path(d, n).read_bytes()) for n in ("verdicts.png", "divergence.png", "error_vs_size.png")]
    files = sorted({*page_view.run_files(d), "summary.html", "summary.md"})
    view = page_view.report_view(d, frames["cells"], found, pngs, report_files.flatten_environment(env), files=files)
    Path(d, "summary.html").write_text(render.summary_html(view))
    Path(d, "summary.md").write_text(render.summary_md(view))
    return d, view


def _plain(page: str) -> str:
    """The page without the spans that keep tokens on one line."""
    return page.replace('<span class="nw">', "").replace("</span>", "")


def _assert_resolve(d: str | Path, links: list[str]) -> None:
    """Every link names a file inside the run directory ``d``."""
    for link in links:
        path = os.path.realpath(os.path.join(d, unquote(urlsplit(link).path)))
        assert path.startswith(os.path.realpath(d)) and os.path.exists(path), link


def _links(page: str) -> list[str]:
    return [h for h in re.findall(r'(?:href|src)="([^"]+)"', page) if not h.startswith(("data:", "#"))]


def test_every_link_resolves_to_a_file_in_the_run_directory(report):
    d, view = report
    page = Path(d, "summary.html").read_text()
    md = Path(d, "summary.md").read_text()
    links = _links(page) + re.findall(r"\]\(([^)]+)\)", md)
    assert any(link.startswith("cases/") for link in links) and any(link.startswith("findings.csv#row=")
                                                                  for link in links)
    _assert_resolve(d, links)
    n_cards = page.count('<article class="finding"')
    # one card per headline (the findings of one cause), each linking its lead finding's case
    assert n_cards == len(view.headlines()) and page.count(">case ") == n_cards
    # every finding is on the page: a card's lead, or a line beneath it
    assert all(f'id="finding-{f.id}"' in page for f in view.findings)


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_the_page_harness_report_writes_links_only_files_it_left(tmp_path):
    """``harness report`` compresses its logs and prunes arrays after the campaign: the page it writes links the
    files as they stay (``runs.jsonl.xz``, not the ``runs.jsonl`` that was there while the tables were built)."""
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "harness", "report", "--subjects",
                        "chainer.embed_id,control.deterministic", "--devices", "cpu", "--contexts", "default",
                        "--repeats", "2", "--fresh", "0", "--examples", "1", "--relations", "none", "--no-shrink",
                        "--no-localize", "--quiet", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    page = (out / "summary.html").read_text()
    links = _links(page) + re.findall(r"\]\(([^)]+)\)", (out / "summary.md").read_text())
    assert "runs.jsonl.xz" in links and "tasks.jsonl.xz" in links and "measures.jsonl.xz" in links, links
    _assert_resolve(out, links)


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_every_findings_replay_command_reproduces_it(report):
    _d, view = report
    kinds = {f.kind for f in view.findings}
    assert {"not reproducible run to run", "not invariant"} <= kinds, kinds
    ran = 0
    for f in [f for f in view.findings if f.kind in ("not reproducible run to run", "not invariant")][:4]:
        argv = shlex.split(f.replay())
        assert argv[1:3] == ["-m", "harness"]
        # the printed interpreter is this environment's (relative to the checkout); here, this test's own.
        p = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 1, (f.replay(), p.stdout[-800:], p.stderr[-800:])  # the difference reproduced
        ran += 1
    assert ran >= 2


@CHROMIUM
def test_in_chromium_the_verdict_comes_first_and_no_cell_breaks_inside_a_word(report, tmp_path):
    d, _ = report
    m = screenshot.page_metrics(os.path.join(d, "summary.html"), width=1400, height=900)
    assert m["scrollWidth"] <= 1400, m
    assert 0 < m["verdictBottom"] <= m["findingsTop"] < 900, m   # the gate line, then the findings, on screen 1
    assert m["cellsChecked"] > 20 and m["brokenWords"] == [], m["brokenWords"][:10]
    assert m["wrappedCommands"] == 0, m
    png = screenshot.screenshot(os.path.join(d, "summary.html"), str(tmp_path / "page.png"))
    assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@CHROMIUM
def test_in_chromium_a_long_value_scrolls_instead_of_breaking(tmp_path):
    long = "chainer.links.connection.n_step_lstm.NStepBiLSTMWithAVeryLongPluginName"
    v = _view(cells=_cells([{"subject": long, "verdict": "diverged as allowed", "worst_ulp": 5},
                                        {"subject": long, "relation": "subbatch", "worst_ulp": 7,
                                         "verdict": "diverged as allowed"}]))
    p = tmp_path / "summary.html"
    p.write_text(render.summary_html(v))
    m = screenshot.page_metrics(str(p), width=700, height=900)
    assert m["cellsChecked"] > 5 and m["brokenWords"] == [], m["brokenWords"][:10]


def test_old_run_directories_are_pruned_and_nothing_else(tmp_path):
    base = tmp_path / "reports"
    runs = [f"2026120{i}T000000Z-{i}" for i in range(1, 6)]
    for r in runs:
        (base / r).mkdir(parents=True)
        (base / r / retention.FINISHED).write_text("{}")  # finished reports (an unfinished one is never pruned)
    (base / "baselines").mkdir()
    (base / "README.md").write_text("x")
    (base / "latest").symlink_to(runs[0])  # the oldest is the latest's target: kept
    gone = retention.prune_reports(str(base), keep=2)
    assert gone == runs[1:3]
    assert sorted(os.listdir(base)) == sorted(["README.md", "baselines", "latest", runs[0], *runs[3:]])
    with pytest.raises(Exception, match="keep=-1"):
        retention.prune_reports(str(base), keep=-1)


# The page and its Markdown offer each finding's export command beside its replay command.

def test_each_finding_offers_the_export_command_after_its_replay_command_but_a_control_none():
    v = _view()
    page = html.unescape(_plain(render.summary_html(v)))
    md = render.summary_md(v)
    offered = [f for f in v.findings if f.replay()]
    controls = [f for f in offered if f.classification == Classification.CONTROL]
    assert controls and len(controls) < len(offered)
    for f in offered:
        if f in controls:  # nothing of a control goes upstream: no export command anywhere
            assert f.export() == "" and f.exports() == ()
            assert export_path(f.id) not in page and export_path(f.id) not in md
            continue
        assert f.export() and " export " in f.export()
        assert page.index(f.replay()) < page.index(f.export())
        assert md.index(f"```sh\n{f.replay()}") < md.index(f.export())


def test_infrastructure_notes_are_listed_on_the_page_and_in_the_markdown_apart_from_the_findings():
    v = _view()
    note = "chainer.embed_id [cpu] default on case abc: run 1 timed out beside other runs; a busy machine"
    with_notes = dataclasses.replace(v, notes=(note,))
    page = html.unescape(_plain(render.summary_html(with_notes)))
    md = render.summary_md(with_notes)
    assert "Infrastructure notes (1)" in page and note in page
    assert "Infrastructure notes (1)" in md and note in md
    assert with_notes.gate_line() == v.gate_line()  # a note is never a finding: the verdict is the same
    assert "Infrastructure notes" not in render.summary_html(v) and "Infrastructure notes" not in render.summary_md(v)
