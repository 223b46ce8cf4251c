"""``harness audit``'s options record: parsed values from the command line and from Python, and the rules between
options refused alike by both.

Driver audits through the command line (``python -m harness audit``): the audit file it writes, 1 vs N BLAS
threads, kept arrays, the merge of two machines' audits, and ``--devices all`` on a machine without a GPU.

The audits here run small sub-corpora: the anchor LSTM case tagged ``blas-split`` (whose bits
differ between 1 and 2 OpenBLAS threads on the CI machine) and two anchor embed cases. Every
audit costs one worker start-up (about a second); the two BLAS-thread audits run as
``python -m harness audit`` subprocesses, since a thread count set by environment variable
takes effect only at process start. The tests of one module each (audit files, compare, merge, the in-process
run, the pages) are in suites/unit/outputs/audit/; the fixtures ``work``, ``small`` and ``whole`` in
suites/conftest.py."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from harness import cli
from harness.core.argcheck import Shard
from harness.core.corpus_files import write_corpus
from harness.core.errors import InvalidArgument
from harness.judge.digest import digest
from harness.outputs import audit as A
from harness.verbs.audit import AuditOptions
from harness.verbs.compare import CompareOptions, compare
from suites.audit_files import EMBED_SUBJECTS, _anchor


def test_the_record_built_from_the_command_line_holds_parsed_values(tmp_path):
    out = str(tmp_path / "a.json")
    got = cli.options_of(["audit", "--out", out, "--devices", "cpu", "--contexts", "default,blas1", "--subjects",
                          "chainer.embed_id,espnet.embed_id", "--shard", "1/3"])
    assert (got.devices, got.contexts, got.subjects, got.shard) == (
        ("cpu",), ("default", "blas1"), ("chainer.embed_id", "espnet.embed_id"), Shard(1, 3))
    assert AuditOptions(out=out, devices="cpu", contexts="default,blas1",
                        subjects="chainer.embed_id,espnet.embed_id", shard="1/3") == got
    assert AuditOptions(out=out).devices == ("all",) and AuditOptions(out=out).contexts == ("default",)


def test_a_profile_with_a_corpus_is_refused_alike(tmp_path, capsys):
    corpus, out = tmp_path / "c.jsonl", str(tmp_path / "a.json")
    corpus.write_text("")
    with pytest.raises(InvalidArgument, match="profile='dev' sizes the generated cases") as exc:
        AuditOptions(out=out, profile="dev", corpus=str(corpus))
    code = cli.main(["audit", "--out", out, "--profile", "dev", "--corpus", str(corpus)])
    line = capsys.readouterr().err.strip()
    assert code == 2 and str(exc.value) in line and len(line.splitlines()) == 1


def test_one_repetition_is_refused_from_python_and_from_the_command_line(tmp_path, capsys):
    out = str(tmp_path / "a.json")
    with pytest.raises(InvalidArgument, match="repeats=1 must be >= 2"):
        AuditOptions(out=out, repeats=1)
    with pytest.raises(SystemExit) as ended:
        cli.main(["audit", "--out", out, "--repeats", "1"])
    assert ended.value.code == 2 and "repeats=1 must be >= 2" in capsys.readouterr().err


THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS", "MKL_NUM_THREADS",
               "BLIS_NUM_THREADS")


def _threads(au: A.Audit) -> int:
    return int(au.environment["blas"][0]["num_threads"]) if au.environment.get("blas") else 1


@pytest.fixture(scope="module")
def blas_pair(work, small, harness):
    """Audit A at the machine's default BLAS threads, B with OPENBLAS/OMP_NUM_THREADS=1, both via the
    command line, both keeping arrays in one shared directory."""
    base = dict.fromkeys(THREAD_VARS)  # unset: the machine's default
    one = {**base, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    keep = work / "arrays"
    out = {}
    for name, env in (("blasN", base), ("blas1", one)):
        path = work / f"{name}.json"
        p = harness("audit", "--corpus", str(small), "--out", str(path), "--devices", "cpu",
                     "--keep-arrays", str(keep), "--quiet", env=env)
        out[name] = (p, path)
    return out, keep


# ---- (b) + (f) 1 vs N BLAS threads, through the command line ---------------------------------------
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_cli_audit_exits_0_and_writes_valid_json(blas_pair):
    runs, _ = blas_pair
    for proc, path in runs.values():
        assert proc.returncode == 0, proc.stderr
        data = json.loads(path.read_text())
        assert data["format"] == "harness-audit" and data["version"] == 1
        assert data["settings"]["devices"] == ["cpu"] and data["settings"]["repeats"] == 2
        assert {e["device"] for e in data["entries"]} == {"cpu"}
        assert "audit:" in proc.stdout


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores for BLAS to use 2 threads")
def test_blas_threads_change_the_lstm_bits_and_are_named(blas_pair, capsys, work):
    runs, _ = blas_pair
    a, b = A.load_audit(runs["blasN"][1]), A.load_audit(runs["blas1"][1])
    assert a.environment["blas"][0]["num_threads"] >= 2
    assert b.environment["blas"][0]["num_threads"] == 1
    assert b.environment["env"]["OPENBLAS_NUM_THREADS"] == "1"
    cmp = A.compare_audits(a, b)
    v = cmp.verdicts()
    for s in ("chainer.NStepLSTM", "chainer.n_step_lstm"):
        assert v[s] == "changed within tolerance", (s, v)
        row = cmp.rows[cmp.rows["subject"] == s].iloc[0]
        assert row["changed_cases"] == 1 and row["changed"] > 0 and row["max_ulp"] > 0
    for s in (*EMBED_SUBJECTS, "oracle.embed"):
        assert v[s] == "identical", (s, v)
    # The float64 oracle multiplies with BLAS too: its bits may move, but only by rounding.
    assert v["oracle.lstm"] in ("identical", "changed within tolerance")
    fields = set(cmp.environment["field"])
    assert "blas.0.num_threads" in fields and "env.OPENBLAS_NUM_THREADS" in fields
    assert cmp.environment.iloc[0]["field"] == "blas.0.num_threads"  # the likeliest cause is listed first
    assert "blas.0.num_threads" not in {d.field for d in A.environment_diff(a.environment, a.environment)}

    out = work / "cmp"
    assert compare(CompareOptions(str(runs["blasN"][1]), str(runs["blas1"][1]), out=str(out))) == 0
    printed = capsys.readouterr().out
    assert "| chainer.NStepLSTM" in printed and "changed within tolerance" in printed
    assert "num_threads" in printed and "OPENBLAS_NUM_THREADS" in printed
    html = (out / "compare.html").read_text()
    assert "data:image/png;base64," in html and "<table" in html and "OPENBLAS_NUM_THREADS" in html
    csv = pd.read_csv(out / "compare.csv")
    assert set(csv["subject"]) == set(cmp.rows["subject"]) and "verdict" in csv
    assert "num_threads" in (out / "compare.md").read_text()


# ---- (e) kept arrays -------------------------------------------------------------------------------
def test_keep_arrays_npz_loads_without_pickle_and_compare_measures_ulp(blas_pair):
    runs, keep = blas_pair
    a, b = A.load_audit(runs["blasN"][1]), A.load_audit(runs["blas1"][1])
    assert a.data["arrays_dir"] == str(keep.resolve()) and a.settings["keep_arrays"] is True
    names = {e["array_file"] for au in (a, b) for e in au.entries}
    assert None not in names and len(names) == len(a.entries) + len(b.entries)  # one shared dir, no clash
    for e in a.entries:
        with np.load(keep / e["array_file"], allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        assert set(arrays) == set(e["tensors"])
        for name, t in e["tensors"].items():
            assert digest(arrays[name]) == t["digest"]
            assert list(arrays[name].shape) == t["shape"] and arrays[name].dtype.name == t["dtype"]
    cmp = A.compare_audits(a, b)
    rows = cmp.rows.set_index("subject")
    assert rows["arrays_kept"].all()
    for s in EMBED_SUBJECTS:
        assert rows.loc[s, "max_ulp"] == 0 and rows.loc[s, "max_rel"] == 0
    if (os.cpu_count() or 1) >= 2:
        lstm = rows.loc["chainer.NStepLSTM"]
        assert 0 < lstm["max_ulp"] < float("inf") and lstm["max_rel"] > 0 and lstm["max_abs"] < 1e-3


def test_audits_without_arrays_say_how_much_from_the_sketches(whole, blas_pair):
    runs, _ = blas_pair
    cmp = A.compare_audits(whole[0], A.load_audit(runs["blas1"][1]))
    rows = cmp.rows.set_index("subject")
    assert not rows["arrays_kept"].any() and rows["max_ulp"].isna().all()
    if _threads(whole[0]) >= 2:
        assert cmp.verdicts()["chainer.NStepLSTM"] == "changed (sampled)"
        lstm = rows.loc["chainer.NStepLSTM"]
        # "by how much" without arrays: the sampled elements' ULP distances and the norm's relative change
        assert lstm["sample_max_ulp"] >= lstm["sample_median_ulp"] >= 0 and 0 < lstm["norm_rel_change"] < 1e-3
        assert "changed (sampled)" in cmp.to_markdown()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores for BLAS to use 2 threads")
def test_merge_marks_the_machine_whose_bits_differ(whole, blas_pair):
    runs, _ = blas_pair
    if _threads(whole[0]) < 2:
        pytest.skip("this process's BLAS runs 1 thread (OPENBLAS_NUM_THREADS set?)")
    res = A.merge_audits([whole[0].path, runs["blas1"][1]])
    m = res.matrix.set_index("subject")
    assert not m.loc["chainer.NStepLSTM", "consistent"] and m.loc["chainer.EmbedID", "consistent"]
    cells = [m.loc["chainer.NStepLSTM", c] for c in res.columns]
    assert cells[0][:8] != cells[1][:8] and any(c.endswith(" !") for c in cells)
    assert any("x1" in c for c in res.columns)  # the label carries the BLAS thread count


# ---- (f) devices all on a machine without a GPU ----------------------------------------------------
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_cli_audit_devices_all_records_skipped_gpu_entries(work, harness):
    corpus = work / "tiny.jsonl"
    write_corpus([_anchor("ignore:V-1")], str(corpus))
    out = work / "all.json"
    p = harness("audit", "--corpus", str(corpus), "--out", str(out), "--devices", "all",
                 "--subjects", "chainer.embed_id,oracle.embed", "--quiet")
    assert p.returncode == 0, p.stderr
    au = A.load_audit(out)
    cpu = [e for e in au.entries if e["device"] == "cpu"]
    gpu = [e for e in au.entries if e["device"] != "cpu"]
    assert {e["subject"] for e in cpu} == {"chainer.embed_id", "oracle.embed"}
    assert all(e["status"] == "ok" for e in cpu)
    assert all(e["subject"] != "oracle.embed" for e in gpu)  # the oracle runs on CPU only
    if not au.environment["gpu"]["available"]:
        assert gpu and all(e["status"] == "skipped" and e["skip_reason"] for e in gpu)
        assert all(e["tensors"] == {} and e["repeats_agreed"] is None for e in gpu)
