"""The one case of replay, shrink and localize is refused up front when its subject does not take it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from harness.core.cases import Case, build_arrays
from harness.core.contexts import get_context
from harness.core.devices import CPU, Device
from harness.core.errors import CaseError, PluginError, UnknownSubject
from harness.judge import comparator as compare
from harness.judge import tolerance
from harness.judge.digest import digest
from harness.subjects.base import RunResult, Subject, execute
from harness.subjects.registry import (
    ORACLE_FOR_FAMILY,
    SUBJECTS,
    get_subject,
    load_case_for_subject,
    load_plugin,
    register,
)
from suites.plugins import misbehaving

BI = {"family": "lstm", "seed": 0, "spec": {"in_size": 3, "hidden": 3, "n_layers": 1, "lengths": [2, 2],
                                            "bidirectional": True}}


@pytest.mark.parametrize("subject, takes", [("chainer.NStepLSTM", False), ("chainer.n_step_lstm", False),
                                            ("chainer.NStepBiLSTM", True), ("chainer.n_step_bilstm", True)])
def test_a_bidirectional_case_is_refused_by_a_unidirectional_subject_naming_file_and_field(tmp_path, subject, takes):
    p = tmp_path / "bi.json"
    p.write_text(json.dumps(BI))
    if takes:
        assert load_case_for_subject(str(p), None, get_subject(subject), None).spec["bidirectional"] is True
        return
    with pytest.raises(CaseError) as info:
        load_case_for_subject(str(p), None, get_subject(subject), None)
    msg = str(info.value)
    assert msg.startswith(f"{p}: ") and "$.spec.bidirectional=true" in msg and repr(subject) in msg, msg


# The subjects (harness/subjects/*): the registry, one CPU run of each, agreement with the oracle,
# the controls, Chainer's nondeterminism declarations, errors, GPU skips, plug-ins, dropout and dtypes.
#
# Oracle tolerance: ``harness.judge.tolerance.gradient_tolerance`` of the subject's dtype with ``n_terms=1``
# (the strictest setting) for every output and gradient; a disagreement fails with the oracle dossier
# (``OracleError.message()``).

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TIMEOUT = 120
DEFAULT = get_context("default")

EXPECTED = (
    "chainer.embed_id", "chainer.EmbedID", "espnet.embed_id", "espnet.EmbedID", "chainer.NStepLSTM",
    "chainer.NStepBiLSTM", "chainer.n_step_lstm", "chainer.n_step_bilstm", "pipeline.embed_lstm",
    "pipeline.espnet_embed_lstm", "oracle.embed", "oracle.lstm", "oracle.pipeline",
    "control.nondeterministic", "control.deterministic",
)
UNDER_TEST = [n for n in EXPECTED if n.split(".")[0] in ("chainer", "espnet", "pipeline")]

# Small cases, at least one per family and direction, with collisions, ignore labels and given states.
EMBED = Case("embed", 1, {"vocab": 7, "width": 3, "ids_shape": [4, 5], "id_kind": "collision", "distinct": 3})
EMBED_IGNORE = Case("embed", 2, {"vocab": 9, "width": 4, "ids_shape": [3, 2, 2], "ignore_label": -1,
                                 "ignore_frac": 0.3, "id_dtype": "int64"})
LSTM = Case("lstm", 3, {"n_layers": 2, "in_size": 3, "hidden": 4, "lengths": [3, 1, 2],
                        "initial_state": "given"})
BILSTM = Case("lstm", 4, {"n_layers": 2, "in_size": 3, "hidden": 5, "lengths": [2, 4, 1],
                          "bidirectional": True})
PIPE = Case("pipeline", 5, {"vocab": 10, "width": 4, "hidden": 5, "n_layers": 1, "lengths": [3, 2, 4],
                            "ignore_label": -1, "id_kind": "collision", "distinct": 4})
BIPIPE = Case("pipeline", 6, {"vocab": 8, "width": 3, "hidden": 4, "n_layers": 2, "lengths": [2, 5],
                              "bidirectional": True, "initial_state": "given"})
CASES = (EMBED, EMBED_IGNORE, LSTM, BILSTM, PIPE, BIPIPE)
COLLISION = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [400], "id_kind": "collision", "distinct": 2})


def first_case(subject: Subject) -> Case:
    return next(c for c in CASES if subject.applies_to(c))


def harness(*args: str, pythonpath: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT)


def run(name_or_subject, case: Case, device: Device = CPU) -> RunResult:
    s = get_subject(name_or_subject) if isinstance(name_or_subject, str) else name_or_subject
    return execute(s, case, device, DEFAULT)


# ---- the registry ----------------------------------------------------------------------------------
def test_subjects_json_lists_every_subject():
    p = harness("subjects", "--json")
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert set(EXPECTED) <= set(rows), set(EXPECTED) - set(rows)
    for name in EXPECTED:
        r = rows[name]
        assert r["family"] in ("embed", "lstm", "pipeline")
        assert r["devices"] and set(r["devices"]) <= {"cpu", "gpu"}
        assert set(r["declared"]) <= set(r["devices"]) and "cpu" in r["declared"], r
        for d in r["declared"].values():
            assert d["deterministic"] in (True, False, None) and d["reason"]
    fam = {n: rows[n]["family"] for n in EXPECTED}
    assert fam["chainer.embed_id"] == fam["espnet.EmbedID"] == fam["control.deterministic"] == "embed"
    assert fam["chainer.NStepBiLSTM"] == fam["chainer.n_step_lstm"] == fam["oracle.lstm"] == "lstm"
    assert fam["pipeline.espnet_embed_lstm"] == fam["oracle.pipeline"] == "pipeline"
    assert rows["oracle.embed"]["devices"] == ["cpu"]
    # The declarations the report tests against.
    assert rows["chainer.embed_id"]["declared"]["gpu"]["deterministic"] is False
    assert "atomicAdd" in rows["chainer.embed_id"]["declared"]["gpu"]["reason"]
    assert rows["espnet.embed_id"]["declared"]["gpu"]["deterministic"] is True
    assert rows["control.nondeterministic"]["declared"]["cpu"]["deterministic"] is False
    assert rows["control.deterministic"]["declared"]["cpu"]["deterministic"] is True


def test_registry_lookup_errors():
    with pytest.raises(UnknownSubject) as info:
        get_subject("chainer.nope")
    assert "chainer.nope" in str(info.value) and not str(info.value).startswith("'")
    clash = Subject("chainer.embed_id", "embed", lambda *a: None)
    with pytest.raises(PluginError, match="already registered"):
        register(clash)
    assert SUBJECTS["chainer.embed_id"] is not clash
    with pytest.raises(PluginError, match="must look like"):
        load_plugin("no_colon_here")
    with pytest.raises(PluginError, match="failed to import"):
        load_plugin("no_such_module_xyz:SUBJECTS")
    with pytest.raises(PluginError, match="has no"):
        load_plugin("suites.plugins.misbehaving:NOPE")


# ---- one CPU run of each subject ---------------------------------------------------------------------
@pytest.mark.parametrize("name", EXPECTED)
def test_cpu_run_shapes_and_dtypes(name):
    subject = get_subject(name)
    case = first_case(subject)
    r = run(subject, case)
    assert r.status == "ok", r.error
    assert r.error is None and r.skip_reason is None
    assert r.subject == name and r.case_id == case.id and r.device == "cpu" and r.context == "default"
    a = build_arrays(case)
    s = case.spec
    oracle = SUBJECTS[name].role == "oracle"
    fdt = np.float64 if oracle else None
    out = r.arrays
    for k, v in out.items():
        assert isinstance(v, np.ndarray) and v.flags.c_contiguous, k
        if v.dtype.kind == "f":
            assert np.isfinite(v).all(), k
    if case.family == "embed":
        D, V = int(s["width"]), int(s["vocab"])
        wdt = fdt or a["W"].dtype
        assert out["y"].shape == tuple(s["ids_shape"]) + (D,) and out["y"].dtype == wdt
        assert out["grad.W"].shape == (V, D) and out["grad.W"].dtype == wdt
        if "grad2.gy" in out:
            assert out["grad2.gy"].shape == a["gy"].shape
        assert subject.double_backward == ("grad2.gy" in out)
        return
    dirs = 2 if s.get("bidirectional") else 1
    H, Lr, B = int(s["hidden"]), int(s["n_layers"]), len(s["lengths"])
    dt = fdt or a["ws.0.0"].dtype
    for i, n in enumerate(s["lengths"]):
        assert out[f"ys.{i}"].shape == (n, H * dirs) and out[f"ys.{i}"].dtype == dt
        if case.family == "lstm":
            assert out[f"grad.xs.{i}"].shape == a[f"xs.{i}"].shape
    assert out["hy"].shape == out["cy"].shape == (Lr * dirs, B, H)
    weights = [k for k in a if k.startswith(("ws.", "bs."))]
    assert len(weights) == 16 * Lr * dirs
    for k in weights:
        g = out[f"grad.{k}"]
        assert g.shape == a[k].shape and g.dtype == dt, k
    if "hx" in a:
        assert out["grad.hx"].shape == out["grad.cx"].shape == a["hx"].shape
    else:
        assert "grad.hx" not in out
    if case.family == "pipeline":
        assert out["grad.W"].shape == a["W"].shape and out["grad.W"].dtype == dt


def test_every_subject_was_covered_by_a_case():
    for name in EXPECTED:
        assert any(get_subject(name).applies_to(c) for c in CASES), name
    # accepts(): the unidirectional function takes no bidirectional case, and vice versa.
    assert not get_subject("chainer.n_step_lstm").applies_to(BILSTM)
    assert not get_subject("chainer.NStepBiLSTM").applies_to(LSTM)
    assert not get_subject("chainer.embed_id").applies_to(LSTM)


# ---- the oracle agrees with every Chainer and ESPnet subject -------------------------------------------
_ORACLE_CACHE: dict[str, dict[str, np.ndarray]] = {}


def oracle_arrays(case: Case) -> dict[str, np.ndarray]:
    if case.id not in _ORACLE_CACHE:
        r = run(ORACLE_FOR_FAMILY[case.family], case)
        assert r.status == "ok", r.error
        _ORACLE_CACHE[case.id] = r.arrays
    return _ORACLE_CACHE[case.id]


@pytest.mark.parametrize("name", UNDER_TEST)
def test_oracle_agrees_on_cpu(name):
    subject = get_subject(name)
    cases = [c for c in CASES if subject.applies_to(c)]
    assert cases
    for case in cases:
        r = run(subject, case)
        assert r.status == "ok", r.error
        o = oracle_arrays(case)
        compared = 0
        for k, v in r.arrays.items():
            assert k in o, f"{name} output {k} has no oracle counterpart"
            err = tolerance.compare_oracle(k, v, o[k])
            assert err.within_tolerance, f"{name} on {case!r}:\n{err.message()}"
            compared += 1
        assert compared == len(r.arrays) >= 2


def test_oracle_comparison_can_fail():
    # Negative control: one gradient element moved by 1e-3 relative is beyond float32 tolerance.
    r = run("chainer.NStepLSTM", LSTM)
    o = oracle_arrays(LSTM)
    g = r.arrays["grad.ws.0.4"].copy()
    g.flat[3] += np.float32(1e-3) * max(abs(g.flat[3]), 1.0)
    err = tolerance.compare_oracle("grad.ws.0.4", g, o["grad.ws.0.4"])
    assert not err.within_tolerance and err.n_mismatch == 1
    assert "exceeds tolerance" in err.message()


def test_function_and_link_lstm_agree_bitwise():
    # F.n_step_lstm takes time-major, sorted input; the subject transposes as L.NStepLSTM does.
    for fn, link, case in (("chainer.n_step_lstm", "chainer.NStepLSTM", LSTM),
                           ("chainer.n_step_bilstm", "chainer.NStepBiLSTM", BILSTM)):
        a, b = run(fn, case).arrays, run(link, case).arrays
        assert set(a) == set(b)
        for k in a:
            assert compare.compare_pair(k, a[k], b[k]).bitwise_identical, k


# ---- the controls -----------------------------------------------------------------------------------
def test_controls_behave_as_stated_over_many_runs():
    nd = [run("control.nondeterministic", COLLISION).arrays for _ in range(10)]
    det = [run("control.deterministic", COLLISION).arrays for _ in range(10)]
    digests_nd = {digest(a["grad.W"]) for a in nd}
    digests_det = {digest(a["grad.W"]) for a in det}
    assert len(digests_nd) > 1, "the nondeterministic control repeated itself over 10 runs"
    assert len(digests_det) == 1
    c_nd, c_det = compare.compare_results(nd), compare.compare_results(det)
    assert not c_nd["grad.W"].bitwise_identical and c_nd["grad.W"].n_unique == len(digests_nd)
    assert c_nd["y"].bitwise_identical  # only the scatter-add order is shuffled
    assert all(c.bitwise_identical for c in c_det.values())
    # Both are within tolerance of the oracle: the shuffle changes rounding, not the value.
    o = oracle_arrays(COLLISION)
    for reps in (nd, det):
        err = tolerance.compare_oracle("grad.W", reps[0]["grad.W"], o["grad.W"], n_terms=400)
        assert err.within_tolerance, err.message()


# ---- declarations -----------------------------------------------------------------------------------
def test_chainer_cpu_embed_declares_nothing():
    for name in ("chainer.embed_id", "chainer.EmbedID", "espnet.embed_id"):
        r = run(name, COLLISION)
        assert r.status == "ok" and r.declared_warnings == (), (name, r.declared_warnings)


def test_declaration_in_a_plugin_is_captured():
    declares = next(s for s in misbehaving.SUBJECTS if s.name == "misbehaving.declares")
    r = run(declares, EMBED)
    assert r.status == "ok", r.error
    assert "myAtomic" in r.declared_warnings
    assert r.meta()["declared_warnings"] == ["myAtomic"]


def test_declaration_captured_only_while_running():
    from harness.core.compat import import_chainer

    chainer = import_chainer()
    assert chainer.config.warn_nondeterministic is False  # execute turns it on only for the run
    seen: list[bool] = []

    def probe(case, device, context, rec):
        seen.append(bool(chainer.config.warn_nondeterministic))
        rec.output("y", np.zeros(2, np.float32))

    r = run(Subject("t.probe", "embed", probe), EMBED)
    assert r.status == "ok" and seen == [True] and r.declared_warnings == ()
    assert chainer.config.warn_nondeterministic is False


# ---- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("which,phase", [("misbehaving.raises_forward", "forward"),
                                         ("misbehaving.raises_backward", "backward")])
def test_a_subject_that_raises_is_an_error_result(which, phase):
    subject = next(s for s in misbehaving.SUBJECTS if s.name == which)
    r = run(subject, EMBED)
    assert r.status == "error" and not r.ok
    assert r.error.type == "RuntimeError"
    assert r.error.phase == phase
    assert r.error.message == f"misbehaving subject raised in {phase}"
    assert "RuntimeError" in r.error.traceback
    assert r.arrays == {}
    assert r.meta()["error"]["phase"] == phase


def test_chainer_error_on_empty_ids_is_in_backward():
    # Chainer 7.8.1 embeds an empty id array fine but its backward reshapes gy with -1 and fails.
    empty = Case("embed", 1, {"vocab": 5, "width": 3, "ids_shape": [0]})
    r = run("chainer.embed_id", empty)
    assert r.status == "error" and r.error.type == "ValueError" and r.error.phase == "backward", r.error
    o = run("oracle.embed", empty)
    assert o.status == "ok" and o.arrays["y"].shape == (0, 3) and not o.arrays["grad.W"].any()


def test_espnet_rejects_float16_while_chainer_accepts_it():
    c16 = Case("embed", 42, {"vocab": 5, "width": 3, "ids_shape": [6], "w_dtype": "float16"})
    for name in ("espnet.embed_id", "espnet.EmbedID"):
        r = run(name, c16)
        assert r.status == "error" and r.error.type == "InvalidType" and r.error.phase == "forward", (name, r.error)
        assert "float32" in r.error.message and "\n" not in r.error.message
    for name in ("chainer.embed_id", "chainer.EmbedID"):
        r = run(name, c16)
        assert r.status == "ok", (name, r.error)
        assert r.arrays["y"].dtype == np.float16 and r.arrays["grad.W"].dtype == np.float16
    # Positive control: ESPnet takes the same case in float32.
    c32 = Case("embed", 42, {"vocab": 5, "width": 3, "ids_shape": [6]})
    assert run("espnet.embed_id", c32).status == "ok"


def test_espnet_subjects_accept_float32_weights_only_the_pipeline_too():
    """A float64 pipeline case (drawn by the dev profile) ended in InvalidType in ESPnet's embedding: the
    ESPnet pipeline, like ESPnet's embeddings, does not accept it as a valid case (a bad input still runs)."""
    spec = {"lengths": [1], "vocab": 1, "width": 1, "n_layers": 1, "hidden": 1, "dtype": "float64"}
    f64 = Case("pipeline", 0, spec)
    assert not get_subject("pipeline.espnet_embed_lstm").applies_to(f64)
    assert get_subject("pipeline.embed_lstm").applies_to(f64)
    r = run("pipeline.espnet_embed_lstm", f64)  # what accepts() spares the valid cases: InvalidType in forward
    assert r.status == "error" and r.error.type == "InvalidType" and r.error.phase == "forward", r.error
    assert get_subject("pipeline.espnet_embed_lstm").applies_to(Case("pipeline", 0, {**spec, "dtype": "float32"}))
    assert get_subject("espnet.embed_id").applies_to(Case("embed", 0, {"vocab": 2, "width": 1, "ids_shape": [1]}))
    assert not get_subject("espnet.embed_id").applies_to(
        Case("embed", 0, {"vocab": 2, "width": 1, "ids_shape": [1], "w_dtype": "float64"}))


# ---- devices ----------------------------------------------------------------------------------------
def test_gpu_runs_are_skipped_with_a_reason():
    gpu = Device("gpu", 0)
    if gpu.available:
        pytest.skip("a GPU is present: this test is about machines without one")
    for name in ("chainer.embed_id", "espnet.EmbedID", "chainer.NStepLSTM", "pipeline.embed_lstm"):
        subject = get_subject(name)
        r = run(subject, first_case(subject), gpu)
        assert r.status == "skipped" and r.skip_reason and r.skip_reason.startswith("no GPU"), r
        assert r.arrays == {} and r.error is None and r.device == "gpu:0"
    r = run("oracle.embed", EMBED, gpu)  # a CPU-only subject says why it does not run
    assert r.status == "skipped" and "does not run on gpu" in r.skip_reason


def test_gpu_only_context_skips_on_cpu():
    r = execute(get_subject("chainer.embed_id"), EMBED, CPU, get_context("cudnn_deterministic"))
    assert r.status == "skipped" and "applies only to gpu" in r.skip_reason


# ---- plug-ins outside the package -------------------------------------------------------------------
PLUGIN_SOURCE = textwrap.dedent("""
    import numpy as np
    from harness.core.cases import build_arrays
    from harness.subjects.base import Declared, Subject

    def _run(case, device, context, rec):
        a = build_arrays(case)
        with rec.phase("forward"):
            y = a["W"][a["x"]] * 2
        rec.output("y", device.put(y))
        with rec.phase("backward"):
            gW = np.zeros_like(a["W"])
            np.add.at(gW, a["x"].reshape(-1), a["gy"].reshape(a["x"].size, -1) * 2)
        rec.output("grad.W", device.put(gW))

    doubled = Subject("mine.doubled_embed", "embed", _run,
                      declared={"cpu": Declared(True, "sequential add.at")}, description="2 * W[x]")
""")


@pytest.fixture()
def plugin_dir(tmp_path) -> Path:
    (tmp_path / "my_subjects_mod.py").write_text(PLUGIN_SOURCE)
    case = Case("embed", 7, {"vocab": 6, "width": 3, "ids_shape": [5]})
    (tmp_path / "case.json").write_text(case.to_json())
    return tmp_path


def test_external_plugin_is_listed(plugin_dir):
    p = harness("subjects", "--json", "--subject-plugin", "my_subjects_mod:doubled", pythonpath=str(plugin_dir))
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert rows["mine.doubled_embed"]["family"] == "embed"
    assert rows["mine.doubled_embed"]["declared"]["cpu"]["deterministic"] is True
    assert set(EXPECTED) <= set(rows)
    # Negative control: without the plug-in it is not there.
    p2 = harness("subjects", "--json")
    assert "mine.doubled_embed" not in {r["name"] for r in json.loads(p2.stdout)}


def test_external_plugin_is_replayed(plugin_dir):
    p = harness("replay", str(plugin_dir / "case.json"), "--subject", "mine.doubled_embed", "--device", "cpu",
                "--repeats", "3", "--subject-plugin", "my_subjects_mod:doubled", pythonpath=str(plugin_dir))
    assert p.returncode == 1, p.stderr  # replay exits 1 on a difference: here BEYOND TOLERANCE of the oracle
    assert "subject mine.doubled_embed" in p.stdout
    lines = {ln.split()[0]: ln for ln in p.stdout.splitlines() if ln.startswith("  ")}
    assert "bit-identical over 3" in lines["y"] and "bit-identical over 3" in lines["grad.W"], p.stdout
    # The comparison with the oracle is real: y = 2 W[x] is not the embedding.
    assert "BEYOND TOLERANCE" in lines["y"] and "BEYOND TOLERANCE" in lines["grad.W"], p.stdout


def test_bad_plugin_on_the_command_line_is_one_line(plugin_dir):
    p = harness("subjects", "--subject-plugin", "my_subjects_mod:missing", pythonpath=str(plugin_dir))
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "PluginError" in err[0] and "'missing'" in err[0], p.stderr
    assert "Traceback" not in p.stderr


# ---- dropout ----------------------------------------------------------------------------------------
DROP = {"n_layers": 2, "in_size": 3, "hidden": 4, "lengths": [3, 1, 2], "dropout": 0.5}


@pytest.mark.parametrize("name", ["chainer.NStepLSTM", "chainer.n_step_lstm"])
def test_dropout_reproducible_per_seed(name):
    a_case = Case("lstm", 3, {**DROP, "dropout_seed": 7})
    b_case = Case("lstm", 3, {**DROP, "dropout_seed": 8})
    zero = Case("lstm", 3, {**DROP, "dropout": 0.0})
    first = run(name, a_case)
    np.random.seed(12345)  # disturb the global generator: the subject must reseed from the case
    np.random.random(17)
    again = run(name, a_case)
    other = run(name, b_case)
    plain = run(name, zero)
    for r in (first, again, other, plain):
        assert r.status == "ok", r.error
    same = compare.compare_results([first.arrays, again.arrays])
    assert all(c.bitwise_identical for c in same.values()), [k for k, c in same.items() if not c.bitwise_identical]
    assert not compare.compare_pair("hy", first.arrays["hy"], other.arrays["hy"]).bitwise_identical
    assert not compare.compare_pair("hy", first.arrays["hy"], plain.arrays["hy"]).bitwise_identical
    # The oracle takes no dropout case (its results would not be comparable).
    assert not get_subject("oracle.lstm").applies_to(a_case)
