"""LSTM subjects: Chainer's ``NStepLSTM`` / ``NStepBiLSTM`` links and ``n_step_lstm`` / ``n_step_bilstm``.

Outputs (names shared with the oracle): ``hy``, ``cy``, ``ys.{i}``; gradients of
``sum(ys_i * gys_i) + sum(hy * ghy) + sum(cy * gcy)`` (one ``chainer.backward`` call with the
case's upstream gradients): ``grad.xs.{i}``, ``grad.hx``, ``grad.cx`` (when the case gives initial
states), ``grad.ws.{k}.{j}``, ``grad.bs.{k}.{j}``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from harness.core.cases import Case, build_arrays
from harness.core.compat import import_chainer
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS", "run_lstm_outputs", "link_params", "load_link_params", "record_state_and_param_grads"]


def _dirs(spec: Any) -> int:
    return 2 if spec.get("bidirectional", False) else 1


def _seed_dropout(case: Case, device: Device) -> None:
    # Chainer's dropout draws its masks from NumPy's / CuPy's global generators; seed both from the case.
    if float(case.spec.get("dropout", 0.0)) > 0:
        device.seed(int(case.spec.get("dropout_seed", case.seed)))


def _weights(a: dict[str, Any], n_cells: int, chainer: Any) -> tuple[list[list[Any]], list[list[Any]]]:
    ws = [[chainer.Variable(a[f"ws.{k}.{j}"]) for j in range(8)] for k in range(n_cells)]
    bs = [[chainer.Variable(a[f"bs.{k}.{j}"]) for j in range(8)] for k in range(n_cells)]
    return ws, bs


def run_lstm_outputs(rec: Recorder, hy: Any, cy: Any, ys: Any, a: dict[str, Any], chainer: Any,
                     spec: Any = None) -> None:
    """Record the forward outputs, then back-propagate the case's upstream gradients in one call: only the
    outputs the case's ``grad_outputs`` names receive one (the others none at all, as a loss on some outputs
    leaves them; :func:`harness.core.cases.receives_gradient`)."""
    from harness.core.cases import receives_gradient

    rec.output("hy", hy)
    rec.output("cy", cy)
    for i, y in enumerate(ys):
        rec.output(f"ys.{i}", y)
    named = [(f"ys.{i}", y, a[f"gys.{i}"]) for i, y in enumerate(ys)] + [("hy", hy, a["ghy"]), ("cy", cy, a["gcy"])]
    chosen = [(o, g) for name, o, g in named if receives_gradient(spec or {}, name, len(ys))]
    with rec.phase("backward"):
        chainer.backward([o for o, _ in chosen], [chainer.Variable(g) for _, g in chosen])


def record_state_and_param_grads(rec: Recorder, hx: Any, cx: Any, params: dict[str, Any]) -> None:
    """Record grad.hx / grad.cx (when the case gave initial states) and every parameter gradient."""
    if hx is not None:
        rec.output("grad.hx", hx.grad)
        rec.output("grad.cx", cx.grad)
    for name, p in params.items():
        rec.output(f"grad.{name}", p.grad)


def _function_run(bidirectional: bool) -> Callable[[Case, Device, Context, Recorder], None]:
    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        chainer = import_chainer()
        F = chainer.functions
        s = case.spec
        a = {k: device.put(v) for k, v in build_arrays(case).items()}
        n_layers = int(s["n_layers"])
        n_cells = n_layers * _dirs(s)
        ws, bs = _weights(a, n_cells, chainer)
        xs = [chainer.Variable(a[f"xs.{i}"]) for i in range(len(s["lengths"]))]
        given = "hx" in a
        # F.n_step_lstm needs hx and cx (it reads hx.data); without given states pass the zeros
        # the links use internally, and record no gradient for them.
        shape = (n_cells, len(xs), int(s["hidden"]))
        xp = device.xp
        hx = chainer.Variable(a["hx"] if given else xp.zeros(shape, dtype=a["ws.0.0"].dtype))
        cx = chainer.Variable(a["cx"] if given else xp.zeros(shape, dtype=a["ws.0.0"].dtype))
        fn = F.n_step_bilstm if bidirectional else F.n_step_lstm
        # F.n_step_* take time-major input, sorted by decreasing length (xs[t] is (B_t, I)); do
        # what L.NStepLSTM does: sort, transpose, run, transpose back, unsort.
        perm = np.argsort([-len(x) for x in xs], kind="stable").astype(np.int32)
        inv = np.argsort(perm)
        _seed_dropout(case, device)
        with rec.phase("forward"):
            xs_tm = F.transpose_sequence([xs[p] for p in perm])
            hy_s, cy_s, ys_tm = fn(n_layers, float(s.get("dropout", 0.0)), F.permutate(hx, perm, axis=1),
                                   F.permutate(cx, perm, axis=1), ws, bs, xs_tm)
            ys_sorted = F.transpose_sequence(ys_tm)
            ys = [ys_sorted[inv[i]] for i in range(len(xs))]
            hy = F.permutate(hy_s, perm, axis=1, inv=True)
            cy = F.permutate(cy_s, perm, axis=1, inv=True)
        run_lstm_outputs(rec, hy, cy, ys, a, chainer, case.spec)
        for i, x in enumerate(xs):
            rec.output(f"grad.xs.{i}", x.grad)
        if given:
            rec.output("grad.hx", hx.grad)
            rec.output("grad.cx", cx.grad)
        for k in range(n_cells):
            for j in range(8):
                rec.output(f"grad.ws.{k}.{j}", ws[k][j].grad)
                rec.output(f"grad.bs.{k}.{j}", bs[k][j].grad)

    return run


def link_params(link: Any, n_cells: int) -> dict[str, Any]:
    """The link's parameters under the shared names ``ws.{k}.{j}`` / ``bs.{k}.{j}``."""
    out = {}
    for k in range(n_cells):
        cell = link[k]
        for j in range(8):
            out[f"ws.{k}.{j}"] = getattr(cell, f"w{j}")
            out[f"bs.{k}.{j}"] = getattr(cell, f"b{j}")
    return out


def load_link_params(link: Any, a: dict[str, Any], n_cells: int) -> dict[str, Any]:
    """Overwrite the link's parameters with the case's arrays (no initializer randomness)."""
    params = link_params(link, n_cells)
    for name, p in params.items():
        p.array = a[name]
    return params


def _link_run(bidirectional: bool) -> Callable[[Case, Device, Context, Recorder], None]:
    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        chainer = import_chainer()
        L = chainer.links
        s = case.spec
        a = {k: device.put(v) for k, v in build_arrays(case).items()}
        n_layers, in_size, hidden = int(s["n_layers"]), int(s["in_size"]), int(s["hidden"])
        cls = L.NStepBiLSTM if bidirectional else L.NStepLSTM
        link = cls(n_layers, in_size, hidden, float(s.get("dropout", 0.0)))
        link.to_device(device.chainer_device())
        params = load_link_params(link, a, n_layers * _dirs(s))
        xs = [chainer.Variable(a[f"xs.{i}"]) for i in range(len(s["lengths"]))]
        hx = chainer.Variable(a["hx"]) if "hx" in a else None
        cx = chainer.Variable(a["cx"]) if "cx" in a else None
        _seed_dropout(case, device)
        with rec.phase("forward"):
            hy, cy, ys = link(hx, cx, xs)
        link.cleargrads()  # Chainer parameters start with NaN gradients on purpose
        run_lstm_outputs(rec, hy, cy, ys, a, chainer, case.spec)
        for i, x in enumerate(xs):
            rec.output(f"grad.xs.{i}", x.grad)
        record_state_and_param_grads(rec, hx, cx, params)

    return run


def _uni(case: Case) -> bool:
    return not case.spec.get("bidirectional", False)


def _bi(case: Case) -> bool:
    return bool(case.spec.get("bidirectional", False))


_DECLARED = {
    "cpu": Declared(True, "NumPy/BLAS GEMMs and elementwise ops; reproducible at a fixed BLAS thread count"),
    "gpu": Declared(True, "without cuDNN (CuPy 14): cuBLAS GEMMs and CuPy elementwise kernels, no atomics declared"),
}

SUBJECTS: tuple[Subject, ...] = (
    Subject("chainer.NStepLSTM", "lstm", _link_run(False), declared=_DECLARED, accepts=_uni,
            description="the link chainer.links.NStepLSTM", source="chainer/links/rnn/n_step_lstm.py"),
    Subject("chainer.NStepBiLSTM", "lstm", _link_run(True), declared=_DECLARED, accepts=_bi,
            description="the link chainer.links.NStepBiLSTM", source="chainer/links/rnn/n_step_lstm.py"),
    Subject("chainer.n_step_lstm", "lstm", _function_run(False), declared=_DECLARED, accepts=_uni,
            description="chainer.functions.n_step_lstm with explicit weight lists",
            source="chainer/functions/rnn/n_step_lstm.py"),
    Subject("chainer.n_step_bilstm", "lstm", _function_run(True), declared=_DECLARED, accepts=_bi,
            description="chainer.functions.n_step_bilstm with explicit weight lists",
            source="chainer/functions/rnn/n_step_lstm.py"),
)
