"""Driver audits (harness/outputs/audit/): audit files, compare, merge, shards, and the committed corpus.

The audits here run small sub-corpora: the anchor LSTM case tagged ``blas-split`` (whose bits
differ between 1 and 2 OpenBLAS threads on the CI machine) and two anchor embed cases. Every
audit costs one worker start-up (about a second); the two BLAS-thread audits run as
``python -m harness audit`` subprocesses, since a thread count set by environment variable
takes effect only at process start.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.core.cases import corpus_digest, load_corpus, write_corpus
from harness.core.errors import AuditFileError, InvalidArgument
from harness.generate.corpora import anchor_cases
from harness.judge.digest import DIGEST_ALGORITHM, digest
from harness.judge.sketch import SAMPLE, tensor_sketch
from harness.outputs import audit as A
from harness.verbs.compare import CompareOptions, MergeOptions, compare, merge

ROOT = Path(__file__).resolve().parents[1]
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS", "MKL_NUM_THREADS",
               "BLIS_NUM_THREADS")
EMBED_SUBJECTS = ("chainer.embed_id", "chainer.EmbedID", "espnet.embed_id", "espnet.EmbedID")
BLAS_SPLIT = next(c for c in anchor_cases() if "blas-split" in c.tags)


def _anchor(tag: str):
    return next(c for c in anchor_cases() if tag in c.tags)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("audit")


@pytest.fixture(scope="module")
def small(work) -> Path:
    """blas-split LSTM + two embed anchors; by id, shard 1/2 and shard 2/2 are both non-empty."""
    cases = [_anchor("ignore:-1"), _anchor("ignore:V-1"), BLAS_SPLIT]
    path = work / "small.jsonl"
    write_corpus(cases, str(path))
    return path


@pytest.fixture(scope="module")
def whole(work, small):
    """Two in-process audits of the small corpus with the same settings, on this machine."""
    return [A.load_audit(_run(small, work / f"whole{i}.json")) for i in (1, 2)]


def _threads(au: A.Audit) -> int:
    return int(au.environment["blas"][0]["num_threads"]) if au.environment.get("blas") else 1


def _run(corpus: Path, out: Path, **kw) -> Path:
    A.run_audit(str(corpus), kw.pop("devices", "cpu"), kw.pop("contexts", "default"), str(out), quiet=True, **kw)
    return out


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


# ---- the committed corpus ------------------------------------------------------------------------
def test_committed_corpus_covers_every_family_and_kind():
    assert A.DEFAULT_CORPUS == ROOT / "suites" / "corpus" / "audit.jsonl"
    cases = load_corpus(str(A.DEFAULT_CORPUS))
    assert 20 <= len(cases) <= 32 and len({c.id for c in cases}) == len(cases)
    assert {c.family for c in cases} == {"embed", "lstm", "pipeline"}
    assert {c.id for c in anchor_cases()} <= {c.id for c in cases}
    ignore = [c for c in cases if c.spec.get("ignore_label") is not None]
    assert {c.family for c in ignore} == {"embed", "pipeline"}
    assert len({c.spec["ignore_label"] for c in ignore}) >= 3
    ragged = [c for c in cases if "lengths" in c.spec and len(set(c.spec["lengths"])) > 1]
    assert {c.family for c in ragged} == {"lstm", "pipeline"}
    readme = (ROOT / "suites" / "corpus" / "README.md").read_text()
    assert "seed=7" in readme and corpus_digest(cases) in readme and "write_corpus(" in readme


# ---- (a) same machine, same settings -----------------------------------------------------------
def test_same_machine_same_settings_compare_identical(whole):
    a, b = whole
    assert a.corpus["digest"] == b.corpus["digest"] and a.corpus["cases"] == 3 and a.corpus["shard"] is None
    assert all(e["status"] == "ok" and e["repeats_agreed"] is True for e in a.entries)
    cmp = A.compare_audits(a, b)
    assert set(cmp.verdicts().values()) == {"identical"}
    assert {"chainer.NStepLSTM", "chainer.n_step_lstm", "oracle.lstm", *EMBED_SUBJECTS} <= set(cmp.verdicts())
    assert cmp.rows["changed"].sum() == 0 and cmp.rows["tensors"].sum() > 0
    assert cmp.environment.empty and not cmp.warnings
    assert "identical" in cmp.to_markdown()


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


# ---- (c) shards ----------------------------------------------------------------------------------
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_merged_shards_give_the_digests_of_the_whole_run(work, small, whole, capsys):
    shards = [A.load_audit(_run(small, work / f"shard{i}.json", shard=f"{i}/2")) for i in (1, 2)]
    assert [s.corpus["shard"] for s in shards] == ["1/2", "2/2"]
    assert all(s.corpus["full_digest"] == whole[0].corpus["digest"] for s in shards)
    assert all(s.corpus["cases"] >= 1 for s in shards) and sum(s.corpus["cases"] for s in shards) == 3
    union = {k: e for s in shards for k, e in s.by_key().items()}
    assert union.keys() == whole[0].by_key().keys()
    assert {k: e["tensors"] for k, e in union.items()} == {k: e["tensors"] for k, e in whole[0].by_key().items()}

    res = A.merge_audits([whole[0].path, shards[0].path, shards[1].path])
    cols = [c for c in res.matrix.columns if c not in ("subject", "device", "context", "consistent")]
    assert len(cols) == 2 and len(res.columns) == 2
    assert sorted(len(f) for f in res.columns.values()) == [1, 2]  # the shards joined into one column
    assert (res.matrix[cols[0]] == res.matrix[cols[1]]).all()
    assert res.matrix["consistent"].all() and res.matrix[cols[0]].str.endswith(" =").all()
    assert not res.warnings

    out = work / "merge"
    assert merge(MergeOptions((whole[0].path, shards[0].path, shards[1].path), out=str(out))) == 0
    assert "| chainer.NStepLSTM" in capsys.readouterr().out
    assert {p.name for p in out.iterdir()} >= {"merge.md", "merge.csv", "merge.html"}
    assert len(pd.read_csv(out / "merge.csv")) == len(res.matrix)
    assert "<table" in (out / "merge.html").read_text()


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


# ---- verdicts, on hand-made audit files ------------------------------------------------------------
def _synthetic(path: Path, env: dict, entries: list[tuple[str, str, dict[str, np.ndarray] | None]],
               algorithm: str | None = DIGEST_ALGORITHM, *, arrays: bool = True, sketches: bool = False,
               roles: dict[str, str] | None = None) -> Path:
    """An audit file of (subject, status, arrays) entries on one case; arrays kept under ``<path>.arrays``
    (``arrays=False``: none kept). ``algorithm=None`` writes a file as audits were before they named their
    digest (plain SHA-256); ``sketches`` adds each tensor's sketch, ``roles`` records entry roles."""
    keep = path.with_suffix(".arrays")
    keep.mkdir(exist_ok=True)
    out = []
    for i, (subject, status, tensors) in enumerate(entries):
        e = {"case_id": "c0", "family": "embed", "subject": subject, "device": "cpu", "context": "default",
             "status": status, "error": None if status == "ok" else "ValueError in forward: boom",
             "repeats_agreed": True if status == "ok" else None, "array_file": None, "tensors": {}}
        if roles and subject in roles:
            e["role"] = roles[subject]
        if status == "ok":
            e["tensors"] = {k: {"digest": (digest(v, algorithm) if algorithm else digest(v, "sha256").removeprefix("sha256:")), "dtype": v.dtype.name, "shape": list(v.shape),
                                "repeats_agreed": True} for k, v in tensors.items()}
            if sketches:
                for k, v in tensors.items():
                    e["tensors"][k]["sketch"] = tensor_sketch(v)
            if arrays:
                e["array_file"] = f"{i}.npz"
                np.savez(keep / e["array_file"], **tensors)
        out.append(e)
    data = {"format": "harness-audit", "version": 1, "created": "2026-01-01T00:00:00+00:00", "environment": env,
            "corpus": {"path": "x", "digest": "d", "cases": 1, "shard": None},
            "settings": {"repeats": 2}, "arrays_dir": str(keep) if arrays else None, "entries": out}
    if algorithm is not None:
        data["digest"] = algorithm
    path.write_text(json.dumps(data))
    return path


def test_verdicts_from_kept_arrays_and_statuses(work):
    x = np.linspace(-2, 3, 50, dtype=np.float32)
    one_ulp = x.copy()
    one_ulp[7] = np.nextafter(x[7], np.float32(9))
    far = x.copy()
    far[3] += 1.0
    env = {"gpu": {"available": True, "driver_version": "550.1", "devices": [{"name": "NVIDIA H200"}]}}
    env_b = {"gpu": {"available": True, "driver_version": "570.9", "devices": [{"name": "NVIDIA H200"}]}}
    a = _synthetic(work / "va.json", env, [("same", "ok", {"y": x}), ("near", "ok", {"y": x}),
                                           ("far", "ok", {"y": x}), ("breaks", "ok", {"y": x}),
                                           ("mends", "error", None), ("still", "error", None)])
    b = _synthetic(work / "vb.json", env_b, [("same", "ok", {"y": x}), ("near", "ok", {"y": one_ulp}),
                                             ("far", "ok", {"y": far}), ("breaks", "error", None),
                                             ("mends", "ok", {"y": x}), ("still", "error", None)])
    cmp = A.compare_audits(a, b)
    assert cmp.verdicts() == {"same": "identical", "near": "changed within tolerance",
                              "far": "changed beyond tolerance", "breaks": "newly failing", "mends": "fixed",
                              "still": "identical"}
    rows = cmp.rows.set_index("subject")
    assert rows.loc["near", "max_ulp"] == 1 and rows.loc["far", "max_abs"] == pytest.approx(1.0)
    assert rows.loc["far", "beyond_tolerance"] == 1 and rows.loc["same", "max_ulp"] == 0
    env_rows = cmp.environment.set_index("field")
    assert env_rows.loc["gpu.driver_version", "kind"] == "GPU driver"
    assert env_rows.loc["gpu.driver_version", "B"] == "570.9"
    assert A.load_audit(a).label == "NVIDIA H200, driver 550.1"


def test_audits_of_two_digest_algorithms_are_refused_in_one_line(work):
    x = np.linspace(-2, 3, 50, dtype=np.float32)
    env = {"gpu": {"available": False}}
    new = _synthetic(work / "alg-new.json", env, [("s", "ok", {"y": x})])
    old = _synthetic(work / "alg-old.json", env, [("s", "ok", {"y": x})], algorithm=None)
    old2 = _synthetic(work / "alg-old2.json", env, [("s", "ok", {"y": x})], algorithm=None)
    assert json.loads(new.read_text())["digest"] == DIGEST_ALGORITHM == "xxh3_128"
    # two files of today's SHA-256 format still compare, and say the same bits are identical
    assert A.compare_audits(old, old2).verdicts() == {"s": "identical"}
    assert A.compare_audits(new, new).verdicts() == {"s": "identical"}
    for call in (lambda: A.compare_audits(new, old), lambda: A.merge_audits([old, new, old2])):
        with pytest.raises(InvalidArgument, match="different algorithms") as info:
            call()
        msg = str(info.value)
        assert "\n" not in msg and "xxh3_128" in msg and "sha256" in msg and str(old) in msg, msg
    from harness.cli import main

    assert main(["compare", str(new), str(old)]) == 2


# ---- (d) bad audit files -------------------------------------------------------------------------
def test_bad_audit_files_raise_and_load_nothing(whole, work):
    good = Path(whole[0].path).read_text()
    data = json.loads(good)
    cases = {
        "corrupt": "\x00\x13garbage{]",
        "truncated": good[: len(good) // 2],
        "empty": "",
        "wrong version": json.dumps({**data, "version": 2}),
        "wrong format": json.dumps({**data, "format": "harness-report"}),
        "not an object": json.dumps([data]),
        "missing entries": json.dumps({k: v for k, v in data.items() if k != "entries"}),
        "entry without status": json.dumps({**data, "entries": [
            {k: v for k, v in e.items() if k != "status"} for e in data["entries"]]}),
        "tensor without digest": json.dumps({**data, "entries": [
            {**e, "tensors": {n: {"dtype": t["dtype"], "shape": t["shape"]} for n, t in e["tensors"].items()}}
            for e in data["entries"]]}),
    }
    for what, text in cases.items():
        path = work / f"bad-{what.replace(' ', '-')}.json"
        path.write_text(text)
        loaded = None
        with pytest.raises(AuditFileError) as info:
            loaded = A.load_audit(path)
        assert loaded is None, what
        msg = str(info.value)
        assert "\n" not in msg and str(path) in msg, (what, msg)
    with pytest.raises(AuditFileError, match="version=2"):
        A.load_audit(work / "bad-wrong-version.json")
    with pytest.raises(AuditFileError, match="truncated"):
        A.load_audit(work / "bad-truncated.json")
    with pytest.raises(AuditFileError, match="cannot be read"):
        A.load_audit(work / "does-not-exist.json")
    assert A.load_audit(whole[0].path).entries  # the good file still loads

    from harness.cli import main

    assert main(["compare", str(work / "bad-truncated.json"), whole[0].path]) == 2


# ---- (f) devices all on a machine without a GPU, and argument checks ---------------------------------
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


def test_run_audit_rejects_one_repetition(work, small):
    with pytest.raises(InvalidArgument, match="repeats=1"):
        A.run_audit(str(small), "cpu", "default", str(work / "r1.json"), repeats=1)
    assert not (work / "r1.json").exists()


def test_repetitions_that_disagree_are_not_blamed_on_the_environment(work):
    corpus = work / "collide.jsonl"
    write_corpus([_anchor("collision")], str(corpus))
    audits = [A.load_audit(_run(corpus, work / f"ctl{i}.json", subjects="control.nondeterministic,control.deterministic",
                                repeats=3)) for i in (1, 2)]
    e = {x["subject"]: x for x in audits[0].entries}
    assert e["control.nondeterministic"]["repeats_agreed"] is False
    assert e["control.deterministic"]["repeats_agreed"] is True
    v = A.compare_audits(*audits).verdicts()
    assert v == {"control.deterministic": "identical", "control.nondeterministic": "not reproducible"}


# ---- audit files validated whole; merge refuses a repeat; escaping in HTML and Markdown -------------
def _base_audit(work: Path, name: str, subject: str = "s", shape=(50,)) -> Path:
    x = np.linspace(-2, 3, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    return _synthetic(work / name, {"gpu": {"available": False}}, [(subject, "ok", {"y": x})])


def _mutated(work: Path, name: str, mutate) -> Path:
    data = json.loads(_base_audit(work, "base-" + name).read_text())
    mutate(data)
    p = work / name
    p.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return p


@pytest.mark.parametrize("name,mutate,message", [
    ("case-id-list", lambda d: d["entries"][0].__setitem__("case_id", ["c0"]),
     r"\$\.entries\[0\]\.case_id=\[\"c0\"\] must be a string, got an array"),
    ("created-int", lambda d: d.__setitem__("created", 5), r"\$\.created=5 must be a string, got an integer"),
    ("created-junk", lambda d: d.__setitem__("created", "yesterday"), r"\$\.created='yesterday' is not an ISO"),
    ("status-unknown", lambda d: d["entries"][0].__setitem__("status", "weird"),
     r"\$\.entries\[0\]\.status='weird' must be 'ok', 'error'"),
    ("duplicate", lambda d: d["entries"].append(dict(d["entries"][0])),
     r"\$\.entries\[1\] duplicates \$\.entries\[0\]"),
    ("shape-str", lambda d: d["entries"][0]["tensors"]["y"].__setitem__("shape", ["50"]),
     r"\$\.entries\[0\]\.tensors\.y\.shape\[0\]='50' must be an integer, got a string"),
    ("cases-bool", lambda d: d["corpus"].__setitem__("cases", True), r"\$\.corpus\.cases=true must be an integer"),
    ("digest-algo", lambda d: d.__setitem__("digest", "md5"), r"\$\.digest='md5' is not a digest algorithm"),
    ("shard-bad", lambda d: d["corpus"].__setitem__("shard", "3"), r"\$\.corpus\.shard='3' must be 'i/n'"),
])
def test_bad_audit_field_is_named_by_json_path(work, name, mutate, message):
    p = _mutated(work, name + ".json", mutate)
    with pytest.raises(AuditFileError, match=message) as info:
        A.load_audit(p)
    assert "\n" not in str(info.value)


def test_deep_nesting_and_duplicate_tensor_keys_are_refused(work):
    deep = work / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(AuditFileError, match="nested too deeply"):
        A.load_audit(deep)
    text = _base_audit(work, "dupkey-src.json").read_text()
    dup = work / "dupkey.json"
    dup.write_text(text.replace('"tensors": {"y": ', '"tensors": {"y": {"digest": "x", "dtype": "float32", '
                                '"shape": [1]}, "y": ', 1))
    with pytest.raises(AuditFileError, match="holds the key 'y' twice"):
        A.load_audit(dup)
    with pytest.raises(AuditFileError, match="is a directory"):
        A.load_audit(work)


def test_digest_field_defaults_to_sha256_for_old_files(work):
    p = _base_audit(work, "old.json")
    data = json.loads(p.read_text())
    data.pop("digest", None)  # a file written before audit files named their algorithm: plain SHA-256 digests
    for e in data["entries"]:
        for t in e["tensors"].values():
            t["digest"] = "ab" * 32
    p.write_text(json.dumps(data))
    assert A.digest_algorithm(A.load_audit(p)) == "sha256"


def test_changed_shape_is_not_identical(work):
    a = _base_audit(work, "sh-a.json", shape=(50,))
    data = json.loads(a.read_text())
    data["entries"][0]["tensors"]["y"]["shape"] = [5, 10]  # same digest, another shape
    data["arrays_dir"] = None  # judged by the entry alone
    b = work / "sh-b.json"
    b.write_text(json.dumps(data))
    assert A.compare_audits(a, b).verdicts()["s"] != "identical"


def test_kept_arrays_that_disagree_with_their_entry_are_refused_in_one_line(work):
    a = _base_audit(work, "ka-a.json", shape=(50,))
    data = json.loads(a.read_text())
    data["entries"][0]["tensors"]["y"]["shape"] = [5, 10]  # the arrays say [50]
    b = work / "ka-b.json"
    b.write_text(json.dumps(data))
    with pytest.raises(AuditFileError, match=r"holds 'y' as float32 \[50\], the entry says float32 \[5, 10\]") as info:
        A.compare_audits(a, b)
    assert "\n" not in str(info.value)


def test_merge_refuses_the_same_file_twice(work):
    a = _base_audit(work, "twice.json")
    with pytest.raises(InvalidArgument, match="is given twice to merge") as info:
        A.merge_audits([a, a])
    assert "\n" not in str(info.value)
    copy = work / "twice-copy.json"
    copy.write_text(a.read_text())
    with pytest.raises(InvalidArgument, match="same content"):
        A.merge_audits([a, copy])


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


# ---- "changed" says by how much without arrays; the oracle apart -------------------------------------------
def test_audit_entries_carry_a_sketch_per_tensor(whole):
    e = next(e for e in whole[0].entries if e["subject"] == "chainer.NStepLSTM")
    assert e["role"] == "subject"
    for name, t in e["tensors"].items():
        sk = t["sketch"]
        n = int(np.prod(t["shape"]))
        assert sk["n"] == n and len(sk["index"]) == len(sk["bits"]) == min(SAMPLE, n), name
        assert sk["l2"] >= sk["max_abs"] >= 0 and sk["nan"] == sk["inf"] == 0
        assert all(len(b) == 2 * np.dtype(t["dtype"]).itemsize for b in sk["bits"])
    assert next(e for e in whole[0].entries if e["subject"] == "oracle.lstm")["role"] == "oracle"


def test_sketches_say_by_how_much_and_old_files_say_no_sketch(work):
    x = np.linspace(-2, 3, 1000, dtype=np.float32)
    y = x.copy()
    y[:] = np.nextafter(x, np.float32(9))  # every element 1 ULP up: a sample cannot miss it
    z = x * np.float32(1.5)
    env = {"gpu": {"available": False}}
    kw = {"arrays": False}
    a = _synthetic(work / "sk-a.json", env, [("one", "ok", {"y": x}), ("big", "ok", {"y": x})], sketches=True, **kw)
    b = _synthetic(work / "sk-b.json", env, [("one", "ok", {"y": y}), ("big", "ok", {"y": z})], sketches=True, **kw)
    cmp = A.compare_audits(a, b)
    assert cmp.verdicts() == {"one": "changed (sampled)", "big": "changed (sampled)"}
    rows = cmp.rows.set_index("subject")
    assert rows.loc["one", "sample_max_ulp"] == rows.loc["one", "sample_median_ulp"] == 1
    assert rows.loc["one", "norm_rel_change"] < 1e-6
    assert rows.loc["big", "norm_rel_change"] == pytest.approx(0.5, rel=1e-6)
    assert rows.loc["big", "sample_max_ulp"] > 1_000_000
    md = cmp.to_markdown()
    assert "sample_max_ulp" in md and "norm_rel_change" in md
    # files written before sketches existed still compare, and say what they cannot tell
    old_a = _synthetic(work / "sk-old-a.json", env, [("one", "ok", {"y": x})], **kw)
    old_b = _synthetic(work / "sk-old-b.json", env, [("one", "ok", {"y": y})], **kw)
    assert A.compare_audits(old_a, old_b).verdicts() == {"one": "changed (no sketch)"}
    assert A.compare_audits(old_a, b).verdicts()["one"] == "changed (no sketch)"  # one side without a sketch


def test_a_bad_sketch_is_refused_by_json_path(work):
    x = np.linspace(-2, 3, 50, dtype=np.float32)
    p = _synthetic(work / "sk-bad.json", {"gpu": {"available": False}}, [("s", "ok", {"y": x})], sketches=True)
    data = json.loads(p.read_text())
    data["entries"][0]["tensors"]["y"]["sketch"]["bits"][0] = "zz"
    p.write_text(json.dumps(data))
    with pytest.raises(AuditFileError, match=r"tensors\.y\.sketch\.bits\[0\]='zz' must be a hex string"):
        A.load_audit(p)


def test_an_oracle_change_is_listed_as_the_reference_not_an_implementation(work, capsys):
    x = np.linspace(-2, 3, 50, dtype=np.float64)
    y = x.copy()
    y[3] = np.nextafter(x[3], 9.0)
    env = {"gpu": {"available": False}}
    # Roles come from the registry (oracle.lstm, chainer.NStepLSTM), else from the entry: never from the name.
    roles = {"reference64": "oracle", "oracle.lookalike": "subject"}
    names = ("oracle.lstm", "chainer.NStepLSTM", "reference64", "oracle.lookalike")
    a = _synthetic(work / "or-a.json", env, [(n, "ok", {"y": x}) for n in names], sketches=True, roles=roles)
    b = _synthetic(work / "or-b.json", env, [(n, "ok", {"y": y if n != "chainer.NStepLSTM" else x}) for n in names],
                   sketches=True, roles=roles)
    cmp = A.compare_audits(a, b)
    assert dict(zip(cmp.subjects["subject"], cmp.subjects["role"])) == {
        "oracle.lstm": "oracle", "chainer.NStepLSTM": "subject", "reference64": "oracle", "oracle.lookalike": "subject"}
    md = cmp.to_markdown()
    impl, ref = md.split("## Implementations: verdicts per subject")[1].split("## Reference (oracle)")
    ref = ref.split("## Per subject")[0]
    assert "chainer.NStepLSTM" in impl and "oracle.lookalike" in impl
    assert "oracle.lstm" not in impl and "reference64" not in impl
    assert "oracle.lstm" in ref and "reference64" in ref and "changed within tolerance" in ref
    changed, line = A.compare_changed(cmp)
    assert changed and "3 of 4" in line and "2 of them the reference (oracle)" in line
    html_text = Path(A.write_compare(cmp, str(work / "or-out"))["html"]).read_text()
    assert html_text.index("Reference (oracle)") < html_text.index("reference64") < html_text.index("Per subject,")


def _corrupt_zip(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:40])


def _pickled(p: Path) -> None:
    np.savez(p, y=np.array([{"a": 1}, None], dtype=object), allow_pickle=True)


def _bare_npy(p: Path) -> None:
    with open(p, "wb") as f:
        np.save(f, np.zeros(50, np.float32))


@pytest.mark.parametrize("damage, needle", [(_corrupt_zip, "is not a readable .npz"),
                                            (_pickled, "pickled object array"), (_bare_npy, "bare .npy")])
@pytest.mark.parametrize("verb", ["compare", "merge"])
def test_an_array_file_that_is_not_an_npz_of_plain_arrays_is_one_line(work, damage, needle, verb):
    stem = f"{verb}-{damage.__name__}"
    a = _base_audit(work, stem + "-a.json")
    b = _base_audit(work, stem + "-b.json", shape=(5, 10))
    damage(Path(json.loads(a.read_text())["arrays_dir"]) / "0.npz")
    with pytest.raises(AuditFileError, match=needle) as info:
        if verb == "compare":
            A.compare_audits(a, b)
        else:
            A.write_merge(A.merge_audits([a, b]), str(work / (stem + "-out")))
            A.compare_audits(b, a)  # merge reads digests only: compare is where arrays are loaded
    assert "\n" not in str(info.value) and str(a) in str(info.value)
