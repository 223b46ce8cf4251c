"""Smoke tests of the bench, `python -m tools.bench` (tools/bench/): every section runs on tiny inputs and writes
its files.

No timing is asserted here (the machine is shared and noisy); the full bench is `make bench`. The smoke level
(marked ``slow``: a bench, which `make test` leaves out; `make test MARKS=` runs it) runs in this process in a few
seconds, starts no nested pytest session (the xdist section says it is skipped),
and its figures must be finite and positive wherever a ratio was measured.
"""

from __future__ import annotations

import glob
import json
import math
import os
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from harness.core.errors import InvalidArgument
from tools import bench
from tools.bench import blas_pair, comparator, driver, make_times, scaling, xdist


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict:
    # about 4 s on the 2-core CI machine: three tiny campaigns (one worker each) and six small plots
    out = tmp_path_factory.mktemp("bench")
    return bench.run_bench(str(out), level="smoke", quiet=True)


@pytest.mark.slow  # a bench: make test leaves it out
def test_smoke_bench_writes_every_section_with_finite_positive_ratios(smoke: dict) -> None:
    frame = pd.read_csv(os.path.join(smoke["dir"], "bench.csv"))
    assert list(frame.columns) == list(bench.COLUMNS)
    assert set(frame["section"]) == set(bench.SECTIONS)
    for section in bench.SECTIONS:
        rows = frame[frame["section"] == section]
        measured = rows[~rows["status"].isin(bench.NO_RATIO_STATUSES)]
        if section not in ("make", "xdist", "gate"):  # make times come from earlier runs; the nested pytest
            # sessions (xdist, gate) are skipped in smoke
            assert len(measured), f"section {section} has no measured ratio"
        for _, r in measured.iterrows():
            assert math.isfinite(r["ratio"]) and r["ratio"] > 0, (section, r["item"], r["ratio"])
            assert r["rounds"] >= 1, (section, r["item"])
    assert frame["machine"].notna().all() and frame["machine"].str.contains("cores").all()
    # nothing green by accident: what did not run says so, with a reason
    skipped = frame[frame["status"] == "skipped"]
    assert (skipped["note"].str.len() > 10).all()
    assert "nested pytest" in frame[frame["section"] == "xdist"]["note"].iloc[0]
    assert "nested pytest" in frame[frame["section"] == "gate"]["note"].iloc[0]


@pytest.mark.slow  # a bench: make test leaves it out
def test_smoke_overhead_parts_add_up(smoke: dict) -> None:
    frame = pd.read_csv(os.path.join(smoke["dir"], "bench.csv"))
    over = frame[frame["section"] == "overhead"].set_index("item")
    parts = {i.split(": ", 1)[1] for i in over.index if i.startswith("breakdown: ")}
    assert parts == {k for k, _ in driver.PARTS}
    for p in parts:
        v = over.loc[f"breakdown: {p}", "numerator_value"]
        assert math.isfinite(v) and v >= 0, p
    # the one-lane round: its parts are additive by construction, so they sum to its total above the subjects'
    # time; the headline's denominator is that round's subjects' time
    total = over.loc["overhead ratio in one lane (--jobs 1)", "numerator_value"]
    subject = over.loc["overhead ratio in one lane (--jobs 1)", "denominator_value"]
    assert subject > 0 and total > subject
    assert over.loc["overhead ratio", "denominator_value"] == subject
    assert (sum(over.loc[f"breakdown: {p}", "numerator_value"] for p in parts)
            == pytest.approx(total - subject, rel=1e-3))


@pytest.mark.slow  # a bench: make test leaves it out
def test_smoke_scaling_and_digest_rows(smoke: dict) -> None:
    frame = pd.read_csv(os.path.join(smoke["dir"], "bench.csv"))
    items = set(frame["item"])
    assert {"1x: overhead ratio", "2x: overhead ratio", "1x: seconds per task", "2x: seconds per task"} <= items
    for item in ("cost per task, largest / smallest size",
                 "harness cost per task, largest / smallest size (one lane)"):
        fit = frame[frame["item"] == item]["note"].iloc[0]
        assert fit.split(":")[0] in ("linear", "superlinear", "sublinear"), item
    raw = json.load(open(os.path.join(smoke["dir"], "bench.json"), encoding="utf-8"))["raw"]
    pts = raw["scaling"]["points"]
    assert [p["factor"] for p in pts] == [1, 2] and pts[1]["tasks"] == 2 * pts[0]["tasks"]
    digest = frame[frame["section"] == "digest"]
    for name in ("sha256", "blake3 (1 thread)", "blake3 (max_threads)", "xxh3_128"):
        assert f"{name}: throughput / array_equal's" in set(digest["item"]), name
    pick = digest[digest["item"] == "pick: fastest digest algorithm"]
    assert pick["note"].iloc[0].startswith("measured pick ")


@pytest.mark.slow  # a bench: make test leaves it out
def test_smoke_writes_markdown_plots_and_json(smoke: dict) -> None:
    out = smoke["dir"]
    md = open(os.path.join(out, "bench.md"), encoding="utf-8").read()
    for section in bench.SECTIONS:
        assert bench.TITLES[section] in md
    assert md.count("| item") == len(bench.SECTIONS)  # one table per section
    pngs = sorted(os.path.basename(p) for p in glob.glob(os.path.join(out, "*.png")))
    assert pngs == sorted(["overhead.png", "scaling.png", "comparator_throughput.png", "digest.png",
                           "oracle_cost.png", "sizes.png", "determinism.png"])
    for p in pngs:
        with open(os.path.join(out, p), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    meta = json.load(open(os.path.join(out, "bench.json"), encoding="utf-8"))
    assert meta["level"] == "smoke" and set(meta["section_walls"]) == set(bench.SECTIONS)
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]  # atomic writes leave no temporaries


def test_bad_level_or_section_is_refused_before_work(tmp_path) -> None:
    with pytest.raises(InvalidArgument, match="level='huge'"):
        bench.run_bench(str(tmp_path / "x"), level="huge")
    with pytest.raises(InvalidArgument, match="'nope'"):
        bench.run_bench(str(tmp_path / "y"), level="smoke", sections=("digest", "nope"))
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_the_bench_runs_as_its_own_module_and_refuses_bad_input_in_one_line(tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    run = lambda *a: subprocess.run([sys.executable, "-m", "tools.bench", *a], cwd=root, capture_output=True,  # noqa: E731
                                    text=True, timeout=120)
    p = run("--help")
    assert p.returncode == 0 and "--quick" in p.stdout and "--sections" in p.stdout
    p = run("--level", "smoke", "--sections", "digest,nope", "--out", str(tmp_path / "b"))
    assert p.returncode == 2 and "'nope'" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "b").exists()
    from harness.cli import build_parser

    with pytest.raises(SystemExit):  # the harness has no bench verb: it would have to import tools/
        build_parser().parse_args(["bench"])


@pytest.mark.parametrize("variant", ["identical", "one differs"])
def test_comparator_throughput_on_1mb_array(variant: str) -> None:
    a = np.random.default_rng(0).standard_normal(2 ** 18, dtype=np.float32)  # 1 MiB
    b = a.copy()
    if variant == "one differs":
        b[1234] = np.nextafter(b[1234], np.float32(np.inf))
    res = comparator.comparator_throughput(a, b, rounds=2)
    assert res["bytes"] == 2 * 2 ** 20
    assert set(res["seconds"]) == set(comparator.METHODS)
    for m, s in res["seconds"].items():
        assert math.isfinite(s) and s > 0, m
        assert res["bytes_per_s"][m] == pytest.approx(res["bytes"] / s)
    assert res["ratio_vs_array_equal"] == pytest.approx(res["seconds"]["array_equal"] / res["seconds"]["comparator"])
    c = res["comparison"]
    if variant == "identical":
        assert c.bitwise_identical and c.n_diff == 0 and res["array_equal"]
    else:
        assert not c.bitwise_identical and c.n_diff == 1 and c.max_ulp == 1
        assert c.first_diff_index == (1234,) and not res["array_equal"]


def test_linearity_tells_linear_from_superlinear() -> None:
    tasks = [10, 40, 160]
    lin = scaling.linearity(tasks, [2.0 + 0.1 * n for n in tasks])
    assert lin["verdict"].startswith("linear") and lin["b"] == pytest.approx(0.1) and lin["a"] == pytest.approx(2.0)
    quad = scaling.linearity(tasks, [2.0 + 0.001 * n * n for n in tasks])
    assert quad["verdict"].startswith("superlinear")
    sub = scaling.linearity(tasks, [2.0 + 3 * math.sqrt(n) for n in tasks])
    assert sub["verdict"].startswith("sublinear")
    assert scaling.linearity([10], [1.0])["verdict"] == "not enough sizes to say"


def test_scaled_corpus_has_new_cases_of_the_default_sizes() -> None:
    one, four = driver.scaled_corpus(1, quick=True), driver.scaled_corpus(4, quick=True)
    assert len(four) == 4 * len(one) and len({c.id for c in four}) == len(four)
    assert sorted(c.family for c in four) == sorted([c.family for c in one] * 4)
    shapes = {(c.family, json.dumps(dict(c.spec), sort_keys=True, default=str)) for c in one}
    assert {(c.family, json.dumps(dict(c.spec), sort_keys=True, default=str)) for c in four} == shapes


def test_parse_pytest_counts() -> None:
    out = "....F\n=== 1 failed, 33 passed, 11 skipped, 292 deselected, 2 warnings in 52.72s ===\n"
    assert xdist.parse_pytest_counts(out) == {"failed": 1, "passed": 33, "skipped": 11, "deselected": 292}
    assert xdist.parse_pytest_counts("3 errors in 1.0s") == {"error": 3}
    assert xdist.parse_pytest_counts("no summary here") == {}


def test_make_times_read_from_reports_dir(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESS_MAKE_TEST_SECONDS", raising=False)
    rows, _ = make_times.bench_make_times(str(tmp_path))
    assert [r.status for r in rows] == ["not measured", "not measured"]
    assert all("not measured in this run" in r.note for r in rows)
    (tmp_path / "latest").mkdir()
    (tmp_path / "latest" / "timings.json").write_text(json.dumps({"total": 30.0, "subject": 12.0, "campaign": 25.0}))
    (tmp_path / "make-test-seconds.txt").write_text("95.5\n")
    rows, _ = make_times.bench_make_times(str(tmp_path))
    report, test = rows
    assert report.status == "measured" and report.ratio == pytest.approx(2.5)
    assert test.numerator_value == pytest.approx(95.5)
    monkeypatch.setenv("HARNESS_MAKE_TEST_SECONDS", "12")
    assert make_times.bench_make_times(str(tmp_path))[0][1].numerator_value == pytest.approx(12.0)


def test_scaling_pairs_each_round_in_lanes_with_one_in_one_lane_and_keeps_the_pair_of_median_ratio(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At the sizes the targets name, the scaling section runs ROUNDS pairs (a round in lanes, then one in one
    lane: the denominator) and keeps the pair whose ratio is the median (its note lists them all); other sizes
    run once, in lanes. The rounds here are canned: the choice is what is tested."""
    walls = {1: [9.0, 5.0, 7.0], 4: [30.0, 20.0, 25.0], 16: [80.0]}
    alone = {1: [3.0, 5.0, 5.0], 4: [10.0, 16.0, 25.0], 16: [64.0]}  # 4x ratios 3.0, 1.25, 1.0: the median is
    # not the median wall
    calls: list[tuple[int, int]] = []

    def fake_round(factor, quick, repeats, fresh, fresh_interpreter=True, report=True, jobs=0, sizes=False):
        calls.append((factor, jobs))
        k = sum(1 for f, j in calls if f == factor and j == jobs) - 1
        total = walls[factor][k] if jobs == 0 else 4.0 * factor
        point = {k_: 0.1 for k_, _ in driver.PARTS}
        point.update(total=total, subject=5.0 * factor if jobs == 0 else alone[factor][k], oracle=0.1,
                     tasks=100.0 * factor, runs=500.0 * factor, cases=10.0 * factor, campaign=total - 1.0,
                     jobs=2.0 if jobs == 0 else 1.0)
        return point

    from tools.bench import overhead

    monkeypatch.setattr(scaling, "campaign_round", fake_round)
    monkeypatch.setattr(overhead, "campaign_round", fake_round)  # the pairs' rounds (paired_rounds)
    rows, raw = scaling.bench_scaling("quick", factors=(1, 4, 16), quiet=True)
    assert calls == [(1, 0), (1, 1)] * 3 + [(4, 0), (4, 1)] * 3 + [(16, 0), (16, 1)]  # each pair back to back
    totals = {p["factor"]: p["total"] for p in raw["points"]}
    assert totals == {1: 7.0, 4: 20.0, 16: 80.0}
    ratio_rows = {r.item: r for r in rows if r.item.endswith("overhead ratio")}
    assert ratio_rows["1x: overhead ratio"].ratio == pytest.approx(7.0 / 5.0)
    assert ratio_rows["4x: overhead ratio"].ratio == pytest.approx(20.0 / 16.0)
    assert ratio_rows["4x: overhead ratio"].denominator_value == pytest.approx(16.0)
    assert ratio_rows["4x: overhead ratio"].rounds == 3 and ratio_rows["16x: overhead ratio"].rounds == 1
    # the largest size's denominator is its own one-lane round too, never the subjects' seconds summed in lanes
    assert ratio_rows["16x: overhead ratio"].denominator_value == pytest.approx(64.0)
    assert ratio_rows["16x: overhead ratio"].ratio == pytest.approx(80.0 / 64.0)
    assert "30.00 s / 10.00 s = 3.00, 20.00 s / 16.00 s = 1.25, 25.00 s / 25.00 s = 1.00" in \
        ratio_rows["4x: overhead ratio"].note


def test_every_scaling_row_is_a_non_negative_ratio_of_its_own_numerator_and_denominator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rounds in lanes sum the subjects' seconds over lanes that ran side by side, so that sum can exceed the
    wall: the harness's own seconds come from the one-lane rounds alone, where they are never negative, and each
    row's ratio is its numerator over its denominator. Canned rounds whose lanes' subject sum exceeds the wall."""
    from tools.bench import overhead

    def fake_round(factor, quick, repeats, fresh, fresh_interpreter=True, report=True, jobs=0, sizes=False):
        point = {k_: 0.1 for k_, _ in driver.PARTS}
        wall = 3.0 * factor if jobs == 0 else 5.0 * factor
        point.update(total=wall, subject=(5.5 if jobs == 0 else 4.0) * factor, oracle=0.5 * factor,
                     tasks=100.0 * factor, runs=500.0 * factor, cases=10.0 * factor, campaign=wall - 0.5,
                     jobs=2.0 if jobs == 0 else 1.0)
        return point

    monkeypatch.setattr(scaling, "campaign_round", fake_round)
    monkeypatch.setattr(overhead, "campaign_round", fake_round)
    rows, _ = scaling.bench_scaling("quick", factors=(1, 4, 16), quiet=True)
    for r in rows:
        if isinstance(r.numerator_value, float) and isinstance(r.denominator_value, float) and r.denominator_value:
            assert r.numerator_value >= 0 and r.denominator_value > 0, r.item
            assert r.ratio == pytest.approx(r.numerator_value / r.denominator_value), r.item
    own = {r.item: r for r in rows if "harness" in r.item}
    assert set(own) == {"1x: harness seconds per task, one lane", "4x: harness seconds per task, one lane",
                        "16x: harness seconds per task, one lane",
                        "harness cost per task, largest / smallest size (one lane)"}
    for f in (1, 4, 16):  # every size's overhead ratio divides by the subjects' seconds in one lane
        assert next(r for r in rows if r.item == f"{f}x: overhead ratio").denominator.endswith(", one lane")
    assert own["1x: harness seconds per task, one lane"].numerator_value == pytest.approx(5.0 - 4.0)


def test_the_overhead_section_takes_its_denominator_from_the_one_lane_round_beside_each_round(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tools.bench import overhead

    calls: list[int] = []
    lanes_walls, alone_subjects = [12.0, 10.0, 11.0], [6.0, 10.0, 8.0]  # ratios 2.0, 1.0, 1.375

    def fake_round(factor, quick, repeats, fresh, fresh_interpreter=True, report=True, jobs=0, sizes=False):
        calls.append(jobs)
        k = calls.count(jobs) - 1
        point = {k_: 0.1 for k_, _ in driver.PARTS}
        point.update(total=lanes_walls[k] if jobs == 0 else 20.0, subject=alone_subjects[k] if jobs == 1 else 9.0,
                     oracle=0.1, tasks=100.0, runs=500.0, cases=10.0, campaign=9.0, jobs=2.0 if jobs == 0 else 1.0,
                     worker_startup_summed=1.0, subject_cpu=2.5 * alone_subjects[k] if jobs == 1 else 30.0,
                     cpu_all=36.0 if jobs == 1 else 33.0, cores=2.0)
        return point

    monkeypatch.setattr(overhead, "campaign_round", fake_round)
    monkeypatch.setattr(blas_pair, "blas_pair_rows", lambda rounds, quiet: ([], {}))
    rows, raw = overhead.bench_overhead("quick", rounds=3, quiet=True)
    assert calls == [0, 1] * 3
    top = rows[0]
    assert top.item == "overhead ratio" and top.ratio == pytest.approx(11.0 / 8.0)
    assert top.numerator_value == 11.0 and top.denominator_value == 8.0 and raw["alone"]["subject"] == 8.0
    # the floor: the same one-lane round's CPU seconds (20 s) over 2 cores, against its subjects' 8 s
    floor = next(r for r in rows if r.item == "two-lane floor: subjects' CPU seconds / cores")
    assert floor.numerator_value == pytest.approx(10.0) and floor.denominator_value == 8.0
    assert floor.ratio == pytest.approx(10.0 / 8.0)
    whole = next(r for r in rows if r.item == "two-lane floor: the campaign's CPU seconds / cores")
    assert whole.numerator_value == pytest.approx(18.0) and whole.ratio == pytest.approx(18.0 / 8.0)
    busy = next(r for r in rows if r.item == "cores kept busy in lanes")
    assert busy.ratio == pytest.approx(33.0 / (2 * 11.0))
    spin = next(r for r in rows if r.item == "subjects' CPU seconds in lanes / in one lane")
    assert spin.ratio == pytest.approx(30.0 / 20.0)


def test_the_overhead_section_says_the_report_directorys_bytes_per_run_of_its_round_in_lanes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rounds in lanes leave their report directories' sizes (as harness report leaves them); the section
    divides each entry's bytes, and their sum, by that round's runs."""
    from tools.bench import overhead

    asked: list[bool] = []

    def fake_round(factor, quick, repeats, fresh, fresh_interpreter=True, report=True, jobs=0, sizes=False):
        asked.append(sizes)
        point = {k_: 0.1 for k_, _ in driver.PARTS}
        point.update(total=10.0, subject=8.0, oracle=0.1, tasks=100.0, runs=400.0, cases=10.0, campaign=9.0,
                     jobs=2.0 if jobs == 0 else 1.0, worker_startup_summed=1.0,
                     report_bytes={"tasks.jsonl.xz": 3000, "arrays/": 1000} if sizes else {})
        return point

    monkeypatch.setattr(overhead, "campaign_round", fake_round)
    monkeypatch.setattr(blas_pair, "blas_pair_rows", lambda rounds, quiet: ([], {}))
    rows, _ = overhead.bench_overhead("quick", rounds=1, quiet=True)
    assert asked == [True, False]  # the round in lanes measures its directory; the one-lane round does not
    by_item = {r.item: r for r in rows if r.item.startswith("report bytes per run")}
    assert by_item["report bytes per run"].ratio == pytest.approx(4000 / 400)
    assert by_item["report bytes per run: tasks.jsonl.xz"].numerator_value == 3000
    assert by_item["report bytes per run: arrays/"].ratio == pytest.approx(1000 / 400)


def test_the_blas_pair_rows_divide_the_pairs_wall_by_twice_the_lone_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real child processes (a short loop): each thread count gives a row whose ratio is its own numerator (the
    pair's wall, the slower of the two) over its denominator (twice the lone loop's wall), and a CPU-seconds row."""
    monkeypatch.setattr(blas_pair, "PRODUCTS", 20)
    monkeypatch.setattr(blas_pair, "SIDE", 64)
    rows, raw = blas_pair.blas_pair_rows(threads=(1,), rounds=1, quiet=True)
    assert [r.item for r in rows] == [
        "two lanes' limit with BLAS at 1 thread(s): side by side / one after the other",
        "CPU seconds side by side / alone, BLAS at 1 thread(s)"]
    (got,) = raw["threads1"]
    assert rows[0].numerator_value == max(p["wall"] for p in got["pair"]) > 0
    assert rows[0].denominator_value == pytest.approx(2 * got["alone"]["wall"])
    assert rows[0].ratio == pytest.approx(rows[0].numerator_value / rows[0].denominator_value)
    assert rows[1].numerator_value == pytest.approx(sum(p["cpu"] for p in got["pair"]))


def test_the_timed_executors_parts_add_up_to_the_campaign_when_writing_overlapped_the_runs() -> None:
    """One lane runs the next task while the campaign writes the last: a step can wait less inside the executor
    than its outcome's own seconds. The parts stay non-negative and, with the outcomes' seconds, sum to the
    campaign's wall; the writing part is what the runs did not hide."""
    timed = driver.TimedExecutor(inner=SimpleNamespace(stats={}))
    timed.steps = [{"inside": 2.0, "own": 1.0, "new_group": 1.0, "outside": 0.3},   # start-up: 1 s
                   {"inside": 0.8, "own": 1.0, "new_group": 0.0, "outside": 0.3},   # 0.2 s of it ran while writing
                   {"inside": 1.1, "own": 1.0, "new_group": 0.0, "outside": 0.3}]
    timed.final_inside = 0.1
    campaign = 2.0 + 0.8 + 1.1 + 0.1 + 3 * 0.3
    parts = timed.split(campaign)
    assert all(v >= 0 for v in parts.values())
    assert sum(parts.values()) + 3.0 == pytest.approx(campaign)
    assert parts["worker_startup"] == pytest.approx(0.1 + 1.0 - 0.05)  # less the typical step's residual
    assert parts["writing"] == pytest.approx(campaign - 3.0 - parts["worker_startup"] - parts["run_records"])


def test_report_sizes_sum_folders_and_leave_out_hidden_entries(tmp_path) -> None:
    (tmp_path / "arrays").mkdir()
    (tmp_path / "arrays" / "a.npz").write_bytes(b"x" * 7)
    (tmp_path / "arrays" / "b.npz").write_bytes(b"x" * 5)
    (tmp_path / "tasks.jsonl.xz").write_bytes(b"x" * 3)
    (tmp_path / ".lock").write_text("1")
    assert driver.report_sizes(str(tmp_path)) == {"arrays/": 12, "tasks.jsonl.xz": 3}


def test_the_bench_says_when_no_bytecode_cache_can_be_kept() -> None:
    from tools.bench.common import bytecode_note

    assert bytecode_note({"PYTHONDONTWRITEBYTECODE": "1"}).startswith("not kept")
    assert bytecode_note({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/x"}) == "kept"
    assert bytecode_note({"PYTHONDONTWRITEBYTECODE": ""}) == "kept"  # what the Makefile exports
    assert bytecode_note({}) == "kept"


def test_the_sizes_section_names_every_recipe_dimension_in_its_corner_rows() -> None:
    from harness.generate.recipes import DIMENSIONS
    from tools.bench import sizes

    corners = sizes._corners()
    named = {name for _, label, _ in corners for name in label.removeprefix(sizes.CORNER).split(" + ")}
    assert named == {f"{d.family}.{d.name}" for d in DIMENSIONS}
    assert all(family in sizes.LADDER for family, _, _ in corners)  # each runs on its family's ladder subject
    assert sizes._CORNERS["quick"] and sizes._CORNERS["full"] and not sizes._CORNERS["smoke"]


@pytest.mark.slow  # a training run in a worker process
def test_the_sizes_section_prices_a_training_step_against_the_harness_per_step() -> None:
    from harness.execute.isolated import Runner
    from tools.bench import sizes

    with Runner() as runner:
        row, m = sizes.trajectory_row(runner, "smoke")
    assert row.item == "model: harness per training step" and row.section == "sizes"
    assert m["steps"] == 3 and m["step"] > 0 and row.denominator_value == m["step"]
    assert math.isfinite(row.ratio) and row.ratio == pytest.approx(m["harness"] / m["step"])
    assert m["wall"] >= m["steps"] * (m["step"] + m["harness"]) * 0.999  # the parts are of the run's own wall


@pytest.mark.slow  # runs in worker processes
def test_a_size_point_splits_its_wall_into_subject_oracle_inputs_and_harness() -> None:
    """A point's parts are of its own wall; the inputs are what the workers spent building the case's arrays (a
    case no worker built before: drawn, so more than nothing), and its floor counts the case's float elements."""
    from harness.core.case_arrays import array_layout
    from harness.core.cases import Case
    from harness.execute.isolated import Runner
    from harness.judge.contracts import load_contracts
    from tools.bench import sizes

    case = Case("embed", 11, {"vocab": 3000, "width": 200, "ids_shape": [30, 40]})
    with Runner() as runner:
        m = sizes._point(runner, load_contracts(), "chainer.embed_id", case)
    assert m["inputs"] > 0 and m["subject"] > 0 and m["oracle"] > 0 and m["harness"] >= 0
    assert m["subject"] + m["oracle"] + m["inputs"] + m["harness"] <= m["wall"] * 1.0001
    parts = m["parts"]  # the harness's parts: each of its own, none more than the harness's seconds together
    assert set(parts) == set(sizes._PARTS) and all(v >= 0 for v in parts.values())
    assert parts["answers"] > 0 and parts["reference"] > 0 and parts["measures"] > 0  # embed_id declares an order
    assert sum(parts.values()) <= m["harness"] * 1.0001
    harness_row = sizes.point_rows("embed", "x", "chainer.embed_id", case, 1e6, m)[1]
    assert "the order reference's run" in harness_row.note and "the measures" in harness_row.note
    floats = sum(int(np.prod(s)) for s, dt in array_layout("embed", case.spec).values() if np.dtype(dt).kind == "f")
    assert m["elements"] == floats == 3000 * 200 * 2 + 30 * 40 * 200 and m["floor"] > 0
    # the isolated judge's floor: the subject's outputs (y, grad.W, the double backward's grad2.gy) moved once,
    # and the same reference run as the parts'
    iso = m["isolation"]
    assert iso["outputs"] == (2 * 30 * 40 * 200 + 3000 * 200) * 4 and iso["transfer"] > 0
    assert iso["reference"] == parts["reference"] and sizes.isolation_floor(m) == iso["transfer"] + iso["reference"]
    assert "the least a judge in another process pays here" in harness_row.note


def test_the_transfer_floor_moves_every_output_byte_and_leaves_no_file(tmp_path, monkeypatch) -> None:
    """The floor writes each array with bytes into one file, reads it back whole (the digest of what it mapped is
    the array's own), and leaves nothing behind, where it succeeds and where its read fails."""
    from harness.judge import digest as digest_mod
    from tools.bench import sizes

    arrays = {"y": np.arange(12, dtype=np.float32).reshape(3, 4), "empty": np.zeros((0, 4)),
              "gW": np.ones((5, 2), np.float64)}
    read: list = []
    real = digest_mod.digest_all
    monkeypatch.setattr(digest_mod, "digest_all", lambda arrs: read.append(real(arrs)) or read[-1])
    nbytes, seconds = sizes.transfer_floor(arrays, str(tmp_path))
    assert nbytes == 12 * 4 + 10 * 8 and seconds > 0
    assert read == [real([arrays["y"], arrays["gW"]])]  # the mapped bytes are the arrays' bits
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(digest_mod, "digest_all", lambda arrs: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        sizes.transfer_floor(arrays, str(tmp_path))
    assert list(tmp_path.iterdir()) == []
    assert sizes.transfer_floor({"none": np.zeros(0)}) == (0, 0.0)


def test_a_point_is_the_least_of_its_runs_with_the_first_runs_inputs(monkeypatch) -> None:
    """best_point takes each seconds figure at its least over the runs, the harness's parts from its least run,
    and the inputs from the first run (the one that drew them)."""
    from tools.bench import sizes

    runs = iter([
        {"subject": 0.9, "oracle": 0.2, "inputs": 0.5, "harness": 0.4, "parts": {"answers": 0.3}, "elements": 10,
         "floor": 0.01, "isolation": {"outputs": 8, "transfer": 0.05, "reference": 0.02}},
        {"subject": 0.3, "oracle": 0.25, "inputs": 0.0, "harness": 0.35, "parts": {"answers": 0.2}, "elements": 10,
         "floor": 0.02, "isolation": {"outputs": 8, "transfer": 0.04, "reference": 0.03}},
        {"subject": 0.5, "oracle": 0.1, "inputs": 0.0, "harness": 0.6, "parts": {"answers": 0.5}, "elements": 10,
         "floor": 0.03, "isolation": {"outputs": 8, "transfer": 0.06, "reference": 0.01}}])
    monkeypatch.setattr(sizes, "_point", lambda *a: next(runs))
    m = sizes.best_point(None, None, "s", None, runs=3)
    assert (m["subject"], m["oracle"], m["harness"], m["inputs"], m["floor"]) == (0.3, 0.1, 0.35, 0.5, 0.01)
    assert m["parts"] == {"answers": 0.2} and m["runs"] == 3
    assert m["isolation"] == {"outputs": 8, "transfer": 0.04, "reference": 0.01}


def test_a_size_points_rows_are_met_or_missed_by_their_own_targets() -> None:
    """The harness row is met at most the subject's seconds plus the slack, else missed; the inputs row the same
    against NumPy's draw; the oracle row carries the oracle's ratio."""
    from harness.core.cases import Case
    from tools.bench import sizes

    case = Case("lstm", 3, {"n_layers": 1, "hidden": 8, "in_size": 4, "lengths": [6, 5, 3]})
    base = {"subject": 0.2, "oracle": 0.1, "inputs": 0.05, "harness": 0.25, "wall": 0.6, "worst": 0.5,
            "elements": 1000, "floor": 0.01}
    rows = {r.item.rsplit(": ", 1)[1]: r for r in sizes.point_rows("lstm", "x", "chainer.NStepLSTM", case, 1e6, base)}
    assert set(rows) == {"oracle", "harness", "inputs"}
    assert rows["harness"].status == "met" and rows["inputs"].status == "met"
    assert rows["oracle"].ratio == pytest.approx(0.5) and rows["harness"].ratio == pytest.approx(1.25)
    over = sizes.point_rows("lstm", "x", "chainer.NStepLSTM", case, 1e6,
                            {**base, "harness": 0.2 + sizes._SLACK + 0.01, "inputs": 0.01 + sizes._SLACK + 0.01})
    assert {r.item.rsplit(": ", 1)[1]: r.status for r in over} == {"oracle": "ok", "harness": "missed",
                                                                    "inputs": "missed"}
    # the isolated judge's floor is said, and said to lie above the target only where it does
    below = {**base, "isolation": {"outputs": 2 ** 20, "transfer": 0.05, "reference": 0.0}}
    note = sizes.point_rows("lstm", "x", "chainer.NStepLSTM", case, 1e6, below)[1].note
    assert "pays here: 0.05 s (the subject's 1 MiB of outputs" in note and "reference" not in note
    assert "above the target" not in note
    above = {**base, "isolation": {"outputs": 2 ** 20, "transfer": 0.2, "reference": 0.15}}
    note = sizes.point_rows("lstm", "x", "chainer.NStepLSTM", case, 1e6, above)[1].note
    assert "pays here: 0.35 s" in note and "the order reference's run 0.15 s" in note and "above the target" in note


@pytest.mark.parametrize("n, text", [(800, "800 B"), (2048, "2 KiB"), (2650, "2.59 KiB"), (1023.9 * 1024, "1024 KiB"),
                                     (1_047_552, "1023 KiB"), (340 * 2 ** 20, "340 MiB"), (1.5 * 2 ** 30, "1.5 GiB")])
def test_byte_counts_read_as_a_person_writes_them(n: float, text: str) -> None:
    """Three significant digits at most below 100 of a unit, whole units above, never an exponent."""
    from tools.bench.common import fmt_bytes

    assert fmt_bytes(n) == text
