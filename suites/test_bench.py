"""Tests of `harness bench` (harness/bench.py): the quick bench end to end, and its measuring functions."""

from __future__ import annotations

import glob
import json
import math
import os

import numpy as np
import pandas as pd
import pytest

from harness.outputs import bench


@pytest.fixture(scope="module")
def quick_bench(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("bench")
    return bench.run_bench(str(out), quick=True, quiet=True)


def test_quick_bench_writes_every_section_with_finite_positive_ratios(quick_bench: dict) -> None:
    out = quick_bench["dir"]
    frame = pd.read_csv(os.path.join(out, "bench.csv"))
    assert list(frame.columns) == list(bench.COLUMNS)
    assert set(frame["section"]) == set(bench.SECTIONS)
    for section in bench.SECTIONS:
        rows = frame[frame["section"] == section]
        assert len(rows), f"no rows for section {section}"
        measured = rows[~rows["status"].isin(bench.NO_RATIO_STATUSES)]
        if section != "make":  # make times are read from earlier runs and may be absent
            assert len(measured), f"section {section} has no measured ratio"
        for _, r in measured.iterrows():
            assert math.isfinite(r["ratio"]) and r["ratio"] > 0, (section, r["item"], r["ratio"])
            assert r["rounds"] >= 1, (section, r["item"])
    # every row names the machine it was measured on
    assert frame["machine"].notna().all() and frame["machine"].str.contains("cores").all()


def test_quick_bench_headlines_are_present(quick_bench: dict) -> None:
    frame = pd.read_csv(os.path.join(quick_bench["dir"], "bench.csv"))
    items = set(frame["item"])
    assert "overhead ratio" in items
    parts = {i.split(": ", 1)[1] for i in items if i.startswith("breakdown: ")}
    assert parts == {"case_building", "worker_startup", "transfer", "run_records", "compare", "oracle", "report_writing"}
    over = frame[frame["section"] == "overhead"].set_index("item")
    # the parts account for everything above the subjects' own time (medians, so only roughly)
    share = sum(over.loc[f"breakdown: {p}", "ratio"] for p in parts)
    assert over.loc["overhead ratio", "ratio"] >= 1.0
    assert share == pytest.approx(over.loc["overhead ratio", "ratio"] - 1.0, rel=0.25, abs=0.25)
    assert any(i.startswith("cpu N=") and i.endswith("backward time") for i in items)
    gpu = frame[frame["item"] == "gpu: backward time and peak memory"]
    from harness.core.devices import available_gpus

    if available_gpus() == 0:
        assert len(gpu) == 1 and gpu["status"].iloc[0] == "skipped"
        assert "skipped: no GPU" in gpu["note"].iloc[0]
    for fam in ("embed", "lstm", "pipeline"):
        assert any(i.startswith(f"{fam}: base") for i in items), fam
    assert "cases/s at -n 2 / at -n 1" in items


def test_quick_bench_writes_markdown_plots_and_json(quick_bench: dict) -> None:
    out = quick_bench["dir"]
    md = open(os.path.join(out, "bench.md"), encoding="utf-8").read()
    for section in bench.SECTIONS:
        assert bench._TITLES[section] in md
    assert md.count("| item") == len(bench.SECTIONS)  # one table per section
    assert "cores" in md and "BLAS" in md
    pngs = glob.glob(os.path.join(out, "*.png"))
    assert pngs
    for p in pngs:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    meta = json.load(open(os.path.join(out, "bench.json"), encoding="utf-8"))
    assert meta["quick"] is True and set(meta["section_walls"]) == set(bench.SECTIONS)
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]  # atomic writes leave no temporaries


def test_quick_bench_is_quick(quick_bench: dict) -> None:
    assert quick_bench["wall"] < 90, quick_bench["section_walls"]


@pytest.mark.parametrize("variant", ["identical", "one differs"])
def test_comparator_throughput_on_1mb_array(variant: str) -> None:
    a = np.random.default_rng(0).standard_normal(2 ** 18, dtype=np.float32)  # 1 MiB
    b = a.copy()
    if variant == "one differs":
        b[1234] = np.nextafter(b[1234], np.float32(np.inf))
    res = bench.comparator_throughput(a, b, rounds=3)
    assert res["bytes"] == 2 * 2 ** 20
    assert set(res["seconds"]) == {"comparator", "comparator_forced", "array_equal", "array_equal+sha256"}
    for m, s in res["seconds"].items():
        assert math.isfinite(s) and s > 0, m
        assert res["bytes_per_s"][m] == pytest.approx(res["bytes"] / s)
    for key in ("ratio_vs_array_equal", "ratio_vs_array_equal_sha256", "ratio_forced_vs_array_equal"):
        assert math.isfinite(res[key]) and res[key] > 0, key
    assert res["ratio_vs_array_equal"] == pytest.approx(res["seconds"]["array_equal"] / res["seconds"]["comparator"])
    c = res["comparison"]
    if variant == "identical":
        assert c.bitwise_identical and c.n_diff == 0 and res["array_equal"]
    else:
        assert not c.bitwise_identical and c.n_diff == 1 and c.max_ulp == 1
        assert c.first_diff_index == (1234,) and not res["array_equal"]


def test_parse_pytest_counts() -> None:
    out = "....F\n=== 1 failed, 33 passed, 11 skipped, 292 deselected, 2 warnings in 52.72s ===\n"
    assert bench.parse_pytest_counts(out) == {"failed": 1, "passed": 33, "skipped": 11, "deselected": 292}
    assert bench.parse_pytest_counts("3 errors in 1.0s") == {"error": 3}
    assert bench.parse_pytest_counts("no summary here") == {}


def test_make_times_read_from_reports_dir(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESS_MAKE_TEST_SECONDS", raising=False)
    rows, _ = bench.bench_make_times(str(tmp_path))
    assert [r.status for r in rows] == ["not measured", "not measured"]
    assert all("not measured in this run" in r.note for r in rows)
    (tmp_path / "latest").mkdir()
    (tmp_path / "latest" / "timings.json").write_text(json.dumps({"total": 30.0, "subject": 12.0, "campaign": 25.0}))
    (tmp_path / "make-test-seconds.txt").write_text("95.5\n")
    rows, _ = bench.bench_make_times(str(tmp_path))
    report, test = rows
    assert report.status == "measured" and report.ratio == pytest.approx(2.5)
    assert test.numerator_value == pytest.approx(95.5)
    monkeypatch.setenv("HARNESS_MAKE_TEST_SECONDS", "12")
    assert bench.bench_make_times(str(tmp_path))[0][1].numerator_value == pytest.approx(12.0)
