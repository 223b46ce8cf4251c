"""harness.outputs.audit.compare: the verdicts of two audits (identical, changed within or beyond tolerance, newly
failing, fixed, not reproducible, changed (sampled) or (no sketch)), a changed shape, and an oracle's change listed
as the reference, not as an implementation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.core.corpus_files import write_corpus
from harness.outputs import audit as A
from suites.audit_files import EMBED_SUBJECTS, _anchor, _base_audit, _run, _synthetic


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


# ---- verdicts, on hand-made audit files ------------------------------------------------------------
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


def test_repetitions_that_disagree_are_not_blamed_on_the_environment(work):
    corpus = work / "collide.jsonl"
    write_corpus([_anchor("collision")], str(corpus))
    audits = [A.load_audit(_run(corpus, work / f"ctl{i}.json",
                                subjects="control.nondeterministic,control.deterministic", repeats=3))
              for i in (1, 2)]
    e = {x["subject"]: x for x in audits[0].entries}
    assert e["control.nondeterministic"]["repeats_agreed"] is False
    assert e["control.deterministic"]["repeats_agreed"] is True
    v = A.compare_audits(*audits).verdicts()
    assert v == {"control.deterministic": "identical", "control.nondeterministic": "not reproducible"}


def test_changed_shape_is_not_identical(work):
    a = _base_audit(work, "sh-a.json", shape=(50,))
    data = json.loads(a.read_text())
    data["entries"][0]["tensors"]["y"]["shape"] = [5, 10]  # same digest, another shape
    data["arrays_dir"] = None  # judged by the entry alone
    b = work / "sh-b.json"
    b.write_text(json.dumps(data))
    assert A.compare_audits(a, b).verdicts()["s"] != "identical"


# ---- "changed" says by how much without arrays; the oracle apart -------------------------------------------
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
