"""The float64 oracle (harness/subjects/oracle.py): finite differences, Chainer float64 on CPU,
negative controls and bad inputs.

Tolerances, all in float64:

- finite differences: central differences, ``eps = 1e-6``, along random unit directions (as
  ``chainer.gradient_check`` does) and element by element on a tiny case;
  ``|fd - analytic| <= FD_ATOL + FD_RTOL * |analytic|`` with ``FD_RTOL = 1e-6``, ``FD_ATOL = 1e-7``
  (the rounding error of the difference quotient is ~1e-16 * |L| / eps ~ 1e-9 here, the truncation
  error ~eps**2).
- Chainer 7.8.1 float64 on CPU: ``np.testing.assert_allclose(rtol=1e-10, atol=1e-12)`` for every
  output and gradient (the two differ only in summation order and ``sigmoid`` formula, ~1e-15).
- negative control: one weight moved by 1e-3 must break that comparison.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.cases import Case, build_arrays, encode_array, lstm_weight_shapes
from harness.core.compat import import_chainer
from harness.core.errors import InvalidArgument
from harness.subjects.oracle import GATE_WEIGHTS, ORACLES, embed_oracle, lstm_oracle, pipeline_oracle

chainer = import_chainer()
import chainer.functions as F  # noqa: E402  (after the compat layer)
import chainer.links as L  # noqa: E402

EPS = 1e-6
FD_RTOL, FD_ATOL = 1e-6, 1e-7
CH_RTOL, CH_ATOL = 1e-10, 1e-12
F64 = np.float64


# ---- cases ---------------------------------------------------------------------------------------
def make(family: str, seed: int, **spec) -> tuple[dict, dict[str, np.ndarray]]:
    """A case's spec and its arrays, floats cast to float64 (ids left as they are)."""
    case = Case(family=family, seed=seed, spec=spec)
    arrays = build_arrays(case)
    out = {k: (v if k == "x" else v.astype(F64)) for k, v in arrays.items()}
    return dict(case.spec), out


def embed_case(seed: int = 0, **over) -> tuple[dict, dict[str, np.ndarray]]:
    spec = {"vocab": 7, "width": 3, "ids_shape": [4, 5], "ignore_label": -1, "ignore_frac": 0.3,
            "w_dtype": "float64", "id_kind": "collision", "distinct": 3}
    spec.update(over)
    return make("embed", seed, **spec)


def lstm_case(seed: int = 0, **over) -> tuple[dict, dict[str, np.ndarray]]:
    spec = {"n_layers": 2, "in_size": 3, "hidden": 4, "lengths": [3, 1, 2], "bidirectional": True,
            "initial_state": "given", "dtype": "float64"}
    spec.update(over)
    return make("lstm", seed, **spec)


def pipeline_case(seed: int = 0, **over) -> tuple[dict, dict[str, np.ndarray]]:
    spec = {"vocab": 6, "width": 3, "hidden": 4, "n_layers": 1, "lengths": [3, 2],
            "ignore_label": -1, "dtype": "float64"}
    spec.update(over)
    return make("pipeline", seed, **spec)


LSTM_SPECS = [
    dict(n_layers=1, bidirectional=False, initial_state="given", lengths=[3, 1, 2]),
    dict(n_layers=2, bidirectional=False, initial_state="none", lengths=[2, 4, 4, 1]),
    dict(n_layers=1, bidirectional=True, initial_state="given", lengths=[1, 3, 2]),
    dict(n_layers=2, bidirectional=True, initial_state="given", lengths=[3, 1, 2]),
    dict(n_layers=2, bidirectional=True, initial_state="none", lengths=[5], in_size=2, hidden=3),
]
LSTM_IDS = [f"L{s['n_layers']}-{'bi' if s['bidirectional'] else 'uni'}-{s['initial_state']}-"
            f"{'.'.join(map(str, s['lengths']))}" for s in LSTM_SPECS]


# ---- scalar losses (the definitions the gradients belong to) ----------------------------------------
def lstm_loss(spec: dict, arrays: dict[str, np.ndarray]) -> float:
    out = lstm_oracle(spec, arrays)
    total = sum(math.fsum((out[f"ys.{i}"] * arrays[f"gys.{i}"]).ravel()) for i in range(len(spec["lengths"])))
    return total + math.fsum((out["hy"] * arrays["ghy"]).ravel()) + math.fsum((out["cy"] * arrays["gcy"]).ravel())


def pipeline_loss(spec: dict, arrays: dict[str, np.ndarray]) -> float:
    out = pipeline_oracle(spec, arrays)
    total = sum(math.fsum((out[f"ys.{i}"] * arrays[f"gys.{i}"]).ravel()) for i in range(len(spec["lengths"])))
    return total + math.fsum((out["hy"] * arrays["ghy"]).ravel()) + math.fsum((out["cy"] * arrays["gcy"]).ravel())


def embed_loss(spec: dict, arrays: dict[str, np.ndarray]) -> float:
    return math.fsum((embed_oracle(spec, arrays)["y"] * arrays["gy"]).ravel())


def embed_loss2(spec: dict, arrays: dict[str, np.ndarray]) -> float:
    return math.fsum((embed_oracle(spec, arrays)["grad.W"] * arrays["ggW"]).ravel())


# ---- finite differences ---------------------------------------------------------------------------
def directional_fd(loss, spec: dict, arrays: dict[str, np.ndarray], names: list[str],
                   rng: np.random.Generator) -> tuple[float, dict[str, np.ndarray]]:
    """Central difference of ``loss`` along a random unit direction over ``names``."""
    d = {n: rng.standard_normal(arrays[n].shape) for n in names}
    norm = math.sqrt(sum(float((v * v).sum()) for v in d.values()))
    d = {n: v / norm for n, v in d.items()}
    plus = {**arrays, **{n: arrays[n] + EPS * d[n] for n in names}}
    minus = {**arrays, **{n: arrays[n] - EPS * d[n] for n in names}}
    return (loss(spec, plus) - loss(spec, minus)) / (2 * EPS), d


def assert_fd(fd: float, analytic: float, what: str) -> None:
    assert abs(fd - analytic) <= FD_ATOL + FD_RTOL * abs(analytic), \
        f"{what}: finite difference {fd!r} vs analytic {analytic!r} (diff {fd - analytic:.3g})"


def check_directions(loss, spec, arrays, grads, groups: dict[str, list[str]], grad_name, seed: int,
                     n_dirs: int = 2) -> None:
    rng = np.random.default_rng(seed)
    for label, names in groups.items():
        for _ in range(n_dirs):
            fd, d = directional_fd(loss, spec, arrays, names, rng)
            analytic = math.fsum(float((grads[grad_name(n)] * d[n]).sum()) for n in names)
            assert_fd(fd, analytic, f"{label} along a random direction")


def lstm_groups(spec: dict) -> dict[str, list[str]]:
    dirs = 2 if spec["bidirectional"] else 1
    in_size = spec.get("in_size", spec.get("width"))
    names = [n for n, _ in lstm_weight_shapes(spec["n_layers"], in_size, spec["hidden"], spec["bidirectional"])]
    groups = {"ws": [n for n in names if n.startswith("ws.")], "bs": [n for n in names if n.startswith("bs.")]}
    for k in range(spec["n_layers"] * dirs):  # every layer and direction on its own too
        groups[f"ws.{k}"] = [n for n in names if n.startswith(f"ws.{k}.")]
    if spec.get("initial_state") == "given":
        groups["hx"], groups["cx"] = ["hx"], ["cx"]
    return groups


@pytest.mark.parametrize("spec_over", LSTM_SPECS, ids=LSTM_IDS)
def test_lstm_gradients_match_finite_differences(spec_over):
    spec, arrays = lstm_case(seed=3, **spec_over)
    grads = lstm_oracle(spec, arrays)
    groups = lstm_groups(spec)
    groups["xs"] = [f"xs.{i}" for i in range(len(spec["lengths"]))]
    groups["all"] = sorted({n for g in groups.values() for n in g})
    check_directions(lstm_loss, spec, arrays, grads, groups, lambda n: f"grad.{n}", seed=11)
    assert ("grad.hx" in grads) == (spec["initial_state"] == "given")


def test_lstm_gradients_elementwise_on_a_tiny_case():
    spec, arrays = lstm_case(seed=5, n_layers=2, in_size=2, hidden=2, lengths=[2, 1, 3],
                             bidirectional=True, initial_state="given")
    grads = lstm_oracle(spec, arrays)
    names = [n for n in arrays if n.split(".")[0] in ("xs", "ws", "bs", "hx", "cx")]
    checked = 0
    for n in names:
        for idx in np.ndindex(arrays[n].shape):
            plus, minus = arrays[n].copy(), arrays[n].copy()
            plus[idx] += EPS
            minus[idx] -= EPS
            fd = (lstm_loss(spec, {**arrays, n: plus}) - lstm_loss(spec, {**arrays, n: minus})) / (2 * EPS)
            assert_fd(fd, float(grads[f"grad.{n}"][idx]), f"d L / d {n}{list(idx)}")
            checked += 1
    assert checked > 200


def test_embed_gradients_match_finite_differences():
    for over in ({}, {"ignore_label": None, "ignore_frac": 0.0}, {"ignore_label": 2, "id_kind": "uniform"}):
        spec, arrays = embed_case(seed=2, **over)
        out = embed_oracle(spec, arrays)
        check_directions(embed_loss, spec, arrays, out, {"W": ["W"]}, lambda n: "grad.W", seed=1, n_dirs=3)
        check_directions(embed_loss2, spec, arrays, out, {"gy": ["gy"]}, lambda n: "grad2.gy", seed=2, n_dirs=3)


def test_pipeline_gradients_match_finite_differences():
    for over in ({}, {"bidirectional": True, "initial_state": "given", "lengths": [2, 4, 1], "n_layers": 2}):
        spec, arrays = pipeline_case(seed=4, id_kind="collision", distinct=3, **over)
        grads = pipeline_oracle(spec, arrays)
        groups = lstm_groups({**spec, "bidirectional": spec.get("bidirectional", False)})
        groups["W"] = ["W"]
        check_directions(pipeline_loss, spec, arrays, grads, groups, lambda n: f"grad.{n}", seed=7)


# ---- Chainer float64 on CPU ---------------------------------------------------------------------------
def V(a: np.ndarray):
    return chainer.Variable(np.array(a, dtype=F64))


def chainer_n_step(spec: dict, arrays: dict[str, np.ndarray], xs: list) -> tuple[dict, dict]:
    """F.n_step_lstm / F.n_step_bilstm on per-sequence inputs ``xs`` (Variables, any order of lengths).

    F.n_step_* take time-major, length-sorted input (F.transpose_sequence); this does what
    L.NStepLSTM does: sort by length, transpose, run, transpose back, unsort. hx/cx are zeros when
    not given (F.n_step_lstm of Chainer 7.8.1 needs a Variable there: None fails on ``hx.data``).
    """
    n_layers, H, bi = spec["n_layers"], spec["hidden"], bool(spec.get("bidirectional", False))
    lengths = list(spec["lengths"])
    B, S = len(lengths), n_layers * (2 if bi else 1)
    in_size = xs[0].shape[1]
    given = spec.get("initial_state") == "given"
    hx = V(arrays["hx"]) if given else V(np.zeros((S, B, H)))
    cx = V(arrays["cx"]) if given else V(np.zeros((S, B, H)))
    names = [n for n, _ in lstm_weight_shapes(n_layers, in_size, H, bi)]
    params = {n: V(arrays[n]) for n in names}
    ws = [[params[f"ws.{k}.{j}"] for j in range(8)] for k in range(S)]
    bs = [[params[f"bs.{k}.{j}"] for j in range(8)] for k in range(S)]
    perm = np.argsort([-n for n in lengths], kind="stable").astype(np.int32)
    inv = np.argsort(perm)
    xs_tm = F.transpose_sequence([xs[p] for p in perm])
    fn = F.n_step_bilstm if bi else F.n_step_lstm
    hy_s, cy_s, ys_tm = fn(n_layers, 0.0, F.permutate(hx, perm, axis=1), F.permutate(cx, perm, axis=1),
                           ws, bs, xs_tm)
    ys_sorted = F.transpose_sequence(ys_tm)
    ys = [ys_sorted[inv[i]] for i in range(B)]
    hy, cy = F.permutate(hy_s, perm, axis=1, inv=True), F.permutate(cy_s, perm, axis=1, inv=True)
    leaves = list(params.values()) + [hx, cx] + [x for x in xs if x.creator is None]
    for v in leaves:
        v.cleargrad()
    outputs = ys + [hy, cy]
    upstream = [arrays[f"gys.{i}"] for i in range(B)] + [arrays["ghy"], arrays["gcy"]]
    for out, g in zip(outputs, upstream):
        assert out.shape == g.shape
    chainer.backward(outputs, [V(g) for g in upstream])
    out = {f"ys.{i}": ys[i].array for i in range(B)}
    out["hy"], out["cy"] = hy.array, cy.array
    for n, p in params.items():
        out[f"grad.{n}"] = p.grad
    if given:
        out["grad.hx"], out["grad.cx"] = hx.grad, cx.grad
    return out, {"xs": xs}


def chainer_lstm(spec: dict, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    xs = [V(arrays[f"xs.{i}"]) for i in range(len(spec["lengths"]))]
    out, _ = chainer_n_step(spec, arrays, xs)
    out.update({f"grad.xs.{i}": x.grad for i, x in enumerate(xs)})
    return out


def chainer_embed(spec: dict, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    W, gy = V(arrays["W"]), V(arrays["gy"])
    W.cleargrad()
    y = F.embed_id(arrays["x"].astype(np.int32), W, ignore_label=spec.get("ignore_label"))
    y.grad_var = gy
    y.backward(enable_double_backprop=True)
    gW = W.grad_var
    loss2 = F.sum(gW * V(arrays["ggW"]))
    gy.cleargrad()
    loss2.backward()
    return {"y": y.array, "grad.W": gW.array, "grad2.gy": gy.grad}


def chainer_pipeline(spec: dict, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    W = V(arrays["W"])
    W.cleargrad()
    e = F.embed_id(arrays["x"].astype(np.int32), W, ignore_label=spec.get("ignore_label"))
    xs = [e[i, :n] for i, n in enumerate(spec["lengths"])]
    out, _ = chainer_n_step(spec, arrays, xs)
    out["grad.W"] = W.grad
    return out


def max_diff(ours: dict, theirs: dict) -> float:
    return max(float(np.max(np.abs(ours[k] - theirs[k]), initial=0.0)) for k in theirs)


def assert_same(ours: dict, theirs: dict, what: str) -> None:
    # noise.<tensor>: the oracle's reference run in the case's dtype (the amplification floor), one per tensor
    assert {k for k in ours if k.startswith("noise.")} <= {f"noise.{k}" for k in ours}
    ours = {k: v for k, v in ours.items() if not k.startswith("noise.")}
    assert set(ours) == set(theirs), f"{what}: keys differ: {sorted(set(ours) ^ set(theirs))}"
    for k in sorted(theirs):
        assert ours[k].dtype == F64 and ours[k].shape == theirs[k].shape, f"{what}: {k}"
        np.testing.assert_allclose(ours[k], theirs[k], rtol=CH_RTOL, atol=CH_ATOL, err_msg=f"{what}: {k}")


@pytest.mark.parametrize("spec_over", LSTM_SPECS, ids=LSTM_IDS)
def test_lstm_matches_chainer_float64(spec_over):
    spec, arrays = lstm_case(seed=8, **spec_over)
    ours, theirs = lstm_oracle(spec, arrays), chainer_lstm(spec, arrays)
    assert_same(ours, theirs, "lstm")
    assert max_diff(ours, theirs) < 1e-12


def test_lstm_float32_case_cast_to_float64_matches_chainer():
    spec, arrays = lstm_case(seed=9, dtype="float32", gy_kind="large", w_scale=1.5)
    assert_same(lstm_oracle(spec, arrays), chainer_lstm(spec, arrays), "lstm float32 case")


@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**16), n_layers=st.integers(1, 3), in_size=st.integers(1, 4),
       hidden=st.integers(1, 4), lengths=st.lists(st.integers(1, 5), min_size=1, max_size=4),
       bi=st.booleans(), init=st.sampled_from(["given", "none"]))
def test_lstm_matches_chainer_on_random_shapes(seed, n_layers, in_size, hidden, lengths, bi, init):
    spec, arrays = lstm_case(seed=seed, n_layers=n_layers, in_size=in_size, hidden=hidden, lengths=lengths,
                             bidirectional=bi, initial_state=init)
    assert_same(lstm_oracle(spec, arrays), chainer_lstm(spec, arrays), "lstm (hypothesis)")


def test_lstm_matches_the_chainer_link_on_unsorted_lengths():
    """L.NStepBiLSTM sorts and unsorts itself; the oracle's per-sequence semantics must agree."""
    spec, arrays = lstm_case(seed=12, n_layers=2, lengths=[2, 5, 1, 3], bidirectional=True, initial_state="given")
    with chainer.using_config("dtype", F64):
        link = L.NStepBiLSTM(2, spec["in_size"], spec["hidden"], 0.0)
    for k, layer in enumerate(link.ws):
        for j, p in enumerate(layer):
            p.array = arrays[f"ws.{k}.{j}"].copy()
            link.bs[k][j].array = arrays[f"bs.{k}.{j}"].copy()
    hx, cx = V(arrays["hx"]), V(arrays["cx"])
    xs = [V(arrays[f"xs.{i}"]) for i in range(4)]
    link.cleargrads()
    hy, cy, ys = link(hx, cx, xs)
    chainer.backward(list(ys) + [hy, cy],
                     [V(arrays[f"gys.{i}"]) for i in range(4)] + [V(arrays["ghy"]), V(arrays["gcy"])])
    ours = lstm_oracle(spec, arrays)
    np.testing.assert_allclose(ours["hy"], hy.array, rtol=CH_RTOL, atol=CH_ATOL)
    np.testing.assert_allclose(ours["cy"], cy.array, rtol=CH_RTOL, atol=CH_ATOL)
    for i in range(4):
        np.testing.assert_allclose(ours[f"ys.{i}"], ys[i].array, rtol=CH_RTOL, atol=CH_ATOL)
        np.testing.assert_allclose(ours[f"grad.xs.{i}"], xs[i].grad, rtol=CH_RTOL, atol=CH_ATOL)
    for k, layer in enumerate(link.ws):
        for j, p in enumerate(layer):
            np.testing.assert_allclose(ours[f"grad.ws.{k}.{j}"], p.grad, rtol=CH_RTOL, atol=CH_ATOL)
    np.testing.assert_allclose(ours["grad.hx"], hx.grad, rtol=CH_RTOL, atol=CH_ATOL)


def test_gate_order_is_chainers_code_not_its_docstring():
    """One step from a zero state: h = o * tanh(i * a) with a from W2 and o from W3 (docstring: swapped)."""
    spec, arrays = lstm_case(seed=13, n_layers=1, lengths=[1], bidirectional=False, initial_state="none")
    x = arrays["xs.0"][0]
    z = [arrays[f"ws.0.{j}"] @ x + arrays[f"bs.0.{j}"] + arrays[f"bs.0.{j + 4}"] for j in range(4)]
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    code = sig(z[3]) * np.tanh(sig(z[0]) * np.tanh(z[2]))
    docs = sig(z[2]) * np.tanh(sig(z[0]) * np.tanh(z[3]))
    theirs = chainer_lstm(spec, arrays)["hy"][0, 0]
    np.testing.assert_allclose(theirs, code, rtol=1e-12, atol=1e-14)
    assert np.max(np.abs(theirs - docs)) > 1e-3
    np.testing.assert_allclose(lstm_oracle(spec, arrays)["hy"][0, 0], code, rtol=1e-12, atol=1e-14)
    assert dict(GATE_WEIGHTS) == {"i": (0, 4), "f": (1, 5), "a": (2, 6), "o": (3, 7)}


def test_ragged_backward_direction_starts_at_each_sequences_own_end():
    """A bidirectional batch equals each sequence run alone (batch of one), for every output."""
    spec, arrays = lstm_case(seed=14, n_layers=2, lengths=[3, 1, 2], bidirectional=True, initial_state="given")
    batch = lstm_oracle(spec, arrays)
    theirs = chainer_lstm(spec, arrays)
    for i, n in enumerate(spec["lengths"]):
        one = {k: v for k, v in arrays.items() if k.startswith(("ws.", "bs."))}
        one.update({"xs.0": arrays[f"xs.{i}"], "gys.0": arrays[f"gys.{i}"]})
        for name in ("hx", "cx", "ghy", "gcy"):
            one[name] = arrays[name][:, i:i + 1]
        alone = lstm_oracle({**spec, "lengths": [n]}, one)
        np.testing.assert_allclose(alone["ys.0"], batch[f"ys.{i}"], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(alone["hy"][:, 0], batch["hy"][:, i], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(alone["ys.0"], theirs[f"ys.{i}"], rtol=CH_RTOL, atol=CH_ATOL)
    # The backward half of ys at t=0 is the backward state after the whole sequence: hy[1] (layer 0, backward).
    one_layer = {**spec, "n_layers": 1}
    out1 = lstm_oracle(one_layer, {**arrays, "hx": arrays["hx"][:2], "cx": arrays["cx"][:2],
                                   "ghy": arrays["ghy"][:2], "gcy": arrays["gcy"][:2],
                                   **{f"gys.{i}": arrays[f"gys.{i}"] for i in range(3)}})
    H = spec["hidden"]
    for i, n in enumerate(spec["lengths"]):
        np.testing.assert_array_equal(out1[f"ys.{i}"][0, H:], out1["hy"][1, i])
        np.testing.assert_array_equal(out1[f"ys.{i}"][n - 1, :H], out1["hy"][0, i])


@pytest.mark.parametrize("over", [
    {},
    {"ignore_label": None, "ignore_frac": 0.0, "id_kind": "uniform"},
    {"ignore_label": 3, "ignore_frac": 0.4, "id_kind": "uniform"},
    {"id_kind": "all_equal", "ids_shape": [50, 3], "gy_kind": "cancel"},
    {"ids_shape": [2, 3, 4], "w_dtype": "float32", "id_dtype": "int8"},
], ids=["ignore-1", "no-ignore", "ignore-in-range", "all-equal-cancel", "3d-f32-int8"])
def test_embed_matches_chainer_float64(over):
    spec, arrays = embed_case(seed=6, **over)
    ours, theirs = embed_oracle(spec, arrays), chainer_embed(spec, arrays)
    # grad.W: the oracle's sums are correctly rounded, Chainer's (numpy.add.at) run in order, so
    # they may differ by the recursive-summation bound (n - 1) * 2**-53 * sum|terms| per element,
    # which is what cancelling terms ("cancel": +-1e4 pairs) exercise; everything else: CH_RTOL/ATOL.
    x, gy = arrays["x"].astype(np.int64).ravel(), arrays["gy"].reshape(-1, arrays["gy"].shape[-1])
    keep = x != spec["ignore_label"] if spec.get("ignore_label") is not None else np.ones(x.shape, bool)
    abs_sum, count = np.zeros_like(arrays["W"]), np.zeros(arrays["W"].shape[0])
    np.add.at(abs_sum, x[keep], np.abs(gy[keep]))
    np.add.at(count, x[keep], 1)
    bound = CH_ATOL + CH_RTOL * np.abs(theirs["grad.W"]) + 1.01 * np.maximum(count - 1, 0)[:, None] * 2.0**-53 * abs_sum
    assert (np.abs(ours["grad.W"] - theirs["grad.W"]) <= bound).all()
    assert_same({k: v for k, v in ours.items() if k != "grad.W"},
                {k: v for k, v in theirs.items() if k != "grad.W"}, "embed")
    if "cancel" not in spec.get("gy_kind", ""):
        assert_same(ours, theirs, "embed")
    if spec.get("ignore_label") is not None:
        ignored = arrays["x"] == spec["ignore_label"]
        assert not ours["y"][ignored].any() and not ours["grad2.gy"][ignored].any()


def test_embed_empty_ids():
    """No ids: the oracle gives an empty y and zero gradients; Chainer 7.8.1's forward agrees, its
    backward fails (EmbedIDGrad reshapes gy to (0, -1)), so there is nothing further to compare."""
    spec, arrays = embed_case(seed=6, ids_shape=[0, 4])
    ours = embed_oracle(spec, arrays)
    assert ours["y"].shape == (0, 4, 3) and ours["grad2.gy"].shape == (0, 4, 3)
    assert ours["grad.W"].shape == (7, 3) and not ours["grad.W"].any()
    y = F.embed_id(arrays["x"].astype(np.int32), V(arrays["W"]), ignore_label=-1)
    assert y.shape == ours["y"].shape
    with pytest.raises(ValueError, match="cannot reshape"):
        chainer_embed(spec, arrays)


@pytest.mark.parametrize("over", [
    {},
    {"ignore_label": None, "lengths": [1, 3, 2]},
    {"bidirectional": True, "initial_state": "given", "n_layers": 2, "lengths": [2, 4, 1],
     "id_kind": "collision", "distinct": 2},
    {"ignore_label": 0, "lengths": [3, 3]},
])
def test_pipeline_matches_chainer_float64(over):
    spec, arrays = pipeline_case(seed=10, **over)
    ours, theirs = pipeline_oracle(spec, arrays), chainer_pipeline(spec, arrays)
    assert_same(ours, theirs, "pipeline")


# ---- the "true" scatter-add ------------------------------------------------------------------------------
def test_embed_grad_w_is_the_correctly_rounded_sum_and_order_free():
    spec, arrays = embed_case(seed=21, id_kind="all_equal", ids_shape=[400], gy_kind="cancel", ignore_frac=0.1)
    out = embed_oracle(spec, arrays)
    x, gy = arrays["x"], arrays["gy"]
    keep = x != -1
    row = int(x[keep][0])
    expected = [math.fsum(gy[keep][:, j].tolist()) for j in range(gy.shape[1])]
    assert out["grad.W"][row].tolist() == expected
    perm = np.random.default_rng(0).permutation(x.size)
    shuffled = embed_oracle(spec, {**arrays, "x": x[perm], "gy": gy[perm]})
    assert np.array_equal(shuffled["grad.W"], out["grad.W"])
    assert not out["grad.W"][np.arange(7) != row].any()


def test_embed_grad_w_nonfinite_and_overflowing_sums():
    x = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2], dtype=np.int32)
    gy = np.array([[np.inf], [1.0], [-np.inf], [np.nan], [1.0], [2.0], [1e308], [1e308], [-1e308]])
    spec = {"ignore_label": None}
    arrays = {"x": x, "W": np.zeros((3, 1)), "gy": gy, "ggW": np.zeros((3, 1))}
    gW = embed_oracle(spec, arrays)["grad.W"][:, 0]
    assert math.isnan(gW[0]) and math.isnan(gW[1]) and gW[2] == 1e308


# ---- negative controls --------------------------------------------------------------------------------------
def test_negative_control_perturbed_lstm_weight_fails_the_chainer_comparison():
    spec, arrays = lstm_case(seed=8)
    theirs = chainer_lstm(spec, arrays)
    assert_same(lstm_oracle(spec, arrays), theirs, "unperturbed")
    w = arrays["ws.2.5"].copy()
    w[1, 2] += 1e-3
    with pytest.raises(AssertionError):
        assert_same(lstm_oracle(spec, {**arrays, "ws.2.5": w}), theirs, "perturbed")


def test_negative_control_perturbed_embedding_row_fails_the_chainer_comparison():
    spec, arrays = embed_case(seed=6)
    theirs = chainer_embed(spec, arrays)
    used = int(arrays["x"][arrays["x"] != -1][0])
    W = arrays["W"].copy()
    W[used, 0] += 1e-3
    with pytest.raises(AssertionError):
        assert_same(embed_oracle(spec, {**arrays, "W": W}), theirs, "perturbed")


def test_negative_control_wrong_gate_order_fails():
    """Swapping W2/W3 (the docstring's order) must be caught by the comparison."""
    spec, arrays = lstm_case(seed=8, n_layers=1, bidirectional=False)
    theirs = chainer_lstm(spec, arrays)
    swapped = dict(arrays)
    for a, b in (("ws.0.2", "ws.0.3"), ("ws.0.6", "ws.0.7"), ("bs.0.2", "bs.0.3"), ("bs.0.6", "bs.0.7")):
        swapped[a], swapped[b] = arrays[b], arrays[a]
    with pytest.raises(AssertionError):
        assert_same(lstm_oracle(spec, swapped), theirs, "swapped gates")


# ---- bad inputs -------------------------------------------------------------------------------------------
def test_out_of_range_id_raises_invalid_argument():
    case = Case(family="embed", seed=0, spec={"vocab": 5, "width": 2, "ids_shape": [2, 2], "ignore_label": None},
                arrays={"x": encode_array(np.array([[1, 7], [0, 2]], dtype=np.int32))})
    arrays = build_arrays(case)
    with pytest.raises(InvalidArgument) as exc:
        embed_oracle(case.spec, arrays)
    msg = str(exc.value)
    assert msg == "x contains id=7 outside [0, vocab=5) that is not ignore_label=None"
    assert "\n" not in msg


def test_negative_id_wraps_unless_it_is_the_ignore_label():
    """Chainer's documented CPU semantics outside debug mode: -V <= id < 0 reads and writes row V + id; an id
    below -V is outside the table and raises."""
    spec, arrays = embed_case(seed=1)
    x = arrays["x"].copy()
    x[0, 0] = -1
    ignored = embed_oracle(spec, {**arrays, "x": x})  # -1 is the ignore label: a zero row
    assert not ignored["y"][0, 0].any()
    wrapped = embed_oracle({**spec, "ignore_label": None}, {**arrays, "x": x})
    V = arrays["W"].shape[0]
    assert np.array_equal(wrapped["y"][0, 0], arrays["W"][V - 1].astype(np.float64))
    x[0, 1] = -V - 1
    with pytest.raises(InvalidArgument, match=re.escape(f"id={-V - 1} outside [0, vocab={V})")):
        embed_oracle(spec, {**arrays, "x": x})
    with pytest.raises(InvalidArgument, match="dtype=float32"):
        embed_oracle(spec, {**arrays, "x": x.astype(np.float32)})


def test_pipeline_out_of_range_id_raises_but_padding_is_not_checked():
    spec, arrays = pipeline_case(seed=2, ignore_label=None)
    assert (arrays["x"][1, 2:] == -1).all()  # padding beyond length 2 is -1, not an id: accepted
    pipeline_oracle(spec, arrays)
    x = arrays["x"].copy()
    x[1, 1] = 6
    with pytest.raises(InvalidArgument, match=re.escape("x contains id=6 outside [0, vocab=6)")):
        pipeline_oracle(spec, {**arrays, "x": x})


def test_dropout_raises_invalid_argument():
    spec, arrays = lstm_case(seed=0, dropout=0.5)
    with pytest.raises(InvalidArgument, match=re.escape("dropout=0.5: the oracle has no dropout masks")):
        lstm_oracle(spec, arrays)
    pspec, parrays = pipeline_case(seed=0, dropout=0.5)
    with pytest.raises(InvalidArgument, match="dropout=0.5"):
        pipeline_oracle(pspec, parrays)


def test_registry_and_output_dtypes():
    assert ORACLES == {"embed": embed_oracle, "lstm": lstm_oracle, "pipeline": pipeline_oracle}
    spec, arrays = lstm_case(seed=1, dtype="float16", initial_state="none")
    out = lstm_oracle(spec, arrays)
    assert all(v.dtype == F64 for v in out.values())
    assert "grad.hx" not in out and "grad.cx" not in out
    assert out["ys.0"].shape == (3, 8) and out["hy"].shape == (4, 3, 4)
