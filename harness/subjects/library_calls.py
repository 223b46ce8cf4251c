"""The library calls of the shipped subjects, written once: the subjects run them, ``harness export`` copies them.

Each call is ``call(env, a, spec, emit, **params)``: ``a`` the case's arrays already on the device, ``spec`` the
case's spec, ``emit(name, value)`` records an output or gradient as the subject's ``Recorder.output`` does, and
``env`` gives what a call needs of the place it runs in: ``env.chainer``, ``env.xp`` (numpy or cupy),
``env.phase(name)`` (a context manager naming the phase an error happens in), ``env.to_device(link)``,
``env.seed(n)`` (the device's global generators, for dropout), ``env.case_seed``, ``env.espnet()`` (the
ESPnet module under test), ``env.context`` (the context's settings as a dict) and
``env.receives_gradient(spec, output, n)`` (which outputs a case's upstream gradients reach).

This module imports nothing but NumPy: ``harness export`` writes its source verbatim into a standalone script,
so the script performs the very calls the subjects do (a test checks that it imports no harness code). A
subject is exportable exactly when its run function was made by :func:`harness.subjects.call_runs.call_run`
from one of these calls (or a plug-in's own, under the same rule).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

Emit = Callable[[str, Any], None]


# ---- embeddings ----------------------------------------------------------------------------------------
def _embed_target(env: Any, target: str, what: str) -> Any:
    if target == "espnet":
        return getattr(env.espnet(), what)
    return getattr(env.chainer.functions if what == "embed_id" else env.chainer.links, what)


def embed_function(env: Any, a: dict, spec: Any, emit: Emit, target: str = "chainer") -> None:
    """``embed_id(x, W, ignore_label)``, backward with the case's ``gy`` (double backprop enabled), then the
    double backward of ``sum(grad.W * ggW)`` with respect to ``gy`` and ``W``."""
    chainer = env.chainer
    F = chainer.functions
    embed_id = _embed_target(env, target, "embed_id")
    W = chainer.Variable(a["W"])
    gy = chainer.Variable(a["gy"])
    with env.phase("forward"):
        y = embed_id(a["x"], W, ignore_label=spec.get("ignore_label"))
    emit("y", y)
    with env.phase("backward"):
        W.cleargrad()
        y.grad_var = gy
        y.backward(enable_double_backprop=True)
    gW = W.grad_var
    emit("grad.W", gW)
    with env.phase("double-backward"):
        W.cleargrad()
        gy.cleargrad()
        s = F.sum(gW * a["ggW"])
        s.backward()
    emit("grad2.gy", gy.grad)
    emit("grad2.W", W.grad)


def embed_link(env: Any, a: dict, spec: Any, emit: Emit, target: str = "chainer") -> None:
    """The ``EmbedID`` link with the case's ``W`` (bit for bit, no initializer draw), forward and backward."""
    cls = _embed_target(env, target, "EmbedID")
    vocab, width = a["W"].shape[0], a["W"].shape[-1]
    # initialW=0: the case's W replaces the parameter, so a constant fill, not a random draw of its size
    link = cls(vocab, width, initialW=0, ignore_label=spec.get("ignore_label"))
    env.to_device(link)
    link.W.array = a["W"]
    with env.phase("forward"):
        y = link(a["x"])
    emit("y", y)
    with env.phase("backward"):
        link.cleargrads()  # Chainer parameters start with NaN gradients on purpose
        y.grad = a["gy"]
        y.backward()
    emit("grad.W", link.W.grad)


# ---- LSTMs ---------------------------------------------------------------------------------------------
def _seed_dropout(env: Any, spec: Any) -> None:
    # Chainer's dropout draws its masks from NumPy's / CuPy's global generators; seed both from the case.
    if float(spec.get("dropout", 0.0)) > 0:
        env.seed(int(spec.get("dropout_seed", env.case_seed)))


def lstm_backward(env: Any, hy: Any, cy: Any, ys: Any, a: dict, spec: Any, emit: Emit) -> None:
    """Record the forward outputs, then back-propagate the case's upstream gradients in one call: only the
    outputs the case's ``grad_outputs`` names receive one (the others none at all, as a loss on some outputs
    leaves them)."""
    chainer = env.chainer
    emit("hy", hy)
    emit("cy", cy)
    for i, y in enumerate(ys):
        emit(f"ys.{i}", y)
    named = [(f"ys.{i}", y, a[f"gys.{i}"]) for i, y in enumerate(ys)] + [("hy", hy, a["ghy"]), ("cy", cy, a["gcy"])]
    chosen = [(o, g) for name, o, g in named if env.receives_gradient(spec or {}, name, len(ys))]
    with env.phase("backward"):
        chainer.backward([o for o, _ in chosen], [chainer.Variable(g) for _, g in chosen])


def load_link_params(link: Any, a: dict, n_cells: int) -> dict:
    """Overwrite the link's parameters with the case's arrays (no initializer randomness); returns them under
    the shared names ``ws.{k}.{j}`` / ``bs.{k}.{j}``."""
    params = {}
    for k in range(n_cells):
        for j in range(8):
            params[f"ws.{k}.{j}"] = getattr(link[k], f"w{j}")
            params[f"bs.{k}.{j}"] = getattr(link[k], f"b{j}")
    for name, p in params.items():
        p.array = a[name]
    return params


def _state_and_param_grads(emit: Emit, hx: Any, cx: Any, params: dict) -> None:
    if hx is not None:
        emit("grad.hx", hx.grad)
        emit("grad.cx", cx.grad)
    for name, p in params.items():
        emit(f"grad.{name}", p.grad)


def lstm_function(env: Any, a: dict, spec: Any, emit: Emit, bidirectional: bool = False) -> None:
    """``F.n_step_lstm`` / ``F.n_step_bilstm`` with explicit weight lists, called as ``L.NStepLSTM`` calls it:
    sort by decreasing length, transpose to time-major, run, transpose back, unsort."""
    chainer = env.chainer
    F = chainer.functions
    s = spec
    n_layers = int(s["n_layers"])
    n_cells = n_layers * (2 if s.get("bidirectional", False) else 1)
    ws = [[chainer.Variable(a[f"ws.{k}.{j}"]) for j in range(8)] for k in range(n_cells)]
    bs = [[chainer.Variable(a[f"bs.{k}.{j}"]) for j in range(8)] for k in range(n_cells)]
    xs = [chainer.Variable(a[f"xs.{i}"]) for i in range(len(s["lengths"]))]
    given = "hx" in a
    # F.n_step_lstm needs hx and cx (it reads hx.data); without given states pass the zeros
    # the links use internally, and record no gradient for them.
    shape = (n_cells, len(xs), int(s["hidden"]))
    xp = env.xp
    hx = chainer.Variable(a["hx"] if given else xp.zeros(shape, dtype=a["ws.0.0"].dtype))
    cx = chainer.Variable(a["cx"] if given else xp.zeros(shape, dtype=a["ws.0.0"].dtype))
    fn = F.n_step_bilstm if bidirectional else F.n_step_lstm
    perm = np.argsort([-len(x) for x in xs], kind="stable").astype(np.int32)
    inv = np.argsort(perm)
    _seed_dropout(env, s)
    with env.phase("forward"):
        xs_tm = F.transpose_sequence([xs[p] for p in perm])
        hy_s, cy_s, ys_tm = fn(n_layers, float(s.get("dropout", 0.0)), F.permutate(hx, perm, axis=1),
                               F.permutate(cx, perm, axis=1), ws, bs, xs_tm)
        ys_sorted = F.transpose_sequence(ys_tm)
        ys = [ys_sorted[inv[i]] for i in range(len(xs))]
        hy = F.permutate(hy_s, perm, axis=1, inv=True)
        cy = F.permutate(cy_s, perm, axis=1, inv=True)
    lstm_backward(env, hy, cy, ys, a, spec, emit)
    for i, x in enumerate(xs):
        emit(f"grad.xs.{i}", x.grad)
    if given:
        emit("grad.hx", hx.grad)
        emit("grad.cx", cx.grad)
    for k in range(n_cells):
        for j in range(8):
            emit(f"grad.ws.{k}.{j}", ws[k][j].grad)
            emit(f"grad.bs.{k}.{j}", bs[k][j].grad)


def lstm_link(env: Any, a: dict, spec: Any, emit: Emit, bidirectional: bool = False) -> None:
    """The ``L.NStepLSTM`` / ``L.NStepBiLSTM`` link with the case's parameters, forward and one backward."""
    chainer = env.chainer
    L = chainer.links
    s = spec
    n_layers, in_size, hidden = int(s["n_layers"]), int(s["in_size"]), int(s["hidden"])
    cls = L.NStepBiLSTM if bidirectional else L.NStepLSTM
    # initialW=0: the case's arrays replace every parameter (load_link_params), so no random draw of them
    link = cls(n_layers, in_size, hidden, float(s.get("dropout", 0.0)), initialW=0)
    env.to_device(link)
    params = load_link_params(link, a, n_layers * (2 if s.get("bidirectional", False) else 1))
    xs = [chainer.Variable(a[f"xs.{i}"]) for i in range(len(s["lengths"]))]
    hx = chainer.Variable(a["hx"]) if "hx" in a else None
    cx = chainer.Variable(a["cx"]) if "cx" in a else None
    _seed_dropout(env, s)
    with env.phase("forward"):
        hy, cy, ys = link(hx, cx, xs)
    link.cleargrads()  # Chainer parameters start with NaN gradients on purpose
    lstm_backward(env, hy, cy, ys, a, spec, emit)
    for i, x in enumerate(xs):
        emit(f"grad.xs.{i}", x.grad)
    _state_and_param_grads(emit, hx, cx, params)


# ---- the pipeline --------------------------------------------------------------------------------------
def embed_lstm(env: Any, a: dict, spec: Any, emit: Emit, target: str = "chainer") -> None:
    """Padded ids through an ``EmbedID`` link (Chainer's or ESPnet's), each row cut to its length, into
    ``L.NStepLSTM`` / ``L.NStepBiLSTM``; gradients flow back to the embedding matrix."""
    chainer = env.chainer
    L = chainer.links
    s = spec
    lengths = [int(n) for n in s["lengths"]]
    vocab, width, hidden, n_layers = int(s["vocab"]), int(s["width"]), int(s["hidden"]), int(s["n_layers"])
    bi = bool(s.get("bidirectional", False))
    ignore = s.get("ignore_label")
    # initialW=0: the case's arrays replace every parameter below, so no random draw of them
    embed = _embed_target(env, target, "EmbedID")(vocab, width, initialW=0,
                                                  ignore_label=-1 if ignore is None else ignore)
    lstm = (L.NStepBiLSTM if bi else L.NStepLSTM)(n_layers, width, hidden, float(s.get("dropout", 0.0)), initialW=0)
    env.to_device(embed)
    env.to_device(lstm)
    embed.W.array = a["W"]
    params = load_link_params(lstm, a, n_layers * (2 if bi else 1))
    hx = chainer.Variable(a["hx"]) if "hx" in a else None
    cx = chainer.Variable(a["cx"]) if "cx" in a else None
    _seed_dropout(env, s)
    with env.phase("forward"):
        e = embed(a["x"])
        xs = [e[i, :n] for i, n in enumerate(lengths)]
        hy, cy, ys = lstm(hx, cx, xs)
    embed.cleargrads()  # Chainer parameters start with NaN gradients on purpose
    lstm.cleargrads()
    lstm_backward(env, hy, cy, ys, a, spec, emit)
    emit("grad.W", embed.W.grad)
    _state_and_param_grads(emit, hx, cx, params)
