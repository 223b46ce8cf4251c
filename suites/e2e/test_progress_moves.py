"""A long run's progress line moves while it runs: a plug-in subject blocks until this test has seen the line
written again with the running task in it, then is released (no wall-clock assert)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.core.cases import Case
from harness.core.corpus_files import write_corpus

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_progress_line_updates_while_a_long_run_goes_on(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    write_corpus([Case("embed", 1, {"vocab": 7, "width": 3, "ids_shape": [4]})], str(corpus))
    release = tmp_path / "release"
    env = {**os.environ, "HARNESS_TEST_RELEASE": str(release), "HARNESS_PROGRESS_SECONDS": "0.2",
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "report", "--corpus", str(corpus), "--subjects", "blocking.until_released",
         "--subject-plugin", "suites.plugins.blocking:SUBJECTS", "--devices", "cpu", "--contexts", "default",
         "--relations", "none", "--repeats", "1", "--fresh", "0", "--jobs", "1", "--no-localize",
         "--out", str(tmp_path / "run")],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    moved = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            running = [s for s in seen if "running blocking.until_released on case" in s]
            if len(running) >= 2 and not release.exists():
                moved.set()
                release.write_text("go")  # released only once the line was written again during the run

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(60)
    # The line was written at least twice while the run was blocked (nothing finished in between: the subject
    # waited for this test), and the report then finished normally.
    assert moved.is_set(), "".join(seen)
    assert proc.returncode == 0, "".join(seen)
