"""Self-tests of the localizer (harness/execute/hooks.py, harness/execute/localization.py): the hook,
alignment, root causes, the CLI.

Positive controls: a pipeline with a node nondeterministic by construction in the middle
(suites/plugins/pipeline_control.py) must be localized to that node; a float64 one-unit readout
whose ``(1, K) @ (K, 1)`` product OpenBLAS splits over threads must be localized to its
``LinearFunction`` under blas1 vs blas2. Negative controls: deterministic subjects give "no
divergence". The command-line tests run ``python -m harness localize`` through the ``harness`` fixture
(suites/conftest.py).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # so that suites.plugins.pipeline_control imports as the CLI would
    sys.path.insert(0, str(ROOT))

from harness.core.cases import Case  # noqa: E402
from harness.core.contexts import get_context  # noqa: E402
from harness.core.corpus_files import write_corpus  # noqa: E402
from harness.core.devices import CPU  # noqa: E402
from harness.core.errors import InvalidArgument  # noqa: E402
from harness.execute.hooks import ArrayDigest, Event, HashStreamHook, Stream, digest_array  # noqa: E402
from harness.execute.localization import Localization, align, chosen_comparison, localize, record  # noqa: E402
from harness.subjects.base import execute  # noqa: E402
from harness.subjects.registry import get_subject, register  # noqa: E402
from suites.plugins import pipeline_control  # noqa: E402

PLUGIN = "suites.plugins.pipeline_control:SUBJECTS"
SHUFFLED_CASE = Case("embed", 7, {"vocab": 4, "width": 16, "ids_shape": [64], "id_kind": "collision",
                                  "distinct": 3})
READOUT_CASE = Case("lstm", 5, {"n_layers": 1, "in_size": 16384, "hidden": 1, "lengths": [1],
                                "dtype": "float64", "w_scale": 0.01})
LSTM_CASE = Case("lstm", 3, {"n_layers": 1, "in_size": 64, "hidden": 64, "lengths": [20] * 16,
                             "initial_state": "given"})
EMBED_CASE = Case("embed", 1, {"vocab": 6, "width": 5, "ids_shape": [4, 7], "id_kind": "collision",
                               "distinct": 2})
MATMUL_LABELS = {"LinearFunction", "LinearGradData", "LinearGradWeight", "MatMul"}


@pytest.fixture(scope="module", autouse=True)
def plugin_subjects():
    from harness.subjects.registry import SUBJECTS

    for s in pipeline_control.SUBJECTS:
        register(s, replace=True)
    yield
    for s in pipeline_control.SUBJECTS:  # leave the registry as other test modules expect it
        SUBJECTS.pop(s.name, None)


def _differing_results(subject: str, case: Case, ctx_a: str, ctx_b: str) -> list[str]:
    """Ground truth without the hook: the final outputs whose bits differ between two contexts."""
    a = execute(get_subject(subject), case, CPU, get_context(ctx_a))
    b = execute(get_subject(subject), case, CPU, get_context(ctx_b))
    assert a.ok and b.ok, (a.error, b.error)
    return sorted(k for k in a.arrays if a.arrays[k].tobytes() != b.arrays[k].tobytes())


# ---- the hook ----------------------------------------------------------------------------------
def test_digest_is_bitwise_and_typed():
    x = np.array([0.0, 1.0], np.float32)
    assert digest_array(x) == digest_array(x.copy())
    assert digest_array(x) != digest_array(np.array([-0.0, 1.0], np.float32))  # signed zero is a bit
    assert digest_array(x) != digest_array(x.astype(np.float64))
    assert digest_array(x.reshape(2, 1)) != digest_array(x)  # same bytes, other shape
    assert digest_array(np.asfortranarray(np.arange(6.0).reshape(2, 3))) == digest_array(np.arange(6.0).reshape(2, 3))
    assert digest_array(None).missing and digest_array(None).short() == "none"


def test_hook_sees_every_node_inside_execute_and_leaves_no_trace():
    from harness.core.compat import import_chainer

    chainer = import_chainer()
    F = chainer.functions
    x = chainer.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    W = chainer.Variable(np.ones((4, 3), np.float32))
    with HashStreamHook() as hook:
        y = F.tanh(F.linear(x, W))
        loss = F.sum(y)
        loss.backward()
    assert "HashStreamHook" not in chainer.get_function_hooks()  # uninstalled on exit
    ev = hook.events
    fwd = [e for e in ev if e.phase == "forward" and e.parent is None]
    assert [e.label for e in fwd] == ["LinearFunction", "Tanh", "Sum"]
    assert [e.node for e in fwd] == [0, 1, 2]
    lin = fwd[0]
    assert lin.input_names == ("x[0]", "x[1]") and lin.outputs_seen
    assert lin.outputs[0] == digest_array(F.linear(x, W).array)  # the forward output, captured
    bwd = [e for e in ev if e.phase == "backward"]
    assert [e.label for e in bwd] == ["Sum", "Tanh", "LinearFunction"]  # the order they ran
    assert [e.node for e in bwd] == [2, 1, 0]  # mapped to the forward order
    lb = bwd[-1]
    assert lb.input_names[:1] == ("gy[0]",) and "x[1]" in lb.input_names and "y[0]" in lb.input_names
    assert lb.output_names == ("gx[0]", "gx[1]")
    assert lb.outputs[0] == digest_array(x.grad) and lb.outputs[1] == digest_array(W.grad)
    inner = [e for e in ev if e.parent == lb.step]
    assert {e.label for e in inner} >= {"LinearGradData", "LinearGradWeight"}
    # Nothing was left on the nodes: the per-node wrappers removed themselves.
    node = y.creator
    assert "forward" not in vars(node) and "backward" not in vars(node)
    assert "forward" not in vars(loss.creator) and "backward" not in vars(loss.creator)


def test_record_runs_the_subject_under_the_hook():
    s = record("chainer.NStepLSTM", LSTM_CASE, "cpu", "blas1")
    assert s.status == "ok" and s.error is None
    counts = Counter((e.phase, e.label) for e in s.events)
    # NStepLSTM on CPU: two linears (input and hidden projections) per time step.
    assert counts[("forward", "LinearFunction")] == 40 and counts[("backward", "LinearFunction")] == 40
    assert counts[("forward", "LSTM")] == 20
    assert set(s.results) >= {"hy", "cy", "grad.ws.0.0"}
    assert all(e.outputs_seen for e in s.events)


# ---- alignment on hand-made streams --------------------------------------------------------------
def _d(tag: str) -> ArrayDigest:
    return ArrayDigest(tag * 8, (2,), "float32")


def _ev(step: int, label: str, ins: str, outs: str, phase: str = "forward", parent: int | None = None) -> Event:
    return Event(step, phase, label, step, tuple(_d(c) for c in ins), tuple(f"x[{i}]" for i in range(len(ins))),
                 tuple(_d(c) for c in outs), tuple(f"y[{i}]" for i in range(len(outs))), parent)


def _stream(events: list[Event], results: dict[str, str] | None = None, label: str = "r") -> Stream:
    return Stream(label, tuple(events), {k: _d(v) for k, v in (results or {"out": "z"}).items()}, "ok")


def test_align_names_first_node_with_matching_inputs_and_differing_outputs():
    a = _stream([_ev(0, "A", "a", "b"), _ev(1, "B", "b", "c"), _ev(2, "C", "c", "d"), _ev(3, "D", "q", "e")],
                label="one")
    b = _stream([_ev(0, "A", "a", "b"), _ev(1, "B", "b", "X"), _ev(2, "C", "X", "Y"), _ev(3, "D", "q", "e")],
                {"out": "w"}, label="two")
    loc = align(a, b)
    assert loc.aligned and loc.root is not None and loc.root.label == "B"
    assert [e.label for e in loc.downstream] == ["C"]  # its inputs differed: downstream, not root
    assert loc.matched_before == 1 and loc.outputs_differ == ("out",)
    msg = loc.message()
    assert "Root cause: forward of B (node #1, step 1): outputs differ while all 1 input matched" in msg
    assert "digest cccccccc… vs XXXXXXXX…" in msg and "Nodes before the root matched: 1" in msg
    assert "Downstream of the root (1 node): forward of C #2" in msg
    d = loc.to_dict()
    json.dumps(d)
    assert d["root"]["label"] == "B" and d["downstream"][0]["label"] == "C" and d["diverged"]


def test_align_divergence_entering_from_outside_the_graph():
    # The second node's input differs although the first node's output matched: the divergence came
    # in from outside function nodes (a differing initial input, an accumulation into a grad).
    a = _stream([_ev(0, "A", "a", "b"), _ev(1, "B", "p", "c"), _ev(2, "C", "c", "d")])
    b = _stream([_ev(0, "A", "a", "b"), _ev(1, "B", "P", "C"), _ev(2, "C", "C", "D")])
    loc = align(a, b)
    assert loc.root is None and [e.label for e in loc.downstream] == ["B", "C"]
    assert "entered from outside the graph" in loc.note and "x[0]" in loc.note
    assert loc.diverged


def test_align_outputs_differ_but_no_node_differs():
    a = _stream([_ev(0, "A", "a", "b")], {"y": "a", "grad.W": "b"})
    b = _stream([_ev(0, "A", "a", "b")], {"y": "a", "grad.W": "c"})
    loc = align(a, b)
    assert loc.root is None and not loc.downstream and loc.outputs_differ == ("grad.W",)
    assert "outside Chainer function nodes" in loc.note and "grad.W" in loc.note


def test_align_different_graphs_by_label_and_occurrence():
    a = _stream([_ev(0, "A", "a", "b"), _ev(1, "B", "b", "c"), _ev(2, "B", "c", "d")])
    b = _stream([_ev(0, "A", "a", "b"), _ev(1, "Extra", "b", "b"), _ev(2, "B", "b", "c"), _ev(3, "B", "c", "E")])
    loc = align(a, b)
    assert not loc.aligned and "streams do not align (different graphs)" in loc.note
    assert loc.unmatched == 1 and loc.compared == 3
    assert loc.root is not None and loc.root.label == "B" and loc.root.step == 2  # the second B
    assert "Streams do not align" in loc.message()


def test_align_reports_the_inner_root_of_a_backward():
    a = _stream([_ev(0, "L", "a", "b"), _ev(1, "L", "gb", "ga", "backward"), _ev(2, "GW", "gb", "w", parent=1),
                 _ev(3, "Next", "ga", "n")])
    b = _stream([_ev(0, "L", "a", "b"), _ev(1, "L", "gb", "gA", "backward"), _ev(2, "GW", "gb", "W", parent=1),
                 _ev(3, "Next", "gA", "N")])
    loc = align(a, b)
    assert loc.root.phase == "backward" and loc.root.label == "L"
    assert loc.inside_root is not None and loc.inside_root.label == "GW"
    assert [e.label for e in loc.downstream] == ["Next"]  # the inner node is inside, not downstream
    assert "inside it, first: forward of GW" in loc.message()


def test_localize_reports_the_comparison_whose_divergence_reaches_the_outputs():
    a = _stream([_ev(0, "A", "a", "b"), _ev(1, "T", "b", "c")], {"out": "z"}, label="run 1")
    rounded = _stream([_ev(0, "A", "a", "B"), _ev(1, "T", "B", "c")], {"out": "z"}, label="run 2")
    reaches = _stream([_ev(0, "A", "a", "B"), _ev(1, "T", "B", "C")], {"out": "w"}, label="run 3")
    same = _stream([_ev(0, "A", "a", "b"), _ev(1, "T", "b", "c")], {"out": "z"}, label="run 4")
    first, second, third = align(a, rounded), align(a, reaches), align(a, same)
    assert first.root is not None and not first.outputs_differ and not first.downstream  # rounded away by T
    assert chosen_comparison([first, second, third]) is second
    assert chosen_comparison([first, third]) is first  # a root that does not reach the outputs beats none
    assert chosen_comparison([third, third]) is third


def test_align_identical():
    a = _stream([_ev(0, "A", "a", "b")])
    loc = align(a, a)
    assert loc.root is None and not loc.diverged and "no divergence" in loc.note


# ---- (a) the positive control: a nondeterministic node in the middle of a pipeline --------------
def test_pipeline_control_root_is_the_shuffled_node():
    # Two runs of the control differ in the scatter-add's sums by an ulp or so, and later nodes may round that
    # away (measured over 4,000 localizations): the forward tanh saturates in about one pair in 450, so that no
    # output differs (localize then reports another of its 4 comparisons, one whose outputs differ); the product
    # z * ggW rounds it away in about one in 300, and then so does the loss; the backward rounds it away in about
    # one in sixteen (tanh's gradient 1 - y*y), and then only forward nodes differ. So each localization is
    # checked for what its differing outputs imply, and the backward on the first whose gradients differ (at
    # most 8 tries: all 8 gradient-identical has a chance of about 1e-10).
    with_grads = None
    for attempt in range(8):
        loc = localize(SHUFFLED_CASE, "control.pipeline_shuffled", repeats=5)
        assert isinstance(loc, Localization) and loc.aligned
        assert loc.root is not None, loc.message()
        assert (loc.root.phase, loc.root.label) == ("forward", "ShuffledScatterAdd")
        # embed_id, linear, add, tanh ran before it and matched; nothing differed before it.
        assert loc.matched_before == 4 and not loc.entered_before
        assert "y" in loc.outputs_differ  # y is the forward Tanh's output
        down = {(e.phase, e.label) for e in loc.downstream}
        assert ("forward", "Tanh") in down
        if "loss" in loc.outputs_differ:  # the loss is the sum of z * ggW
            assert {("forward", "_ * _"), ("forward", "Sum")} <= down
        assert all(e.step > loc.root.step for e in loc.downstream)
        assert len(loc.comparisons) == 4 and all("ShuffledScatterAdd" in c for c in loc.comparisons)
        msg = loc.message()
        assert loc.runs[0] == "run 1" and msg.startswith(f"Compared: run 1 vs {loc.runs[1]}")
        assert "Root cause: forward of ShuffledScatterAdd (node #4, step 4)" in msg
        assert "Nodes before the root matched: 4" in msg and "Downstream of the root (" in msg
        if {"grad.W", "grad.V"} <= set(loc.outputs_differ):
            with_grads = loc
            break
    assert with_grads is not None, "8 localizations, the gradients identical in every one"
    down = {(e.phase, e.label) for e in with_grads.downstream}
    assert {("backward", "Tanh"), ("backward", "ShuffledScatterAdd"), ("backward", "LinearFunction"),
            ("backward", "EmbedIDFunction")} <= down


# ---- (b) BLAS threads: blas1 vs blas2 ----------------------------------------------------------
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="blas1 vs blas2 needs at least two cores")
def test_blas_threads_root_is_the_matrix_product():
    truth = _differing_results("control.blas_readout", READOUT_CASE, "blas1", "blas2")
    assert truth, ("blas1 and blas2 gave identical bits for a float64 (1, 16384) @ (16384, 1) product: this "
                   "BLAS does not split ddot over threads, so the localizer cannot be tested on BLAS threads here")
    loc = localize(READOUT_CASE, "control.blas_readout", contexts=("blas1", "blas2"))
    assert loc.runs == ("blas1", "blas2") and loc.aligned
    assert loc.root is not None and (loc.root.phase, loc.root.label) == ("forward", "LinearFunction")
    assert loc.matched_before == 1  # the tanh before it matched
    assert ("forward", "Tanh") in {(e.phase, e.label) for e in loc.downstream}
    assert set(loc.outputs_differ) == set(truth)


def test_nsteplstm_blas1_vs_blas2_agrees_with_the_bits():
    """NStepLSTM on CPU under blas1 vs blas2: the localizer must agree with the final bits.

    Where the bits differ, the root must be a matrix product with matched nodes before it. On the
    machine this was written on (OpenBLAS 0.3.31, 2 cores) no NStepLSTM size tried differs: OpenBLAS
    splits sgemm/dgemm/gemv over M and N, never over the summed dimension. Then the localizer must
    say "no divergence" over the whole graph (a real check: 1134 node events must align and match),
    and a warning says the matrix-product branch was not exercised.
    """
    truth = _differing_results("chainer.NStepLSTM", LSTM_CASE, "blas1", "blas2")
    loc = localize(LSTM_CASE, "chainer.NStepLSTM", contexts=("blas1", "blas2"))
    assert loc.aligned and loc.compared == 1134
    assert set(loc.outputs_differ) == set(truth)
    if truth:
        first = loc.inside_root if (loc.root is not None and loc.root.label not in MATMUL_LABELS) else loc.root
        assert loc.root is not None, loc.message()
        assert first is not None and first.label in MATMUL_LABELS, loc.message()
        assert loc.matched_before > 0
    else:
        assert loc.root is None and not loc.downstream and "no divergence" in loc.note
        warnings.warn("NStepLSTM gave identical bits under blas1 and blas2 on this machine: the "
                      "matrix-product root was checked with control.blas_readout instead", stacklevel=1)


def test_nsteplstm_blas_split_anchor_root_is_the_first_matrix_product():
    """The anchor case whose (512 x 600) @ (600 x 64) input GEMM OpenBLAS splits differently at 1 and
    2 threads: the root must be that matrix product, with the nodes before it matched."""
    import os

    from harness.generate.corpora import anchor_cases

    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 cores for a 2-thread BLAS")
    case = next(c for c in anchor_cases() if "blas-split" in c.tags)
    truth = _differing_results("chainer.NStepLSTM", case, "blas1", "blas2")
    assert truth, ("the blas-split anchor gave identical bits at 1 and 2 BLAS threads: this BLAS does not "
                   "split that GEMM; pick a new anchor size (harness/corpora.py)")
    loc = localize(case, "chainer.NStepLSTM", contexts=("blas1", "blas2"))
    assert loc.root is not None, loc.message()
    assert loc.root.label in MATMUL_LABELS, loc.message()
    assert loc.matched_before > 0 and loc.downstream, loc.message()
    assert set(loc.outputs_differ) == set(truth)


# ---- (c) negative controls --------------------------------------------------------------------
@pytest.mark.parametrize("subject", ["chainer.embed_id", "control.deterministic"])
def test_deterministic_subject_no_divergence(subject):
    loc = localize(EMBED_CASE, subject, repeats=2)
    assert loc.root is None and not loc.downstream and not loc.outputs_differ and not loc.diverged
    assert "no divergence" in loc.note and loc.aligned
    if subject == "chainer.embed_id":
        assert loc.compared > 0  # forward, backward and double backward nodes all compared


def test_two_devices_compare_one_run_each():
    loc = localize(EMBED_CASE, "chainer.embed_id", devices=("cpu", "cpu"))
    assert loc.runs == ("cpu", "cpu") and loc.root is None and not loc.diverged


def test_divergence_outside_function_nodes_is_named():
    loc = localize(EMBED_CASE, "control.nondeterministic", repeats=3)  # host code, no Chainer node
    assert loc.root is None and loc.outputs_differ == ("grad.W",)
    assert "outside Chainer function nodes" in loc.note


def test_localize_rejects_bad_arguments():
    with pytest.raises(InvalidArgument):
        localize(EMBED_CASE, "chainer.embed_id", repeats=1)
    with pytest.raises(InvalidArgument):
        localize(EMBED_CASE, "chainer.embed_id", contexts=("blas1",))
    with pytest.raises(InvalidArgument):
        localize(EMBED_CASE, "chainer.embed_id", contexts=("blas1", "blas2"), devices=("cpu", "cpu"))
    with pytest.raises(InvalidArgument):
        localize(EMBED_CASE, "chainer.NStepLSTM")  # wrong family


# ---- the command line (python -m harness localize: the one parser, the one case loader) ----------------
@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_cli_single_case_and_corpus(tmp_path, harness):
    one = tmp_path / "case.json"
    one.write_text(SHUFFLED_CASE.to_json())
    p = harness("localize", str(one), "--subject", "control.pipeline_shuffled", "--subject-plugin", PLUGIN,
                "--repeats", "2")
    assert p.rc == 0, p.stderr
    assert "Root cause: forward of ShuffledScatterAdd" in p.stdout

    corpus = tmp_path / "corpus.jsonl"
    write_corpus([EMBED_CASE, SHUFFLED_CASE], str(corpus))
    p = harness("localize", str(corpus), "--case-id", EMBED_CASE.id, "--subject", "chainer.embed_id",
                "--repeats", "2", "--json")
    assert p.rc == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["root"] is None and d["diverged"] is False and "no divergence" in d["note"]


@pytest.mark.parametrize("argv_tail,names", [
    (["--subject", "no.such.subject"], "no.such.subject"),
    (["--subject", "chainer.embed_id", "--contexts", "blas1"], "contexts='blas1'"),
    (["--subject", "chainer.embed_id", "--device", "tpu"], "device='tpu'"),
    (["--subject", "chainer.embed_id", "--subject-plugin", "nope"], "nope"),
    (["--repeats", "2"], "--subject"),  # --subject missing
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, harness, argv_tail, names):
    one = tmp_path / "case.json"
    one.write_text(EMBED_CASE.to_json())
    p = harness("localize", str(one), *argv_tail)
    err = p.stderr.strip()
    assert p.rc == 2 and err.startswith("harness: error:") and "\n" not in err and names in err, err


def test_cli_corpus_needs_an_exact_case_id(tmp_path, harness):
    corpus = tmp_path / "corpus.jsonl"
    write_corpus([EMBED_CASE, SHUFFLED_CASE], str(corpus))
    for tail, says in ([], "--case-id"), (["--case-id", EMBED_CASE.id[:8]], "is not in"):
        p = harness("localize", str(corpus), "--subject", "chainer.embed_id", *tail)
        assert p.rc == 2 and says in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    p = harness("localize", str(tmp_path / "missing.json"), "--subject", "chainer.embed_id")
    assert p.rc == 2 and "does not exist" in p.stderr, p.stderr
