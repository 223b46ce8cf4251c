"""harness/outputs/screenshot.py: Chromium is found on PATH or said to be absent; where it is, a page is laid out
and its metrics read back."""

from __future__ import annotations

import os
import stat

import pytest

from harness.outputs import screenshot


def test_chromium_is_found_on_path_by_any_of_its_names(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert screenshot.find_chromium() is None
    fake = tmp_path / "chromium-browser"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    assert screenshot.find_chromium() == str(fake)


def test_without_chromium_a_screenshot_says_so(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no chromium"):
        screenshot.screenshot(str(tmp_path / "a.html"), str(tmp_path / "a.png"))


@pytest.mark.slow  # seconds of a real browser: CI runs it, `make test` leaves it out
@pytest.mark.skipif(screenshot.find_chromium() is None, reason="no chromium here (.ci/run installs it)")
def test_a_page_is_laid_out_and_measured(tmp_path) -> None:
    page = tmp_path / "p.html"
    page.write_text("<html><body><h1 id='verdict'>PASS</h1><table><tr><td>x</td></tr></table></body></html>")
    metrics = screenshot.page_metrics(str(page), width=800, height=600)
    assert metrics["scrollWidth"] <= 800 and os.path.exists(page)
