"""Look at the report as a person does: headless Chromium renders ``summary.html`` to a PNG, and measures where
the verdict and the matrix land and whether the page scrolls sideways. Optional: where no Chromium is
installed, :func:`find_chromium` returns None and callers skip with that reason."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile

__all__ = ["find_chromium", "screenshot", "page_metrics"]

_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--hide-scrollbars")

_PROBE = """<script>window.addEventListener('load', function () {
  function top(id) { var e = document.getElementById(id); return e ? e.getBoundingClientRect().top : -1; }
  function bottom(id) { var e = document.getElementById(id); return e ? e.getBoundingClientRect().bottom : -1; }
  // a word broken across lines has more than one client rect for its own range
  var broken = [], checked = 0;
  document.querySelectorAll('td, th').forEach(function (cell) {
    checked += 1;
    var walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), node;
    while ((node = walk.nextNode())) {
      var re = /\\S+/g, m;
      while ((m = re.exec(node.data))) {
        var r = document.createRange(); r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
        var lines = {}; Array.prototype.forEach.call(r.getClientRects(), function (q) {
          if (q.width > 0) lines[Math.round(q.top)] = 1; });
        if (Object.keys(lines).length > 1) broken.push(m[0]);
      }
    }
  });
  var wrapped = 0;
  document.querySelectorAll('pre.cmd').forEach(function (p) {
    if (p.querySelector('code').getClientRects().length > 1) wrapped += 1; });
  var out = {scrollWidth: document.documentElement.scrollWidth, verdictBottom: bottom('verdict'),
             findingsTop: top('findings'), matrixTop: top('matrix'), brokenWords: broken, cellsChecked: checked,
             wrappedCommands: wrapped};
  var pre = document.createElement('pre'); pre.id = 'harness-metrics';
  pre.textContent = 'HARNESS-METRICS' + JSON.stringify(out) + 'END';
  document.body.appendChild(pre);
});</script>"""


def find_chromium() -> str | None:
    """The Chromium executable (``chromium``, ``chromium-browser``, ``google-chrome``), None where absent."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(args: list[str], timeout: float = 90) -> subprocess.CompletedProcess:
    exe = find_chromium()
    if exe is None:
        raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="harness-chromium-") as profile:
        return subprocess.run([exe, *_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=timeout)


def screenshot(html_path: str, png_path: str, width: int = 1400, height: int = 900) -> str:
    """Render ``html_path`` at ``width`` x ``height`` into ``png_path``; returns ``png_path``."""
    _run([f"--window-size={width},{height}", f"--screenshot={os.path.abspath(png_path)}",
          "file://" + os.path.abspath(html_path)])
    if not os.path.exists(png_path):
        raise RuntimeError(f"chromium wrote no screenshot of {html_path}")
    return png_path


def page_metrics(html_path: str, width: int = 1400, height: int = 900) -> dict[str, float]:
    """The page as Chromium lays it out at ``width``: ``scrollWidth``; where the verdict ends and the findings
    and the matrix start (px from the top); ``brokenWords``, the words of table cells that wrap inside
    themselves (a range over the word spans two lines), of ``cellsChecked`` cells; ``wrappedCommands``, the
    command blocks whose text wraps."""
    with open(html_path, encoding="utf-8") as f:
        page = f.read()
    with tempfile.TemporaryDirectory(prefix="harness-page-") as d:
        probe = os.path.join(d, "page.html")
        with open(probe, "w", encoding="utf-8") as f:
            f.write(page.replace("</body>", _PROBE + "</body>"))
        p = _run([f"--window-size={width},{height}", "--virtual-time-budget=5000", "--dump-dom", "file://" + probe])
    m = re.search(r"HARNESS-METRICS(\{.*?\})END", p.stdout)
    if m is None:
        raise RuntimeError(f"chromium did not lay out {html_path}: {p.stderr.strip()[-300:]}")
    return json.loads(m.group(1))
