"""harness.outputs.audit.pages: subject names that are HTML, Markdown or mathtext are escaped in the pages compare
and merge write."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.outputs import audit as A
from suites.audit_files import _base_audit


@pytest.mark.parametrize("subject", ["<script>alert(1)</script>", "a|b\nc", "$\\foo{$", "$x^{$"])
def test_hostile_subject_names_are_escaped(work, subject):
    stem = "x" + str(abs(hash(subject)))
    a = _base_audit(work, stem + "a.json", subject=subject)
    b = _base_audit(work, stem + "b.json", subject=subject, shape=(5, 10))
    out = work / (stem + "out")
    paths = A.write_compare(A.compare_audits(a, b), str(out))
    mpaths = A.write_merge(A.merge_audits([a, b]), str(out))
    for p in (paths["html"], mpaths["html"], paths["md"], mpaths["md"]):
        text = Path(p).read_text()
        assert "<script>" not in text, p
        if p.endswith(".md"):
            assert "a|b" not in text, p  # a bare | would split the cell
    html_text = Path(paths["html"]).read_text()
    if "<" in subject:
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html_text
    for p in (paths["md"], mpaths["md"]):
        rows = [ln for ln in Path(p).read_text().splitlines() if ln.startswith("|")]
        assert rows, p
        widths = {len(ln.replace("\\|", "").split("|")) for ln in rows}
        assert len(widths) <= 2, (p, widths)  # every row of a table has as many cells as its header
    if "|" in subject:
        assert "a\\|b c" in Path(paths["md"]).read_text()
