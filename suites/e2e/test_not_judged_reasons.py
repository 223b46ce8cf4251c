"""A report whose contract asks for checks the user left out says so, in the words of the cause, on the page's
verdict line and in every cell of cells.csv that was not judged or not run."""

from __future__ import annotations

import csv

import pytest


@pytest.mark.slow  # a whole report (about 25 s): CI runs it, `make test` leaves it out
def test_relations_left_out_are_said_as_such_in_every_cell_and_the_verdict_line(harness, tmp_path) -> None:
    out = tmp_path / "r"
    r = harness("report", "--subjects", "chainer.embed_id,espnet.embed_id,oracle.embed", "--relations", "none",
                "--devices", "cpu", "--contexts", "default", "--out", str(out), "--quiet", "--no-localize",
                "--no-shrink")
    assert r.returncode == 0, r.stderr[-2000:]
    with open(out / "cells.csv", encoding="utf-8") as f:
        unrun = [row for row in csv.DictReader(f) if row["verdict"] in ("not judged", "skipped")]
    assert unrun and all(row["reason"].strip() for row in unrun), unrun
    left_out = [row for row in unrun if row["relation"]]
    assert left_out and all(row["reason"] == f"not run: --relations none leaves out '{row['relation']}' (the "
                                              f"contract claims invariance under it)" for row in left_out)
    verdict = next(ln for ln in r.stdout.splitlines() if ln.startswith(("FAIL:", "PASS:")))
    assert "not run: --relations none" in verdict and "no reason recorded" not in r.stdout
