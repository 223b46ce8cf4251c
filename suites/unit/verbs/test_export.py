"""``harness export`` without running any script: the claim each finding kind exports to, the refusals, the
script's make-up (no harness import anywhere in what it copies), and the runner's array helpers."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

from harness.core.cases import Case
from harness.core.errors import InvalidArgument
from harness.judge.findings import KINDS
from harness.judge.reproducer import Reproducer
from harness.subjects import calls, model_calls
from harness.subjects.calling import call_of
from harness.subjects.registry import SUBJECTS
from harness.verbs import export_runtime
from harness.verbs.export import ExportOptions, claim_check, export, script_text

ROOT = Path(__file__).resolve().parents[3]
#: The modules the shipped subjects' library calls live in (each imports only NumPy and the library).
CALL_MODULES = ("harness.subjects.calls", "harness.subjects.model_calls")
CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [12]})


def _imports(text: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append(node.module or "")
    return out


@pytest.mark.parametrize("module", [export_runtime, calls, model_calls], ids=lambda m: m.__name__)
def test_what_the_script_copies_imports_only_the_standard_library_and_numpy(module):
    import sys

    roots = {name.split(".")[0] for name in _imports(inspect.getsource(module))}
    assert roots and roots <= (set(sys.stdlib_module_names)
                               | {"numpy", "threadpoolctl", "cupy", "pkg_resources", "chainer"}), roots


def test_the_planted_plugins_call_module_imports_no_harness_code():
    text = (ROOT / "suites" / "plugins" / "planted_calls.py").read_text()
    assert not [n for n in _imports(text) if n.split(".")[0] in ("harness", "suites")]


def test_every_shipped_implementation_carries_its_library_call_and_oracles_and_controls_none():
    for s in SUBJECTS.values():
        call = call_of(s.run)
        if s.role == "subject":
            assert call is not None and call.fn.__module__ in CALL_MODULES, s.name
        else:
            assert call is None, s.name


@pytest.mark.parametrize("kind", [k.name for k in KINDS])
def test_each_finding_kind_exports_to_one_check_or_is_refused_in_one_line(kind):
    r = Reproducer("c.json", "chainer.embed_id", kind=kind)
    if kind in ("not judged", "no contract line", "gate check failed"):
        with pytest.raises(InvalidArgument, match=f"kind={kind!r}"):
            claim_check(r, CASE)
        return
    check = claim_check(r, CASE)
    assert check in export_runtime.CHECKS
    expected = {"not reproducible run to run": "repeats", "not reproducible across processes": "processes",
                "beyond oracle tolerance": "oracle", "cross-context difference": "contexts",
                "cross-device difference": "devices", "not invariant": "relation", "bad input misbehaved": "bad_input",
                "known library defect": "error", "error": "error", "expected error": "error",
                "baseline changed": "bits", "accumulation order differs from the declared one": "bits"}
    assert check == expected[kind]


def test_without_a_kind_the_claim_follows_what_the_reproducer_names():
    assert claim_check(Reproducer("c", "s", relation="order"), CASE) == "relation"
    assert claim_check(Reproducer("c", "s", contexts=("blas1", "blas2")), CASE) == "contexts"
    assert claim_check(Reproducer("c", "s", devices=("cpu", "gpu:0")), CASE) == "devices"
    assert claim_check(Reproducer("c", "s", error="IndexError in forward"), CASE) == "error"
    assert claim_check(Reproducer("c", "s"), CASE) == "all"  # what replay checks on one device and context


def test_a_subject_whose_run_is_not_a_library_call_is_refused_naming_it(tmp_path):
    case = tmp_path / "case.json"
    case.write_text(CASE.to_json())
    for name in ("oracle.embed", "control.nondeterministic"):
        with pytest.raises(InvalidArgument, match=f"subject='{name}' cannot be exported"):
            export(ExportOptions(Reproducer(str(case), name), str(tmp_path / "out.py")))
    assert not (tmp_path / "out.py").exists()


def test_a_plugin_call_module_that_imports_the_harness_is_refused(tmp_path):
    mod = tmp_path / "leaky.py"
    mod.write_text("import numpy as np\nfrom harness.core.cases import build_arrays\n\n"
                   "def leaky(env, a, spec, emit):\n    emit('y', a['W'])\n")
    with pytest.raises(InvalidArgument, match="imports harness code at line 2"):
        script_text(Reproducer("c.json", "x", kind="not reproducible run to run"), CASE, str(mod), "leaky", {})


def test_the_script_is_valid_python_that_embeds_the_call_the_case_and_no_harness_import(tmp_path):
    text = script_text(Reproducer("c.json", "chainer.EmbedID", kind="not reproducible run to run",
                                  tensor="parameter gradients"), CASE, inspect.getsourcefile(calls), "embed_link",
                       {"target": "chainer"})
    tree = ast.parse(text)
    assert not [n for n in _imports(text) if n.split(".")[0] == "harness"]
    assert text.startswith("#!/usr/bin/env python3\n") and "CALL = 'embed_link'" in text
    assert inspect.getsource(calls.embed_link) in text  # verbatim: the very call the subject makes
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"main", "chainer_shims", "embed_link", "receives_gradient", "tensor_kind", "pairs"} <= defined
    ns: dict = {}
    exec(compile(text.replace('if __name__ == "__main__":', "if False:"), "script", "exec"), ns)
    from harness.core.cases import build_arrays

    for name, a in build_arrays(CASE).items():
        b = ns["ARRAYS"]["case"][name]
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    assert ns["CLAIM"]["check"] == "repeats" and ns["CASES"]["case"]["id"] == CASE.id


def test_pack_keeps_every_bit_and_first_difference_names_the_element():
    a = np.array([[1.0, np.nan], [-0.0, 3.0]], dtype=np.float32)
    a.view(np.uint32)[0, 1] = 0x7FC00001  # a NaN with a payload
    back = export_runtime.unpack(export_runtime.pack({"a": a}))["a"]
    assert back.dtype == a.dtype and back.tobytes() == a.tobytes()
    assert export_runtime.first_difference(a, back) is None
    b = a.copy()
    b[1, 0] = 0.0  # -0.0 -> +0.0: equal as numbers, other bits
    d = export_runtime.first_difference(a, b)
    assert d is not None and d.startswith("1 of 4 elements differ; first at (1, 0)") and "80000000 vs 00000000" in d


def _claim(r: Reproducer) -> dict:
    text = script_text(r, CASE, inspect.getsourcefile(calls), "embed_function", {})
    ns: dict = {}
    exec(compile(text.replace('if __name__ == "__main__":', "if False:"), "script", "exec"), ns)
    return ns["CLAIM"]


def test_a_flaky_subjects_single_run_claim_gets_twenty_tries_and_a_steady_one_one():
    r = Reproducer("c.json", "chainer.embed_id", kind="error", error="IndexError in backward: index 9")
    assert _claim(r)["error"] == {"type": "IndexError", "phase": "backward"}
    assert "tries" not in _claim(r)
    assert _claim(Reproducer(**{**r.to_dict(), "env": (), "flaky": True}))["tries"] == 20
