"""The page and its Markdown offer each finding's export command beside its replay command, and list the
run's infrastructure notes (a busy machine) apart from the findings."""

from __future__ import annotations

import dataclasses
import html

from harness.judge.findings import Classification
from harness.judge.reproducer import export_path
from harness.outputs import render
from suites.test_render import _plain, _view


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
