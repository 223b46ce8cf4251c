"""harness/upstream/script_calls.py: each shipped call renders as a short ``run(d)`` in the library's words, and a
plug-in's own call is copied whole between its markers, without its docstrings."""

from __future__ import annotations

import ast

import pytest

from harness.upstream.script_calls import PLUGIN_BEGIN, PLUGIN_END, SHIPPED, plugin_call, render_call

SPECS = {"embed_function": {"vocab": 5, "width": 4, "ids_shape": [3]},
         "embed_link": {"vocab": 5, "width": 4, "ids_shape": [3]},
         "lstm_link": {"n_layers": 1, "in_size": 3, "hidden": 2, "lengths": [2, 1]},
         "lstm_function": {"n_layers": 1, "in_size": 3, "hidden": 2, "lengths": [2, 1]},
         "embed_lstm": {"n_layers": 1, "vocab": 5, "width": 3, "hidden": 2, "lengths": [2, 1]}}


@pytest.mark.parametrize("given", [False, True], ids=["drawn-states", "given-states"])
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_each_shipped_call_renders_a_run_function_that_parses(name: str, given: bool) -> None:
    call = render_call(name, SPECS[name], {}, seed=3, given=given)
    assert call.lines[0].startswith("def run(d):") and call.library in ("chainer", "espnet") and call.words
    ast.parse("\n".join([*call.imports, *call.lines]))


PLUGIN_SOURCE = '''def my_call(env, a, spec, emit, scale=1):
    """A docstring the script leaves out."""
    emit("y", a["W"] * scale)
'''


def test_a_plugins_call_is_copied_whole_without_its_docstring() -> None:
    call = plugin_call(PLUGIN_SOURCE, "my_call", {"scale": 2}, {"vocab": 3}, 0, {"name": "default"}, True)
    text = "\n".join(call.lines)
    assert text.startswith(PLUGIN_BEGIN) and PLUGIN_END in text and "docstring" not in text
    assert 'emit("y", a["W"] * scale)' in text and "scale=2" in text and call.library == "plug-in"
    ast.parse("\n".join([*call.imports, *call.lines]))


MODULE_SOURCE = '''
import hashlib
import numpy as np
from typing import Any, Callable

Emit = Callable[[str, Any], None]
_A, _B = 2, 3
UNUSED = 7


def helper(x):
    return hashlib.sha256(bytes([x, _A])).hexdigest()


def my_call(env: Any, a: dict, spec: Any, emit: Emit) -> None:
    emit("y", np.asarray(helper(_B)))
'''


def test_a_copied_call_takes_the_constants_aliases_and_imports_it_uses_and_nothing_else() -> None:
    call = plugin_call(MODULE_SOURCE, "my_call", {}, {}, 0, {"name": "default"}, True)
    text = "\n".join(call.lines)
    assert "_A, _B = 2, 3" in text and text.count("_A, _B = 2, 3") == 1  # one statement binding two names
    assert "Emit = Callable" in text and "UNUSED" not in text
    assert text.index("Emit = Callable") < text.index("def my_call") and text.index("def helper") < text.index(
        "def my_call")
    assert "import hashlib" in call.imports and "from typing import Any, Callable" in call.imports
    assert not any("numpy" in i for i in call.imports)  # every script imports NumPy itself
    import types

    host = types.SimpleNamespace(send=lambda v: v)  # what the script's Chainer does with a host array
    namespace: dict = {"chainer": types.SimpleNamespace(backend=types.SimpleNamespace(CpuDevice=lambda: host))}
    exec(compile("\n".join(["import contextlib, types", "import numpy as np", *call.imports, *call.lines]), "s",
                 "exec"), namespace)  # the copy runs: annotations and constants resolve
    assert len(str(namespace["run"]({})["y"])) == 64


def test_what_a_plugin_imports_from_the_harness_calls_modules_is_copied_never_imported() -> None:
    from pathlib import Path

    source = (Path(__file__).resolve().parents[3] / "suites" / "plugins" / "planted_model.py").read_text()
    call = plugin_call(source, "adadelta_eps", {}, {"recipe": "espnet_rnnlm"}, 0, {"name": "default"}, True)
    text = "\n".join([*call.imports, *call.lines])
    assert "harness" not in text.replace("# ---- the plug-in", "")  # no import of the harness, no name of it
    assert "def run_training(" in text and "def draw_batch(" in text and "ADADELTA_EPS = 1e-8" in text
    ast.parse(text)
