"""The exported script's text: every check renders valid Python, lines of code are counted as a reader counts
them, tensor names become the fewest prefixes."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from harness.upstream.script import Check, Inputs, _prefixes, lines_of_code, script_text
from harness.upstream.script_calls import SHIPPED, render_call

CHECKS = {
    "error": Check("error", error=("ValueError", "backward")),
    "bad_input": Check("bad_input", allowed={"IndexError": ("forward",)}),
    "repeats": Check("repeats", count=5, tensors=("grad.W",)),
    "processes": Check("processes", count=3),
    "contexts": Check("contexts", contexts=(("default", {"OPENBLAS_NUM_THREADS": "2"}),
                                            ("blas1", {"OPENBLAS_NUM_THREADS": "1"})), threads=2),
    "devices": Check("devices", devices=("@numpy", "@cupy:0")),
    "relation": Check("relation", members=(("prefix", "member.prefix."),),
                      pairs=(("prefix", "y", (0,), 0, "y"), ("prefix", "grad.W", None, 0, "grad.W"))),
    "tolerance": Check("tolerance", tolerance={"y": (1e-5, 1e-6, False)}),
    "bits": Check("bits", reference="the declared order"),
}
EMBED = {"vocab": 5, "width": 4, "ids_shape": [3], "ignore_label": -1}
LSTM = {"n_layers": 1, "in_size": 3, "hidden": 2, "lengths": [2, 1]}
PIPE = {"n_layers": 1, "vocab": 5, "width": 3, "hidden": 2, "lengths": [2, 1], "ignore_label": -1}


@pytest.mark.parametrize("kind", sorted(CHECKS))
@pytest.mark.parametrize("call", sorted(SHIPPED))
def test_every_check_of_every_shipped_call_renders_a_short_valid_script(kind, call):
    spec = EMBED if call.startswith("embed_") and call != "embed_lstm" else PIPE if call == "embed_lstm" else LSTM
    rendered = render_call(call, spec, {}, seed=1, given=False)
    text = script_text(title="t", what="w", conditions="CPU", call=rendered, check=CHECKS[kind],
                       inputs=Inputs(data="r.npz"))
    ast.parse(text)
    assert "import harness" not in text and "from harness" not in text
    assert "--save-outputs" in text and "sys.exit(1)" in text and "sys.exit(0)" in text
    assert lines_of_code(text) <= 60, (call, kind, lines_of_code(text))


def test_seeded_inputs_write_ids_out_and_draw_floats_from_the_seed():
    rendered = render_call("embed_link", EMBED, {}, seed=1, given=False)
    inputs = Inputs(seed=7, literal={"x": np.array([0, 4, -1], np.int32)},
                    drawn={"W": ((5, 4), "float32"), "gy": ((3, 4), "float32")})
    text = script_text(title="t", what="w", conditions="CPU", call=rendered, check=CHECKS["error"], inputs=inputs)
    assert "'x': np.array([0, 4, -1], np.int32)" in text
    assert "rng = np.random.default_rng(7)" in text and "'W': rng.standard_normal((5, 4)).astype(np.float32)" in text
    assert ".npz" not in text


def test_an_error_claim_ends_the_call_after_the_claimed_phase():
    whole = render_call("embed_function", EMBED, {}, seed=1, given=False)
    cut = render_call("embed_function", EMBED, {}, seed=1, given=False, stop="backward")
    assert any("double-backward" in ln for ln in whole.lines)
    assert not any("double-backward" in ln for ln in cut.lines)


def test_espnet_calls_import_espnets_module_and_name_espnet_as_the_library():
    rendered = render_call("embed_function", EMBED, {"target": "espnet"}, seed=1, given=False)
    assert rendered.library == "espnet"
    assert rendered.imports == ("from espnet.nets.chainer_backend.deterministic_embed_id import embed_id",)


def test_lines_of_code_leave_out_the_docstring_comments_and_blank_lines():
    text = '#!/usr/bin/env python3\n"""Title.\n\nMore.\n"""\nimport os  # why\n\n# a comment\nx = 1\n'
    assert lines_of_code(text) == 2


def test_tensor_names_become_the_fewest_prefixes():
    assert _prefixes(["grad.xs.0", "grad.xs.1", "grad.hx", "grad.ws.0.3"]) == ("grad.hx", "grad.ws.", "grad.xs.")


def test_what_a_script_observed_is_read_after_its_verdict_word_even_where_the_note_holds_a_colon():
    from harness.upstream.script import OBSERVED, REPRODUCED, observed_text

    said = "ValueError in backward: cannot reshape"
    assert observed_text(f"{REPRODUCED}{said}") == said
    assert observed_text(f"{OBSERVED}default and blas1 first differ at step 0") == \
        "default and blas1 first differ at step 0"  # not "see the docstring): ..."
    assert observed_text("NOT REPRODUCED: the same bits") is None


def test_a_copied_model_call_on_a_gpu_trains_there_its_env_giving_the_devices_xp_and_moving_its_links():
    """A copied call's own code comes first: the run function after it takes the device, and the env it hands the
    call (its ``xp``, its ``to_device``) is the device's, not the host's."""
    import inspect

    from harness.subjects import model_calls
    from harness.upstream.script_calls import plugin_call

    call = plugin_call(inspect.getsource(model_calls), "train", {"recipe": "espnet_rnnlm"},
                       {"recipe": "espnet_rnnlm", "steps": 2}, 1, {"name": "default"}, False)
    text = script_text(title="t", what="w", conditions="GPU", call=call, check=CHECKS["devices"], inputs=Inputs())
    ast.parse(text)
    assert "def run(d, device='@cupy:0'):" in text and "def run(d):" not in text
    assert "xp=chainer.get_device(device).xp," in text and "to_device=lambda link: link.to_device(device)" in text
    host = script_text(title="t", what="w", conditions="CPU", call=call, check=CHECKS["repeats"], inputs=Inputs())
    assert "xp=np," in host and "to_device=lambda link: None" in host
