"""harness.outputs.audit.fileformat: the committed corpus, audit files validated whole (bad files, fields named by
JSON path, deep nesting, duplicate keys, sketches), the digest algorithm a file names, and kept arrays that are
not an npz of plain arrays or disagree with their entry: each refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.core.corpus_files import corpus_digest, load_corpus
from harness.core.errors import AuditFileError, InvalidArgument
from harness.generate.corpora import anchor_cases
from harness.judge.digest import DIGEST_ALGORITHM
from harness.outputs import audit as A
from suites.audit_files import _base_audit, _synthetic

ROOT = Path(__file__).resolve().parents[4]

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


# ---- the digest algorithm an audit file names ----------------------------------------------------------
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


# ---- audit files validated whole; kept arrays that are not what the entry says ---------------------------
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


def test_kept_arrays_that_disagree_with_their_entry_are_refused_in_one_line(work):
    a = _base_audit(work, "ka-a.json", shape=(50,))
    data = json.loads(a.read_text())
    data["entries"][0]["tensors"]["y"]["shape"] = [5, 10]  # the arrays say [50]
    b = work / "ka-b.json"
    b.write_text(json.dumps(data))
    with pytest.raises(AuditFileError, match=r"holds 'y' as float32 \[50\], the entry says float32 \[5, 10\]") as info:
        A.compare_audits(a, b)
    assert "\n" not in str(info.value)


def test_a_bad_sketch_is_refused_by_json_path(work):
    x = np.linspace(-2, 3, 50, dtype=np.float32)
    p = _synthetic(work / "sk-bad.json", {"gpu": {"available": False}}, [("s", "ok", {"y": x})], sketches=True)
    data = json.loads(p.read_text())
    data["entries"][0]["tensors"]["y"]["sketch"]["bits"][0] = "zz"
    p.write_text(json.dumps(data))
    with pytest.raises(AuditFileError, match=r"tensors\.y\.sketch\.bits\[0\]='zz' must be a hex string"):
        A.load_audit(p)


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
