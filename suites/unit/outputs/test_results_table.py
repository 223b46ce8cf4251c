"""The report tables (harness/outputs/results_table.py, tables.py, report_files.py) on a real tiny campaign and
on hand-made task records.

The real campaign runs the two controls, the embed oracle and ``chainer.embed_id`` on a
collision-heavy embed case (3 ids, 200 lookups: the shuffled scatter-add changes bits) plus a
bad case whose id 9 is out of range for ``vocab=3`` (Chainer raises ``IndexError`` in forward,
which the case expects), in the ``default`` and ``blas1`` contexts on the CPU. The hand-made
directory feeds the campaign's own :func:`outcome_of` with chosen repetitions, so its records are
exactly what a campaign writes, and covers what a CPU-only run cannot show: a GPU row against
its CPU row, a result beyond the oracle tolerance, an undeclared divergence, a partial task.
"""

from __future__ import annotations

import json
import os
import shlex

import numpy as np
import pandas as pd
import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.corpus_files import write_corpus
from harness.core.devices import CPU
from harness.core.fileio import atomic_npz
from harness.core.records import VERDICTS
from harness.execute.campaign import Campaign, CampaignOptions, array_file, load_tasks
from harness.execute.driver import load_run
from harness.execute.measure_pass import campaign_cases
from harness.execute.plan import Task, plan
from harness.execute.task_runs import outcome_of
from harness.judge.findings import Classification, Origin, loads, with_cause
from harness.outputs import report_files, results_table, tables, terminal
from harness.outputs.assemble import campaign_findings
from harness.subjects.base import ErrorInfo, RunResult
from harness.subjects.registry import get_subject

GOOD = Case("embed", 1, {"vocab": 3, "width": 4, "ids_shape": [200], "id_kind": "collision", "distinct": 2})
BAD = Case("embed", 2, {"vocab": 3, "width": 2, "ids_shape": [4], "inject": [{"array": "x", "index": 0, "value": 9}]},
           expect={"kind": "raises", "errors": ["IndexError"]})
SUBJECTS = ("control.nondeterministic", "control.deterministic", "oracle.embed", "chainer.embed_id")


def _text(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _row(df: pd.DataFrame, **where: str) -> pd.Series:
    m = np.ones(len(df), bool)
    for k, v in where.items():
        m &= (df[k] == v).to_numpy()
    sel = df[m]
    assert len(sel) == 1, (where, len(sel))
    return sel.iloc[0]


# --------------------------------------------------------------------------- a real campaign


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict:
    d = str(tmp_path_factory.mktemp("campaign"))
    camp = Campaign(d, CampaignOptions(repeats=2, fresh=0, quiet=True))
    camp.write_inputs([GOOD, BAD], {"test": True})
    tasks = plan([GOOD, BAD], [get_subject(n) for n in SUBJECTS], [CPU],
                 [get_context("default"), get_context("blas1")])
    camp.run(tasks)
    env = {"python": {"version": "3.x", "implementation": "CPython"}, "gpu": {"reason": "none"},
           "blas": [{"user_api": "blas", "num_threads": 1}], "problems": []}
    run = load_run(d)
    measures = run.measures
    found = [with_cause(f, f"cause of {f.kind}") for f in _found(d, measures)]
    written = report_files.write_report(run, environment=env, found=found)
    results = results_table.results_frame(run)
    return {"dir": d, "written": written, "env": env, "results": results, "measures": measures,
            "summary": tables.summary_frame(results), "findings": tables.findings_frame(_found(d, measures)),
            "found": found}


def _found(d: str, measures=None) -> list:
    """The campaign's findings, as the report assembles them."""
    measures = load_run(d).measures if measures is None else measures
    return campaign_findings(d, measures, load_tasks(d), campaign_cases(d), Origin(d))


def test_results_columns_in_order(real: dict) -> None:
    r = real["results"]
    documented = ["case_id", "family", "subject", "device", "context", "tensor", "dtype", "shape", "repeats",
                  "bitwise_reproducible", "n_diff", "frac_diff", "max_ulp_repeat", "first_diff_index", "digest",
                  "n_unique", "cross_device_max_ulp", "cross_device_identical", "cross_context_max_ulp",
                  "cross_context_identical", "oracle_max_abs", "oracle_max_rel", "oracle_max_ulp",
                  "within_tolerance", "tolerance", "nan_count", "inf_count",
                  "declared_nondeterministic", "chainer_declared", "observed_nondeterministic", "status", "error",
                  "bad_input", "case_size", "error_ratio", "verdict", "contract"]
    assert list(r.columns[:len(documented)]) == documented
    assert list(r.columns) == list(results_table.RESULT_COLUMNS)
    # every task of the plan is there: 4 subjects x good case in default, 3 in blas1 (no oracle),
    # chainer.embed_id on the bad case in both contexts
    assert r["key"].nunique() == 4 + 3 + 2


def test_controls_split(real: dict) -> None:
    r = real["results"]
    nd = _row(r, subject="control.nondeterministic", tensor="grad.W", context="default")
    det = _row(r, subject="control.deterministic", tensor="grad.W", context="default")
    assert not nd["bitwise_reproducible"] and nd["observed_nondeterministic"]
    assert nd["max_ulp_repeat"] > 0 and nd["n_diff"] > 0 and nd["first_diff_index"] != ""
    assert nd["n_unique"] == 2 and nd["repeats"] == 2
    assert nd["declared_nondeterministic"]  # the control declares itself
    assert nd["finding"] == "declared and observed"
    assert det["bitwise_reproducible"] and not det["observed_nondeterministic"]
    assert det["max_ulp_repeat"] == 0 and det["first_diff_index"] == ""
    assert not det["declared_nondeterministic"] and det["finding"] == "reproducible"
    s = real["summary"]
    snd = _row(s, subject="control.nondeterministic", device="cpu", context="default")
    assert snd["finding"] == "declared and observed"
    assert snd["finding"] != "observed but not declared"
    assert snd["declared_subject"] == "nondeterministic"
    assert _row(s, subject="control.deterministic", device="cpu", context="default")["finding"] == "reproducible"
    assert (s["finding"] != "observed but not declared").all()


def test_oracle_columns(real: dict) -> None:
    r = real["results"]
    for tensor in ("y", "grad.W", "grad2.gy"):
        row = _row(r, subject="chainer.embed_id", tensor=tensor, context="default", case_id=GOOD.id)
        assert row["within_tolerance"], tensor
        assert np.isfinite(row["oracle_max_abs"]) and np.isfinite(row["oracle_max_rel"])
        assert row["oracle_max_rel"] < 1e-3 and 0 <= row["error_ratio"] <= 1.0
        assert row["tolerance"].startswith("up to ") and "allowed (" in row["tolerance"]
        assert row["verdict"] in ("within tolerance", "bit-identical") and "chainer.embed_id on cpu" in row["contract"]
    gw = _row(r, subject="chainer.embed_id", tensor="grad.W", context="default", case_id=GOOD.id)
    assert "summed terms" in gw["tolerance"]  # grad.W rows sum one term per occurrence of an id
    # the blas1 rows are measured against the same cpu/default oracle too
    assert _row(r, subject="chainer.embed_id", tensor="grad.W", context="blas1")["within_tolerance"]
    # the oracle's own rows and the controls' tensors the oracle lacks get no oracle error
    orc = r[r["subject"] == "oracle.embed"]
    assert len(orc) == 3 and orc["oracle_max_rel"].isna().all() and orc["within_tolerance"].isna().all()
    assert (orc["tolerance"] == "").all()
    assert orc["dtype"].eq("float64").all()


def test_cross_context_and_device(real: dict) -> None:
    r = real["results"]
    t = r[r["tensor"] != ""]
    default = t[t["context"] == "default"]
    assert default["cross_context_max_ulp"].isna().all() and default["cross_context_identical"].isna().all()
    det = _row(r, subject="control.deterministic", tensor="grad.W", context="blas1")
    assert det["cross_context_identical"] and det["cross_context_max_ulp"] == 0
    emb = _row(r, subject="chainer.embed_id", tensor="y", context="blas1")
    assert emb["cross_context_identical"]
    # a CPU-only campaign: no cross-device measure anywhere
    assert t["cross_device_max_ulp"].isna().all() and t["cross_device_identical"].isna().all()


def test_error_row_for_bad_case(real: dict) -> None:
    r = real["results"]
    rows = r[r["case_id"] == BAD.id]
    assert len(rows) == 2  # one row per task (two contexts), no tensors
    for _, row in rows.iterrows():
        assert row["tensor"] == "" and row["status"] == "error" and bool(row["bad_input"])
        assert row["error"].startswith("IndexError in forward: ")
        assert "out of bounds" in row["error"]
        assert row["error_type"] == "IndexError" and bool(row["error_expected"])
        assert pd.isna(row["bitwise_reproducible"]) and pd.isna(row["observed_nondeterministic"])
        assert row["case_size"] == BAD.size()
    s = real["summary"]
    assert _row(s, subject="chainer.embed_id", device="cpu", context="default")["errors"] == 1
    f = real["findings"]
    err = f[f["kind"] == "expected error"]
    # one finding per subject family x device x error type, whatever the context it showed in, naming its case
    assert len(err) == 1 and err["detail"].str.contains("IndexError").all()
    assert (err["case_id"] == BAD.id).all() and (err["verdict"] == "expected error").all()


def test_summary_traceable_to_results(real: dict) -> None:
    r, s = real["results"], real["summary"]
    assert list(s.columns) == list(tables.SUMMARY_COLUMNS)
    assert len(s) == r.groupby(["subject", "device", "context"]).ngroups
    for _, row in s.iterrows():
        g = r[(r["subject"] == row["subject"]) & (r["device"] == row["device"]) & (r["context"] == row["context"])]
        t = g[g["tensor"] != ""]
        tasks = g.drop_duplicates("key")
        assert row["tasks"] == len(tasks) and row["tensors"] == len(t)
        assert row["cases_run"] == tasks.loc[tasks["status"] != "skipped", "case_id"].nunique()
        if len(t):
            assert row["bitwise_share_tensors"] == pytest.approx(t["bitwise_reproducible"].astype(float).mean())
            per_task = t.groupby("key")["bitwise_reproducible"].all().astype(float).mean()
            assert row["bitwise_share_tasks"] == pytest.approx(per_task)
            assert row["worst_max_ulp_repeat"] == t["max_ulp_repeat"].max()
            assert row["observed_tensors"] == int((~t["bitwise_reproducible"].astype(bool)).sum())
        assert row["nan_count"] == t["nan_count"].fillna(0).sum()
        assert row["errors"] == ((tasks["error"] != "") & (tasks["status"] != "skipped")).sum()
        assert row["skipped"] == (tasks["status"] == "skipped").sum()
        ok = t["within_tolerance"].dropna()
        assert row["oracle_compared"] == len(ok)
        if len(ok):
            assert row["share_within_tolerance"] == pytest.approx(ok.astype(float).mean())
            assert row["worst_error_ratio"] == pytest.approx(t["error_ratio"].max())
        else:
            assert np.isnan(row["share_within_tolerance"])
    # and the written summary.csv is the same table
    csv = pd.read_csv(os.path.join(real["dir"], "summary.csv"))
    assert csv["tasks"].tolist() == s["tasks"].tolist()
    assert csv["finding"].tolist() == s["finding"].tolist()
    assert len(pd.read_csv(os.path.join(real["dir"], "results.csv.gz"))) == len(r)


def test_findings_replay_commands(real: dict) -> None:
    f = real["findings"]
    assert list(f.columns) == list(tables.FINDING_COLUMNS)
    div = _row(f, kind="not reproducible run to run", subject="control.nondeterministic", context="default")
    assert div["worst_tensor"] == "grad.W" and "ULP" in div["detail"] and div["verdict"] == "diverged as allowed"
    assert div["classification"] == "control" and div["tensors_differing"] == 1
    for _, row in f.iterrows():
        argv = shlex.split(row["replay"])
        assert argv[1:4] == ["-m", "harness", "replay"]
        assert argv[argv.index("--subject") + 1] == row["subject"]
        if row["kind"] == "cross-context difference":
            assert argv[argv.index("--contexts") + 1] == f"{row['other']},{row['context']}"
        else:
            assert argv[argv.index("--device") + 1] == row["device"]
            assert argv[argv.index("--context") + 1] == row["context"]
        assert os.path.isfile(argv[4]) and argv[4].endswith(f"{row['case_id']}.json")
        with open(argv[4], encoding="utf-8") as fh:
            assert Case.from_json(fh.read()).id == row["case_id"]
    # the causes given to the findings are in the written findings.csv, and findings.json holds the records
    csv = pd.read_csv(os.path.join(real["dir"], "findings.csv"), keep_default_na=False)
    assert (csv["root_cause"] == "cause of " + csv["kind"]).all() and len(csv) == len(real["found"])
    with open(os.path.join(real["dir"], "findings.json"), encoding="utf-8") as fh:
        assert [x.id for x in loads(fh.read())] == [x.id for x in real["found"]]
    assert (f["root_cause"] == "").all()  # none given here


def test_report_files(real: dict) -> None:
    d, w = real["dir"], real["written"]
    for name in ("results.csv.gz", "summary.csv", "cells.csv", "findings.csv", "summary.md", "summary.html",
                 "environment.json", "verdicts.png", "divergence.png", "error_vs_size.png"):
        assert w[name] == os.path.join(d, name) and os.path.getsize(w[name]) > 0
    try:
        import pyarrow  # noqa: F401
        assert "results.parquet" in w
    except ImportError:
        assert "results.parquet" not in w and not os.path.exists(os.path.join(d, "results.parquet"))
    assert not [n for n in os.listdir(d) if n.endswith(".tmp")]  # atomic writes leave no temp file
    with open(w["environment.json"], encoding="utf-8") as fh:
        assert json.load(fh) == real["env"]
    md = _text(w["summary.md"])
    assert "| subject" in md and "control.nondeterministic" in md and "python -m harness replay" in md
    assert "python.version" in md and "blas.0.num_threads" in md
    html = _text(w["summary.html"])
    assert html.count("data:image/png;base64,") == 3 and "<table" in html and 'id="verdict"' in html
    assert "diverged as allowed" in html and "-m harness replay" in html and "gpu.reason" in html
    for png in ("verdicts.png", "divergence.png", "error_vs_size.png"):
        assert _bytes(w[png])[:8] == b"\x89PNG\r\n\x1a\n"
    text = terminal.terminal_summary(real["summary"], ["a headline"])
    assert text.startswith("a headline") and "control.nondeterministic" in text and "diverged as allowed" in text
    cells = pd.read_csv(w["cells.csv"], keep_default_na=False)
    assert list(cells.columns) == list(tables.CELL_COLUMNS) and set(cells["verdict"]) <= set(VERDICTS)


def test_tables_load_no_array(real: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Measure once: the tables read measures.jsonl; building them loads no array and measures nothing."""
    import harness.execute.measure_pass as measures_mod

    calls: list[str] = []
    monkeypatch.setattr(np, "load", lambda *a, **k: calls.append(a[0]) or pytest.fail("an array was loaded"))
    monkeypatch.setattr(measures_mod, "measure_task", lambda *a, **k: pytest.fail("a task was measured again"))
    r = results_table.results_frame(load_run(real["dir"]))
    assert len(r) and not calls
    assert (r.loc[r["tensor"] != "", "verdict"] != "").all()


# --------------------------------------------------------------------------- hand-made records


def _ok(subject: str, case: Case, device: str, context: str, arrays: dict, warnings: tuple = ()) -> RunResult:
    return RunResult(subject, case.id, device, context, "ok", arrays=arrays, declared_warnings=warnings)


def camp_record(camp: Campaign, task: Task, res: list) -> dict:
    """The task record a campaign writes for these run results (its arrays saved as the campaign saves them)."""
    outcome = outcome_of(task, res)
    rec = outcome.record.to_dict()
    if outcome.arrays:
        rec["array_file"] = array_file(task.key)
        atomic_npz(os.path.join(camp.dir, "arrays", rec["array_file"]), outcome.arrays)
    return rec


@pytest.fixture
def synthetic(tmp_path) -> str:
    """Records made by the campaign's own summary of chosen repetitions."""
    d = str(tmp_path / "synthetic")
    camp = Campaign(d, CampaignOptions(repeats=2, fresh=0, quiet=True))
    write_corpus([GOOD], os.path.join(d, "corpus.jsonl"))
    w = np.arange(12, dtype=np.float32).reshape(3, 4) + 0.5
    w2 = w.copy()
    w2.flat[5] = np.nextafter(w2.flat[5], np.float32(100))
    far = w.copy()
    far.flat[0] += 1.0
    runs = [
        ("oracle.embed", "cpu", "default", [{"grad.W": w.astype(np.float64)}] * 2, ()),
        ("chainer.embed_id", "cpu", "default", [{"grad.W": w, "y": w}] * 2, ()),
        # GPU: reproducible, one ULP off the CPU; Chainer warned (atomicAdd)
        ("chainer.embed_id", "gpu:0", "default", [{"grad.W": w2, "y": w}] * 2, ("atomicAdd",)),
        # a deterministic-declared subject whose repeats differ: observed but not declared
        ("control.deterministic", "cpu", "default", [{"grad.W": w}, {"grad.W": w2}], ()),
        # blas1: one element far from the oracle, and different from default
        ("chainer.embed_id", "cpu", "blas1", [{"grad.W": far, "y": w}] * 2, ()),
    ]
    with open(os.path.join(d, "tasks.jsonl"), "w", encoding="utf-8") as f:
        for subject, device, context, reps, warns in runs:
            task = Task(GOOD, subject, device, context)
            res = [("pool", _ok(subject, GOOD, device, context, a, warns)) for a in reps]
            f.write(json.dumps(camp_record(camp, task, res), sort_keys=True) + "\n")
        # a partial task: one run ok, one crashed
        task = Task(GOOD, "control.nondeterministic", "cpu", "default")
        res = [("pool", _ok(task.subject, GOOD, "cpu", "default", {"grad.W": w})),
               ("fresh:0", RunResult(task.subject, GOOD.id, "cpu", "default", "crashed",
                                     error=ErrorInfo("WorkerError", "worker died (signal 11)", "setup")))]
        f.write(json.dumps(camp_record(camp, task, res), sort_keys=True) + "\n")
        # a skipped task
        task = Task(GOOD, "control.nondeterministic", "gpu:0", "default")
        res = [("pool", RunResult(task.subject, GOOD.id, "gpu:0", "default", "skipped", skip_reason="no GPU: test"))]
        f.write(json.dumps(camp_record(camp, task, res), sort_keys=True) + "\n")
        f.write('{"torn line')  # an interrupted campaign's last line is ignored
    return d


def test_synthetic_cross_device_and_oracle(synthetic: str) -> None:
    r = results_table.results_frame(load_run(synthetic))
    gpu = _row(r, subject="chainer.embed_id", device="gpu:0", tensor="grad.W")
    assert gpu["bitwise_reproducible"] and not gpu["cross_device_identical"] and gpu["cross_device_max_ulp"] == 1
    assert gpu["chainer_declared"] == "atomicAdd" and gpu["finding"] == "declared, not observed"
    assert gpu["device_kind"] == "gpu" and pd.isna(gpu["cross_context_max_ulp"])
    assert _row(r, subject="chainer.embed_id", device="gpu:0", tensor="y")["cross_device_identical"]
    cpu = _row(r, subject="chainer.embed_id", device="cpu", context="default", tensor="grad.W")
    assert pd.isna(cpu["cross_device_max_ulp"]) and cpu["within_tolerance"] and cpu["oracle_max_abs"] == 0.0
    assert pd.isna(_row(r, subject="chainer.embed_id", device="cpu", context="default", tensor="y")["oracle_max_rel"])
    blas = _row(r, subject="chainer.embed_id", context="blas1", tensor="grad.W")
    assert not blas["within_tolerance"] and blas["oracle_max_abs"] == pytest.approx(1.0)
    assert not blas["cross_context_identical"] and blas["cross_context_max_ulp"] > 0
    part = _row(r, subject="control.nondeterministic", device="cpu", tensor="grad.W")
    assert part["status"] == "partial" and part["error"] == "WorkerError in setup: worker died (signal 11)"
    skip = _row(r, subject="control.nondeterministic", device="gpu:0")
    assert skip["tensor"] == "" and skip["error"] == "skipped: no GPU: test" and skip["status"] == "skipped"


def test_synthetic_findings_order(synthetic: str) -> None:
    r = results_table.results_frame(load_run(synthetic))
    s = tables.summary_frame(r)
    assert _row(s, subject="control.deterministic", device="cpu", context="default")["finding"] == \
        "observed but not declared"
    assert _row(s, subject="chainer.embed_id", device="gpu:0", context="default")["finding"] == \
        "declared, not observed"
    assert _row(s, subject="chainer.embed_id", device="gpu:0", context="default")["declared_chainer"] == "atomicAdd"
    assert _row(s, subject="chainer.embed_id", device="gpu:0", context="default")["worst_cross_device_ulp"] == 1
    assert _row(s, subject="control.nondeterministic", device="gpu:0", context="default")["finding"] == "no data"
    assert _row(s, subject="control.nondeterministic", device="cpu", context="default")["errors"] == 1
    f = tables.findings_frame(_found(synthetic))
    # failing first, the implementations under test before the controls: chainer.embed_id's blas1 error is
    # beyond its tolerance; the deterministic control breaks its own contract: a contract broken too, after it
    assert f.iloc[0]["kind"] == "beyond oracle tolerance" and f.iloc[0]["subject"] == "chainer.embed_id"
    assert f.iloc[0]["classification"] == "contract broken"
    ctl = f[(f["subject"] == "control.deterministic") & (f["kind"] == "not reproducible run to run")].iloc[0]
    assert ctl["verdict"] == "broken" and ctl["detail"].startswith("1 tensor(s) differ, worst grad.W 1 ULP")
    assert ctl["classification"] == "contract broken" and ctl.name > 0
    kinds = list(f["kind"])
    assert {"beyond oracle tolerance", "cross-device difference", "cross-context difference", "error"} <= set(kinds)
    order = [list(Classification).index(Classification(c)) for c in f["classification"]]
    assert order == sorted(order)
    err = _row(f, kind="error")
    assert "WorkerError" in err["detail"] and err["verdict"] == "error"
    assert err["classification"] in ("new library defect", "control")
    assert "skipped" not in " ".join(f["detail"])  # an unavailable GPU is not a finding
    assert os.path.isfile(os.path.join(synthetic, "cases", f"{GOOD.id}.json"))


def test_empty_campaign(tmp_path) -> None:
    d = str(tmp_path / "empty")
    os.makedirs(d)
    r = results_table.results_frame(load_run(d))
    assert len(r) == 0 and list(r.columns) == list(results_table.RESULT_COLUMNS)
    s = tables.summary_frame(r)
    assert len(s) == 0 and list(s.columns) == list(tables.SUMMARY_COLUMNS)
    assert len(tables.findings_frame(_found(d))) == 0
    assert terminal.terminal_summary(s) == "no tasks"
    w = report_files.write_report(load_run(d), environment={})
    for name in ("verdicts.png", "divergence.png", "error_vs_size.png", "summary.html", "summary.md"):
        assert os.path.getsize(w[name]) > 0
    assert "_none_" in _text(w["summary.md"])


def test_flatten_environment() -> None:
    env = report_files.flatten_environment({"a": {"b": 1, "c": [1, 2]}, "d": [{"x": None}], "e": "text", "f": {}})
    assert dict(zip(env["key"], env["value"])) == {"a.b": "1", "a.c": "[1, 2]", "d.0.x": "null", "e": "text",
                                                   "f": "{}"}


def test_the_report_is_written_from_the_run_in_memory(real, monkeypatch, tmp_path) -> None:
    """write_report reads no record, corpus or measure file back: the in-memory run is the one source."""
    import builtins

    run = load_run(real["dir"])
    real_open = builtins.open
    refused: list[str] = []

    def guarded(file, mode="r", *a, **k):
        name = os.path.basename(str(file))
        if "r" in mode and name.split(".")[0] in ("tasks", "corpus", "measures", "runs"):
            refused.append(name)
            raise AssertionError(f"the report read {name} back instead of using the run in memory")
        return real_open(file, mode, *a, **k)

    monkeypatch.setattr(builtins, "open", guarded)
    frames: dict = {}
    written = report_files.write_report(run, environment={}, found=real["found"], frames=frames)
    assert os.path.getsize(written["summary.html"]) > 0
    assert len(frames["results"]) == len(real["results"]) and len(frames["findings"]) == len(real["found"])
    assert refused == []
