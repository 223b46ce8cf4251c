"""The page and its Markdown offer each finding's export command beside its replay command."""

from __future__ import annotations

import html

from harness.outputs import render
from suites.test_render import _plain, _view


def test_each_finding_offers_the_export_command_after_its_replay_command():
    v = _view()
    page = html.unescape(_plain(render.summary_html(v)))
    md = render.summary_md(v)
    offered = [f for f in v.findings if f.replay()]
    assert offered
    for f in offered:
        assert f.export() and " export " in f.export()
        assert page.index(f.replay()) < page.index(f.export())
        assert md.index(f"```sh\n{f.replay()}\n```") < md.index(f"```sh\n{f.export()}\n```")
